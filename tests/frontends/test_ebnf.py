"""The GBNF / XGrammar EBNF frontend: IR for small grammars, real grammars, acceptance, xgrammar oracle."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator

import pytest

import pda
from pda.errors import GrammarSyntaxError, UndefinedRuleError
from pda.frontends.ebnf import parse_ebnf
from pda.ir import (
    EPSILON, Alt, Bytes, CharClass, Expr, GrammarIR, Ref, Repeat, Seq, alt, any_char, chars, lit, opt, plus,
    repeat, seq, star,
)

DATA = Path(__file__).parent / "data"
FIXTURES = sorted(p for p in DATA.iterdir() if p.suffix in (".gbnf", ".ebnf"))
CORPUS = Path("/work/shared/corpora/gbnf")


def cc(*ranges: tuple[str, str] | str, negate: bool = False) -> Expr:
    """A character class from 'a' or ('a', 'z') items."""
    rs = [(ord(r), ord(r)) if isinstance(r, str) else (ord(r[0]), ord(r[1])) for r in ranges]
    return chars(rs, negate=negate)


# ----------------------------------------------------------------------------- IR of small grammars

IR_CASES: list[tuple[str, dict[str, Expr]]] = [
    ('root ::= "ab"', {"root": lit("ab")}),
    ('root ::= "ab" | [a-c] x\nx ::= "y"*', {"root": alt(lit("ab"), seq(cc(("a", "c")), Ref("x"))), "x": star(lit("y"))}),
    ('root ::= "a"? "b"+ "c"{2} "d"{2,} "e"{1,3} "f"{ 0 , 4 }',
     {"root": seq(opt(lit("a")), plus(lit("b")), repeat(lit("c"), 2, 2), repeat(lit("d"), 2, None),
                  repeat(lit("e"), 1, 3), repeat(lit("f"), 0, 4))}),
    ('root ::= "a"?*', {"root": star(opt(lit("a")))}),
    ('root ::= ("a" "b")+ | ("c" | "d")', {"root": alt(plus(lit("ab")), lit("c"), lit("d"))}),
    ('root ::= | "a"', {"root": alt(EPSILON, lit("a"))}),
    ('root ::= ( "a" | )', {"root": alt(lit("a"), EPSILON)}),
    ('root ::= "a" ( ) ""', {"root": lit("a")}),
    ('root ::= ""', {"root": EPSILON}),
    ("root ::= . [^]", {"root": seq(any_char(), any_char())}),
    ("root ::= [^a-z\\n]", {"root": cc(("a", "z"), "\n", negate=True)}),
    ("root ::= [-a] [a-] [a\\-z] [--/] [a^] [\\]\\[] [\\^]",
     {"root": seq(cc("-", "a"), cc("a", "-"), cc("a", "-", "z"), cc(("-", "/")), cc("a", "^"), cc("]", "["), cc("^"))}),
    ("root ::= [!\"#$%&'()*+,-./:;<=>?@[\\\\\\]^_`{|}~]", {"root": cc(("!", "/"), (":", "@"), ("[", "`"), ("{", "~"))}),
    ('root ::= "#" [#] # a comment | "b"\n', {"root": seq(lit("#"), cc("#"))}),
    ('root ::= "a"\n   "b"\n  | "c"', {"root": alt(lit("ab"), lit("c"))}),
    ('root ::=\n  "a" |\n  "b"\r\nx ::= "c"\r\n', {"root": alt(lit("a"), lit("b")), "x": lit("c")}),
    ('root ::= a.b c-d _e 1x\na.b ::= "1"\nc-d ::= "2"\n_e ::= "3"\n1x ::= "4"',
     {"root": seq(Ref("a.b"), Ref("c-d"), Ref("_e"), Ref("1x")), "a.b": lit("1"), "c-d": lit("2"), "_e": lit("3"),
      "1x": lit("4")}),
    ('root ::= x. ".."', {"root": seq(Ref("x"), any_char(), lit(".."))}),
    ('root ::= "a" (= [ \\n]* "b")\n', {"root": lit("a")}),
    ('root ::= x\nx ::= ("a" | "b") (=(x | "c"))', {"root": Ref("x"), "x": alt(lit("a"), lit("b"))}),
    ("root ::= \"日本\" [ぁ-ゟ]", {"root": seq(lit("日本"), cc(("ぁ", "ゟ")))}),
    ('\ufeffroot ::= "a"', {"root": lit("a")}),
    ('root ::= "a"{0} "b"{1} "c"{1,1}', {"root": lit("bc")}),
]


@pytest.mark.parametrize("text, rules", IR_CASES)
def test_ir(text: str, rules: dict[str, Expr]) -> None:
    ir = parse_ebnf(text)
    assert ir.rules == rules
    assert list(ir.rules) == list(rules)  # definition order is kept


def test_ir_node_types() -> None:
    ir = parse_ebnf('root ::= "ab" [x] r{2,5} | r*\nr ::= "c"')
    body = ir.rules["root"]
    assert isinstance(body, Alt)
    first, second = body.items
    assert isinstance(first, Seq)
    assert isinstance(first.items[0], Bytes) and isinstance(first.items[1], CharClass)
    assert first.items[2] == Repeat(Ref("r"), 2, 5)
    assert second == Repeat(Ref("r"), 0, None)


# ----------------------------------------------------------------------------- escapes

ESCAPES: list[tuple[str, str]] = [
    (r"\n", "\n"), (r"\r", "\r"), (r"\t", "\t"), (r"\\", "\\"), (r"\"", '"'), (r"\'", "'"), (r"\[", "["),
    (r"\]", "]"), (r"\-", "-"), (r"\/", "/"), (r"\?", "?"), (r"\a", "\a"), (r"\b", "\b"), (r"\f", "\f"),
    (r"\v", "\v"), (r"\0", "\0"), (r"\x41", "A"), (r"\xe9", "é"), (r"\xFF", "ÿ"), (r"\u00e9", "é"),
    (r"\u65e5", "日"), (r"\U0001F600", "😀"), (r"\U0010FFFF", "\U0010FFFF"), ("é", "é"), ("\t", "\t"),
]


@pytest.mark.parametrize("escape, char", ESCAPES)
def test_escape_in_string(escape: str, char: str) -> None:
    assert parse_ebnf(f'root ::= "<{escape}>"').rules["root"] == lit(f"<{char}>")


@pytest.mark.parametrize("escape, char", ESCAPES + [(r"\^", "^"), (r"\.", "."), (r"\*", "*"), (r"\|", "|")])
def test_escape_in_class(escape: str, char: str) -> None:
    assert parse_ebnf(f"root ::= [{escape}]").rules["root"] == cc(char)


def test_hex_escape_is_a_code_point_not_a_byte() -> None:
    g = pda.Grammar.from_ebnf(r'root ::= "\xe9"')
    assert g.accepts("é") and g.accepts(b"\xc3\xa9")
    assert not g.accepts(b"\xe9")


def test_escaped_range_bounds() -> None:
    ir = parse_ebnf(r"root ::= [\x20\x21\x23-\x5b\x5d-\U0010FFFF]")
    assert ir.rules["root"] == chars([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)])


# ----------------------------------------------------------------------------- metadata


def test_positions_of_rules_and_references() -> None:
    text = '# header\nroot ::= item+ "x"\n\n  # indented comment\nitem ::=\n    ( "a" | other )\nother ::= "b"'
    ir = parse_ebnf(text, filename="t.gbnf")
    assert ir.positions == {"root": (2, 1), "item": (5, 1), "other": (7, 1)}
    assert ir.filename == "t.gbnf" and ir.source == text and ir.start == "root"
    refs = {r.name: r.pos for r in _refs(ir)}
    assert refs == {"item": (2, 10), "other": (6, 13)}


def _refs(ir: GrammarIR) -> Iterator[Ref]:
    from pda.ir import refs_of

    for body in ir.rules.values():
        yield from refs_of(body)


def test_start_rule_is_selectable() -> None:
    text = 'expr ::= term ("+" term)*\nterm ::= [0-9]+'
    ir = parse_ebnf(text, start="expr")
    assert ir.start == "expr"
    with pytest.raises(UndefinedRuleError, match='root rule "root" is not defined') as info:
        parse_ebnf(text)
    assert info.value.rule == "root"
    g = pda.Grammar.from_ebnf(text, start="expr")
    assert g.accepts("12+3") and not g.accepts("+3")


def test_text_must_be_str() -> None:
    with pytest.raises(TypeError, match="must be str"):
        parse_ebnf(b'root ::= "a"')  # type: ignore[arg-type]


def test_syntax_error_carries_place_and_source() -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        parse_ebnf('root ::= "a"\nx ::= "\\q"', filename="f.gbnf")
    err = info.value
    assert (err.filename, err.line, err.column) == ("f.gbnf", 2, 8)
    assert "x ::= \"\\q\"\n           ^" in str(err)


# ----------------------------------------------------------------------------- real grammars


def _corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.gbnf")) if CORPUS.is_dir() else []


@pytest.mark.parametrize("path", FIXTURES + _corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_grammar_loads(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    ir = parse_ebnf(text, filename=str(path))
    assert "root" in ir.rules and ir.positions["root"][1] == 1
    g = pda.Grammar.from_file(path)
    assert g.automaton.num_states > 0


def test_every_fixture_is_documented() -> None:
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert {p.name for p in FIXTURES} <= {name for name in readme.replace("`", " ").split() if "." in name}
    assert len(FIXTURES) >= 10


# ----------------------------------------------------------------------------- acceptance

ACCEPTANCE: list[tuple[str, list[str], list[str]]] = [
    ('root ::= "a" | "bc"', ["a", "bc"], ["", "b", "abc", "A"]),
    ('root ::= [a-c]{2,3}', ["ab", "ccc"], ["a", "abcd", "ad"]),
    ('root ::= "x"{2,}', ["xx", "xxxxx"], ["", "x"]),
    ('root ::= ("a" | ) "b"', ["b", "ab"], ["a", "aab"]),
    ("root ::= .+", ["a", "日本", "😀x"], [""]),
    ("root ::= [^\"\\\\]*", ["", "abc", "日"], ['"', "a\\"]),
    ('root ::= ws "x" ws\nws ::= | " " ws', ["x", "  x ", "x   "], [" ", "xx"]),
    ('root ::= "(" root ")" | ""', ["", "()", "(())"], ["(", "())", ")("]),
    ('root ::= num ("," num)*\nnum ::= "-"? [1-9] [0-9]*', ["1", "-12,3,450"], ["01", "1,", ",1", "-"]),
    ('root ::= "a" (= "b")', ["a"], ["ab", "b"]),
    (r'root ::= "\u00e9" [\x00-\x7F] "\U0001F600"', ["é\x00😀", "éA😀"], ["e😀", "é\x80😀"]),
    ("root ::= [日本]+ [^日本]", ["日本語", "日x"], ["日本", "x"]),
    ('root ::= "a"? "b"? "c"?', ["", "a", "ac", "abc"], ["ba", "cc"]),
]


@pytest.mark.parametrize("grammar, passing, failing", ACCEPTANCE)
def test_acceptance(grammar: str, passing: list[str], failing: list[str]) -> None:
    g = pda.Grammar.from_ebnf(grammar)
    for text in passing:
        assert g.accepts(text), text
    for text in failing:
        assert not g.accepts(text), text


FIXTURE_ACCEPTANCE: list[tuple[str, list[str], list[str]]] = [
    ("json.gbnf", ['{"a": [1, 2.5, true, null, "x\\u00e9"]}', "{}", '{\n  "k": {"n": -0.5e3}}'],
     ['{"a" 1}', "[1]", '{"a": 01}', '{"a": "\x01"}']),
    ("json_arr.gbnf", ["[\n]", '[\n{"a": 1},\n"b"]'], ["[]", "{}", "[\n1,]"]),
    ("json_2023.gbnf", ['{"a": ["b", 12, true]}', '{"😀": -3 }'], ['{"a": 1.5}', "[]"]),
    ("xgrammar_json.ebnf", ['{"a": [1, {"b": null}], "c": "d\\n"}', "[]", '[1e5, -0.25, "x"]'],
     ["{", '{"a": 1,}', "nul", '"a"']),
    ("arithmetic.gbnf", ["a=1\n", "x = (y +2) \n"], ["a=1", "=1\n"]),
    ("chess.gbnf", ["1. e4 e5\n2. Nf3 Nc6\n", "1. O-O-O exd8=Q+\n2. a1 a2\n"], ["1. e4 e5\n", "1. e9 e5\n2. a1 a2\n"]),
    ("c.gbnf", ["int main(){return 0;}", "float f(int x){while(x<1){x = x+1;}}"], ["int main(){}x", "main(){}"]),
    ("english.gbnf", ["Hello, world!", "a\tb"], ["", "naïve", "a  b"]),
    ("japanese.gbnf", ["こんにちは、世界", "カタカナ\nひらがな"], ["", "abc"]),
    ("list.gbnf", ["- one\n- two\n"], ["- one", "one\n", "- a\u2028b\n"]),
]


@pytest.mark.parametrize("name, passing, failing", FIXTURE_ACCEPTANCE)
def test_fixture_acceptance(name: str, passing: list[str], failing: list[str]) -> None:
    g = pda.Grammar.from_file(DATA / name)
    for text in passing:
        assert g.accepts(text), text
    for text in failing:
        assert not g.accepts(text), text


# ----------------------------------------------------------------------------- xgrammar as an oracle


class _Sampler:
    """Random sentences of a grammar's IR; past ``max_depth`` it takes the quickest way out."""

    def __init__(self, ir: GrammarIR, rng: random.Random, max_depth: int = 7) -> None:
        self.ir, self.rng, self.max_depth = ir, rng, max_depth
        self.heights = {n: 10**9 for n in ir.rules}
        changed = True
        while changed:  # a rule's height: how many nested calls its shortest derivation needs
            changed = False
            for name, body in ir.rules.items():
                h = self.height(body)
                if h < self.heights[name]:
                    self.heights[name], changed = h, True

    def height(self, e: Expr) -> int:
        if isinstance(e, Ref):
            return self.heights[e.name] + 1
        if isinstance(e, Seq):
            return max((self.height(i) for i in e.items), default=0)
        if isinstance(e, Alt):
            return min((self.height(i) for i in e.items), default=10**9)
        if isinstance(e, Repeat):
            return 0 if e.min == 0 else self.height(e.expr)
        return 0

    def sample(self, e: Expr | None = None, depth: int = 0) -> str:
        rng = self.rng
        e = Ref(self.ir.start) if e is None else e
        if isinstance(e, Bytes):
            return e.data.decode("utf-8")
        if isinstance(e, CharClass):
            printable = [(max(a, 0x20), min(b, 0x7E)) for a, b in e.ranges if max(a, 0x20) <= min(b, 0x7E)]
            pool = printable if printable and rng.random() < 0.8 else list(e.ranges)
            while True:
                cp = rng.randint(*rng.choice(pool))
                if not 0xD800 <= cp <= 0xDFFF:
                    return chr(cp)
        if isinstance(e, Seq):
            return "".join(self.sample(i, depth) for i in e.items)
        if isinstance(e, Alt):
            items = list(e.items)
            if depth >= self.max_depth:
                best = min(self.height(i) for i in items)
                items = [i for i in items if self.height(i) == best]
            return self.sample(rng.choice(items), depth)
        if isinstance(e, Repeat):
            hi = e.min if depth >= self.max_depth else e.min + 3
            hi = hi if e.max is None else min(hi, e.max)
            return "".join(self.sample(e.expr, depth) for _ in range(rng.randint(e.min, max(e.min, hi))))
        if isinstance(e, Ref):
            return self.sample(self.ir.rules[e.name], depth + 1)
        raise TypeError(f"not an IR node: {e!r}")


