"""String automata written as rules (:func:`pda.dfa_to_ir._rules`), checked end to end.

A JSON Schema's string automata (patterns, the keys outside ``patternProperties``, formats) become
one regular expression when state elimination fits a node budget, else rules: one per way into a
cycle of states, or one per state.  Real schemas reach the rules only when large (a complement of
many language-tag patterns), so here the budget is made small, and each schema is compiled both
ways: what the adversarial sampler of :mod:`.test_json_schema_generation` completes with either
form, ``jsonschema`` validates and the other form accepts; and for the schemas with cycles, every
short key over their alphabet is decided as ``jsonschema`` decides it.

The string branches of a ``oneOf`` that need automata are one automaton, their union: one top
after the opening quote, decided as ``jsonschema`` decides.
"""

from __future__ import annotations

import itertools
import json
import warnings
from typing import Any

import numpy as np
import pytest

from pda import Grammar, GrammarCompiler, dfa_to_ir
from pda.errors import EmptyLanguageError, UnsupportedSchemaError
from pda.frontends.json_schema import strings

from .test_json_schema_generation import (
    GENERATED, GENERATIONS, STYLES, Vocab, check_instance, generated_schemas, make_vocab, oracle, sample,
)

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def small_vocab(small_bpe_tokenizer: Any) -> Vocab:
    return make_vocab(small_bpe_tokenizer)


# Schemas whose string automata have cycles through several states: the keys outside
# patternProperties (a complement), language-tag-like patterns, "does not contain".
CYCLIC_STRING_SCHEMAS = [
    {"type": "object", "patternProperties": {"^x(-[a-z0-9]{1,3})+$": {"type": "integer"}},
     "additionalProperties": {"type": "string"}},
    {"type": "object", "patternProperties": {"^(ab|c)(-[a-c]{2})*$": {"type": "boolean"}, "^z+$": {"type": "null"}},
     "properties": {"id": {"type": "integer"}}, "additionalProperties": {"type": "integer"}},
    {"type": "object", "propertyNames": {"not": {"pattern": "^(a-)+b$"}}, "additionalProperties": {"type": "integer"}},
    {"type": "array", "items": {"type": "string", "not": {"pattern": "REJ|EXE"}}},
]


@pytest.mark.parametrize("which,budget", [("cyclic", 200), ("generated", 60)])
def test_string_automata_as_rules_small_bpe(small_vocab: Vocab, monkeypatch: pytest.MonkeyPatch, which: str,
                                            budget: int) -> None:
    """String automata written as rules (a small node budget sends them past state elimination to
    :func:`pda.dfa_to_ir._rules`: a rule per way into a cycle, else per state), against the same
    schemas compiled as usual: what either form completes, ``jsonschema`` validates and the other
    form accepts.  ``cyclic``: :data:`CYCLIC_STRING_SCHEMAS`, where some cycle becomes one rule;
    ``generated``: the generated schemas with strings, keys and formats."""
    picked = list(enumerate(CYCLIC_STRING_SCHEMAS)) if which == "cyclic" else [
        (n, sch) for n, sch in generated_schemas(GENERATED, seed=7)
        if any(k in json.dumps(sch) for k in ('"pattern', '"propertyNames"', '"format"', '"additionalProperties"'))]
    usual = Vocab(small_vocab.info, GrammarCompiler(small_vocab.info, cache=False), small_vocab.stop)
    as_rules = Vocab(small_vocab.info, GrammarCompiler(small_vocab.info, cache=False), small_vocab.stop)
    made = {"rules": 0, "cycles": 0, "inside": 0}
    rules, eliminate = dfa_to_ir._rules, dfa_to_ir._eliminate_graph

    def counted_rules(*args: Any, **kw: Any) -> Any:
        made["rules"] += 1
        made["inside"] = 1
        try:
            return rules(*args, **kw)
        finally:
            made["inside"] = 0

    def counted_eliminate(edges: Any, entry: int, budget: int) -> Any:
        got = eliminate(edges, entry, budget)
        made["cycles"] += made["inside"]  # a cycle written as one rule
        return got

    monkeypatch.setattr(dfa_to_ir, "_rules", counted_rules)
    monkeypatch.setattr(dfa_to_ir, "_eliminate_graph", counted_eliminate)
    completed = 0
    generations = 2 * GENERATIONS if which == "generated" else 40
    rule_forms: dict[Any, Any] = {}
    for i, (name, schema) in enumerate(picked):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                monkeypatch.setattr(strings, "STRING_EXPR_BUDGET", 20000)
                a = usual.compiler.compile_json_schema(schema)
                monkeypatch.setattr(strings, "STRING_EXPR_BUDGET", budget)
                b = rule_forms[name] = as_rules.compiler.compile_json_schema(schema)
        except (UnsupportedSchemaError, EmptyLanguageError):
            continue
        rng = np.random.default_rng([7, i])
        for g in range(generations):
            here, there, vocab = (a, b, usual) if g % 2 else (b, a, as_rules)
            raw, done = sample(here, vocab, rng, STYLES[(i + g) % len(STYLES)])
            if not done:
                continue
            completed += 1
            assert there.grammar.accepts(raw), f"{name}: {raw!r} completed by one form, refused by the other"
            why = check_instance(schema, raw)
            assert why is None, f"{name}: {why}"
    assert completed >= len(picked), completed
    if which == "cyclic":
        assert made["cycles"] >= 2, made
        # and every key (string) of up to 4 characters over the patterns' alphabet, some long ones
        texts = ["".join(p) for k in range(5) for p in itertools.product("xab-c!", repeat=k)]
        texts += ["x-ab" * 30 + "!", "x" + "-a1" * 40, "ab" + "-ca" * 40, "ab" + "-ca" * 40 + "!z", "a-" * 50 + "b"]
        for name, schema in picked:
            compiled = rule_forms[name]
            validator = oracle(json.dumps(schema))
            for t in texts:
                for doc in ([t], {t: 1}, {t: "s"}):
                    want = validator.is_valid(doc)
                    assert compiled.grammar.accepts(json.dumps(doc)) == want, (name, doc, want)
    else:
        assert made["rules"] >= 20, made


