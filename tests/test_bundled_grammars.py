"""Every bundled grammar compiles, accepts its valid samples and rejects its invalid ones.

Oracles: Lark's Earley parser for the Lark grammars and xgrammar for the GBNF ones check that the
samples mean what their folders say, independently of pda.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from pda import Grammar, grammars
from pda.errors import ValidationError

FILES = grammars.files()
CASES = [
    pytest.param(path.name, sample, kind == "valid", id=f"{path.name}-{kind}-{sample.name}")
    for path in FILES
    for kind, listing in zip(("valid", "invalid"), grammars.samples(path.name))
    for sample in listing
]


@functools.lru_cache(maxsize=None)
def compiled(name: str) -> Grammar:
    """The bundled grammar ``name`` compiled once per test session."""
    return Grammar.from_file(grammars.path(name))


def test_registry_lists_the_bundled_languages() -> None:
    assert {"json", "arithmetic", "sql_select", "c_like", "csv", "xml"} <= set(grammars.names())
    assert grammars.path("json").name == "json.gbnf"
    assert grammars.path("json.lark").name == "json.lark"
    assert grammars.samples("json.lark") == grammars.samples("json")


def test_registry_refuses_an_unknown_name() -> None:
    with pytest.raises(KeyError, match="no bundled grammar 'cobol'; known: .*json"):
        grammars.path("cobol")


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_grammar_has_enough_samples(path: Path) -> None:
    valid, invalid = grammars.samples(path.name)
    assert len(valid) >= 3 and len(invalid) >= 2


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_grammar_compiles(path: Path) -> None:
    assert isinstance(compiled(path.name), Grammar)


@pytest.mark.parametrize("name, sample, valid", CASES)
def test_sample(name: str, sample: Path, valid: bool) -> None:
    data = sample.read_bytes()
    grammar = compiled(name)
    assert grammar.accepts(data) is valid
    if valid:
        grammar.validate(data)
        assert grammar.is_prefix(data[: len(data) // 2])
    else:
        with pytest.raises(ValidationError) as info:
            grammar.validate(data)
        assert 0 <= info.value.offset <= len(data)
        assert info.value.line >= 1 and info.value.column >= 1


@pytest.mark.parametrize("name, sample, valid", [c for c in CASES if c.values[2]])
def test_matcher_fed_in_chunks_agrees(name: str, sample: Path, valid: bool) -> None:
    data = sample.read_bytes()
    matcher = compiled(name).matcher()
    for i in range(0, len(data), 7):
        assert matcher.feed(data[i : i + 7])
    assert matcher.is_complete()


LARK_CASES = [c for c in CASES if c.values[0].endswith(".lark")]
GBNF_CASES = [c for c in CASES if c.values[0].endswith(".gbnf")]


@pytest.mark.parametrize("name, sample, valid", LARK_CASES)
def test_lark_earley_agrees(name: str, sample: Path, valid: bool) -> None:
    lark = pytest.importorskip("lark")
    text = grammars.path(name).read_text(encoding="utf-8")
    parser = lark.Lark(text, parser="earley", lexer="dynamic_complete")  # pda's scannerless reading
    try:
        parser.parse(sample.read_text(encoding="utf-8"))
        accepted = True
    except lark.exceptions.LarkError:
        accepted = False
    assert accepted is valid


@functools.lru_cache(maxsize=None)
def xgrammar_compiled(name: str) -> object:
    """The bundled GBNF grammar ``name`` compiled by xgrammar (with an empty vocabulary)."""
    import xgrammar as xgr

    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)
    return compiler.compile_grammar(grammars.path(name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name, sample, valid", GBNF_CASES)
def test_xgrammar_agrees(name: str, sample: Path, valid: bool) -> None:
    xgr = pytest.importorskip("xgrammar")
    matcher = xgr.GrammarMatcher(xgrammar_compiled(name), terminate_without_stop_token=True)
    accepted = matcher.accept_string(sample.read_bytes()) and matcher.is_terminated()
    assert accepted is valid


def test_xml_cannot_check_that_end_tags_match() -> None:
    """Documented limitation: matching tag names need the copy language, which is not context-free."""
    assert compiled("xml").accepts(b"<a>text</b>")


@pytest.mark.parametrize(
    "name, text, valid",
    [
        ("json", '{"a": [1, {"b": "\\u00e9"}]}', True),
        ("json", "[1 2]", False),
        ("json.lark", ' [ 1 , "x" ] ', True),
        ("json.lark", "[1,]", False),
        ("arithmetic", "1 - 2 - 3 * (4 + f(5, 6))", True),
        ("arithmetic", "1 + ", False),
        ("sql_select", "select a from t where a = 1 or b < 2", True),
        ("sql_select", "SELECT FROM t", False),
        ("c_like", "int main(void) { return 0; }", True),
        ("c_like", "int main(void) { return 0 }", False),
        ("csv", 'a,"b\nc"\n', True),
        ("csv", 'a,"b', False),
        ("xml", "<a x='1'><b/>text &amp; more</a>", True),
        ("xml", "<a>", False),
    ],
)
def test_small_documents(name: str, text: str, valid: bool) -> None:
    assert compiled(name).accepts(text) is valid