def _mutate(s: str, rng: random.Random) -> str:
    """Insert, delete or replace one character."""
    c = rng.choice(' "{}[],:0123456789.eE+-=abxyz()\\\n\tあ😀')
    i = rng.randrange(len(s) + 1)
    op = rng.randrange(3) if s else 0
    if op == 0:
        return s[:i] + c + s[i:]
    i = min(i, len(s) - 1)
    return s[:i] + s[i + 1:] if op == 1 else s[:i] + c + s[i + 1:]


@pytest.fixture(scope="module")
def xgrammar_checker():  # type: ignore[no-untyped-def]
    """Builds, for an EBNF text, a function text -> (complete, prefix) answered by xgrammar."""
    xgr = pytest.importorskip("xgrammar")
    info = xgr.TokenizerInfo([bytes([b]) for b in range(256)])  # a byte-level vocabulary
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)

    def build(text: str):  # type: ignore[no-untyped-def]
        matcher = xgr.GrammarMatcher(compiler.compile_grammar(xgr.Grammar.from_ebnf(text)),
                                     terminate_without_stop_token=True)

        def check(s: str) -> tuple[bool, bool]:
            matcher.reset()
            prefix = matcher.accept_string(s)
            return prefix and matcher.is_terminated(), prefix

        return check

    return build