# A oneOf of unanchored words (Github_hard/o12278): each branch is "this word and none of the
# others", an automaton of its own.
WORDS = ["NEW", "ON_APPROVAL", "ON_SIGNING", "EXECUTED", "DEPRECATED", "REJECTED"]


@pytest.mark.parametrize("kw", ["oneOf", "anyOf"])
def test_string_branches_needing_automata_are_one_lexical_state(kw: str) -> None:
    """The string branches of a oneOf that need automata become one automaton (their union): one
    top after the opening quote, not one per branch (six before), and exact."""
    value = {"type": "string", kw: [{"pattern": w} for w in WORDS]}
    schema = {"type": "object", "properties": {"s": value, "n": {"type": "integer"}}, "required": ["s"],
              "additionalProperties": False}
    g = Grammar.from_json_schema(schema)
    walker = g._walker()
    cfg = walker.initial()
    for b in b'{"s":"':
        cfg = walker.step(cfg, b)
    assert len(cfg.tops) == 1
    texts = ["".join(p) for n in range(3) for p in itertools.product("NEWO_", repeat=n)]
    texts += [a + w + b for w in WORDS for a in ("", "x", "NE") for b in ("", "D", "W")]
    texts += [w + "-" + v for w in WORDS for v in WORDS]
    validator = jsonschema.Draft202012Validator(schema)
    for t in texts:
        doc = json.dumps({"s": t})
        assert g.accepts(doc) == validator.is_valid({"s": t}), (kw, t)


def test_string_union_keeps_other_branches() -> None:
    """Branches that are not strings alone, or need no automaton, stay beside the union."""
    schema = {"oneOf": [{"type": "string", "pattern": "ab", "not": {"pattern": "c"}},
                        {"type": "string", "pattern": "^x", "maxLength": 3, "not": {"pattern": "ab"}},
                        {"type": "integer"}, {"type": "string", "format": "date"}]}
    g = Grammar.from_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    values: list[Any] = [1, -3, 1.5, None, "ab", "abc", "xab", "x", "xy", "xyz", "xyzw", "zab", "2024-01-31",
                         "2024-13-01", "cab", "", "xc"]
    for v in values:
        assert g.accepts(json.dumps(v)) == validator.is_valid(v), v
