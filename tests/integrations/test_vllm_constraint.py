"""The vLLM integration without vLLM: light imports, and the ``extra_args["pda"]`` entry (read, checked, built).

The engine itself is tested by ``make test-vllm`` (tests_vllm/), in its own venv.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from pda.errors import ConstraintError, GrammarError, SchemaError
from pda.integrations.vllm_constraint import SOURCES, Constraint

HEAVY = ("torch", "numba", "llvmlite", "transformers")


def run_python(code: str) -> None:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr


def test_import_pda_and_the_vllm_integration_loads_no_heavy_module() -> None:
    # pda.bitmask too: the vLLM processor imports it, and vLLM's worker scans the loaded modules
    # for Triton kernels at start-up and trips over llvmlite's objects (the engine fails to start)
    run_python(f"import pda, pda.integrations.vllm, pda.bitmask, pda.integrations.vllm_constraint, sys; "
               f"loaded = [m for m in {HEAVY!r} if m in sys.modules]; assert not loaded, loaded")


def test_grammar_works_without_torch() -> None:
    run_python("import pda, sys; g = pda.Grammar.from_ebnf('root ::= \"a\"+'); "
               "assert g.accepts('aaa') and not g.accepts('b'); "
               "assert 'torch' not in sys.modules, 'torch was loaded'")


def test_pda_validate_works_without_torch(tmp_path) -> None:
    doc = tmp_path / "n.txt"
    doc.write_text("123")
    run_python(f"import sys; from pda.cli import main; rc = main(['validate', '--regex', '[0-9]+', {str(doc)!r}]); "
               "assert not rc, rc; assert 'torch' not in sys.modules, 'torch was loaded'")


def test_constraint_module_loads_no_heavy_module_until_built() -> None:
    run_python(f"import sys; from pda.integrations.vllm_constraint import Constraint; "
               f"c = Constraint.from_spec({{'regex': '[0-9]+'}}); "
               f"loaded = [m for m in {HEAVY!r} if m in sys.modules]; assert not loaded, loaded")


def test_lazy_package_namespace() -> None:
    import pda

    assert "Grammar" in dir(pda) and "GrammarCompiler" in dir(pda) and "__version__" in pda.__all__
    for name in pda.__all__:
        assert getattr(pda, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pda.nope  # noqa: B018
    from pda.bitmask import BITMASK_DTYPE

    assert str(BITMASK_DTYPE) == "torch.int32"


@pytest.mark.parametrize("extra_args", [None, {}, {"other": 1}])
def test_requests_without_pda_entry_have_no_constraint(extra_args) -> None:
    assert Constraint.from_extra_args(extra_args) is None


def test_entry_is_read_canonically() -> None:
    a = Constraint.from_extra_args({"pda": {"json_schema": {"type": "object", "required": ["a"]}, "strict": True}})
    b = Constraint.from_spec({"strict": True, "json_schema": {"type": "object", "required": ["a"]}})
    assert a == b and a.kind == "json_schema" and dict(a.options) == {"strict": True}
    # the schema's key order is kept: it is the order of the members
    ordered = Constraint.from_spec({"json_schema": {"properties": {"b": {"const": 1}, "a": {"const": 2}},
                                                    "required": ["a", "b"], "additionalProperties": False},
                                    "whitespace": "compact"})
    assert ordered.grammar().accepts('{"b":1,"a":2}') and not ordered.grammar().accepts('{"a":2,"b":1}')
    c = Constraint.from_spec({"json_schema": {"type": "string"}, "separators": [",", ":"]})
    assert dict(c.options)["separators"] == (",", ":")
    # the server's vllm_xargs carry the entry as JSON text
    assert Constraint.from_extra_args({"pda": '{"regex": "[0-9]+"}'}) == Constraint("regex", "[0-9]+")


SPECS = [
    ({"json_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
      "whitespace": "compact"}, '{"n":42}', '{"n":"x"}'),
    ({"json_schema": '{"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}'}, '["a", "b"]', '["c"]'),
    ({"grammar": 'root ::= "yes" | "no"'}, "yes", "maybe"),
    ({"grammar": 'answer ::= [0-9]+', "start": "answer"}, "123", "12a"),
    ({"lark": 'start: "x" NUMBER\n%import common.NUMBER'}, "x12", "y12"),
    ({"regex": r"[a-z]{2}-\d{3}"}, "ab-123", "ab-12"),
    ({"builtin": "json"}, '{"a": [1, 2]}', '{"a": }'),
]


@pytest.mark.parametrize("spec, good, bad", SPECS)
def test_constraint_grammar(spec, good, bad) -> None:
    constraint = Constraint.from_spec(spec)
    constraint.check()
    grammar = constraint.grammar()
    assert grammar.accepts(good) and not grammar.accepts(bad)


@pytest.mark.parametrize("spec, good, bad", SPECS[:3] + SPECS[5:])
def test_constraint_compiles_with_a_shared_cache(spec, good, bad, deepseek_tokenizer) -> None:
    from pda import GrammarCompiler, GrammarMatcher, TokenizerInfo

    compiler = GrammarCompiler(TokenizerInfo.from_huggingface(deepseek_tokenizer))
    compiled = Constraint.from_spec(spec).compile(compiler)
    assert Constraint.from_spec(dict(spec)).compile(compiler) is compiled
    matcher = GrammarMatcher(compiled)
    assert matcher.accept_string(good) and matcher.is_completed()


@pytest.mark.parametrize("spec, error, message", [
    ([1], ConstraintError, r'extra_args\["pda"\] must be a dict'),
    ("{no", ConstraintError, r'extra_args\["pda"\] is a string but not JSON text'),
    ("[1]", ConstraintError, r'extra_args\["pda"\] must be a dict'),
    ({}, ConstraintError, r"must name exactly one of json_schema, grammar, lark, regex, builtin; it names none"),
    ({"regex": "a", "grammar": "root ::= \"a\""}, ConstraintError, r"it names several \(regex, grammar\)|several \(grammar, regex\)"),
    ({"regex": "a", "strict": True}, ConstraintError, r"unknown option\(s\) strict for 'regex'; allowed: none"),
    ({"json_schema": {}, "indent": 2}, ConstraintError, r"unknown option\(s\) indent for 'json_schema'; allowed: whitespace"),
    ({"grammar": 3}, ConstraintError, r"\['grammar'\] must be a string, got int"),
    ({"json_schema": 3}, ConstraintError, r"must be a schema \(dict or bool\) or its JSON text, got int"),
    ({"grammar": "root ::= ", "start": 1}, ConstraintError, r"must be a rule name"),
])
def test_malformed_entries(spec, error, message) -> None:
    with pytest.raises(error, match=message):
        Constraint.from_spec(spec)


@pytest.mark.parametrize("spec, error, message", [
    ({"json_schema": {"type": "nonsense"}}, SchemaError, "nonsense"),
    ({"json_schema": "{not json"}, SchemaError, None),
    ({"grammar": 'root ::= "a" missing'}, GrammarError, "missing"),
    ({"lark": "start: ("}, GrammarError, None),
    ({"regex": "a("}, GrammarError, None),
    ({"builtin": "no_such_grammar"}, GrammarError, r"no bundled grammar 'no_such_grammar'; known: .*json"),
])
def test_bad_grammars_raise_their_pda_error(spec, error, message) -> None:
    constraint = Constraint.from_spec(spec)
    for _ in range(2):  # errors are not cached away
        with pytest.raises(error, match=message):
            constraint.check()


def test_every_source_is_covered() -> None:
    assert {next(k for k in s if k in SOURCES) for s, _, _ in SPECS} == set(SOURCES)