def _xgrammar_text(text: str) -> str:
    """XGrammar refuses empty alternatives (``ws ::= | " "``); spell them ``""`` for it."""
    return text.replace("::= |", '::= "" |')


def _differential(text: str, build, seed: int, n: int) -> None:  # type: ignore[no-untyped-def]
    ours = pda.Grammar.from_ebnf(text)
    theirs = build(_xgrammar_text(text))
    rng = random.Random(seed)
    sampler = _Sampler(parse_ebnf(text), rng)
    seen = {True: 0, False: 0}
    for _ in range(n):
        s = sampler.sample()
        for cand in (s, s[: rng.randrange(len(s) + 1)], _mutate(s, rng), _mutate(_mutate(s, rng), rng)):
            want = theirs(cand)
            assert (ours.accepts(cand), ours.is_prefix(cand)) == want, cand
            seen[want[0]] += 1
    assert seen[True] and seen[False]  # both sides of the language were exercised


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_agrees_with_xgrammar_on_fixtures(path: Path, xgrammar_checker) -> None:  # type: ignore[no-untyped-def]
    _differential(path.read_text(encoding="utf-8"), xgrammar_checker, seed=len(path.name), n=12)


FEATURE_GRAMMARS = [
    r'root ::= "\x41\u00e9\U0001F600" [\x00-\x1F\x7F]? [^\x00-\x7F]{1,2}',
    r'root ::= ("ab" | [c-e]{2,3} | "f"{2,})* "!"',
    r'root ::= [\-\]\[\\a-c]+ "\"" [\t\n\r ]',
    'root ::= item ("," item)*\nitem ::= "(" root ")" | [0-9]+ | ""',
    'root ::= a b\na ::= "x" a | ""\nb ::= "y" b | "z"',
]


@pytest.mark.parametrize("text", FEATURE_GRAMMARS)
def test_agrees_with_xgrammar_on_features(text: str, xgrammar_checker) -> None:  # type: ignore[no-untyped-def]
    _differential(text, xgrammar_checker, seed=1, n=25)
