"""Recursive JSON Schemas: pushdown rules, any depth, at the text and the token level.

Four shapes: a binary tree (``$defs`` referring to itself twice), a linked list (``$ref: "#"``, the
root itself), a schema of schemas (``properties``/``items``/``anyOf`` referring back, like JSON
Schema's own meta-schema) and mutual recursion through ``$defs`` (an expression language, and an
even/odd nesting where only every other depth is valid).  For each:

* it compiles, with :meth:`pda.Grammar.from_json_schema` and with a
  :class:`~pda.GrammarCompiler` on the small BPE, to an automaton with recursive rules;
* instances built programmatically at depth 50 and more are accepted (``jsonschema`` agrees), both
  by :meth:`Grammar.accepts` and token by token (mask check, then accept);
* the same instances broken at their deepest point are refused, and the error points there;
* the constrained sampler of ``test_json_schema_generation``, pushed towards ``[`` and ``{``,
  reaches depth 10 and more, and everything it completes is valid.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

import numpy as np
import pytest

from pda import Grammar, GrammarMatcher
from pda.errors import ValidationError

from .test_json_schema_generation import Vocab, allowed_of, check_instance, make_vocab, oracle, sample

TREE = {
    "$defs": {"tree": {"type": "object", "properties": {
        "value": {"type": "integer"},
        "left": {"$ref": "#/$defs/tree"},
        "right": {"$ref": "#/$defs/tree"}}, "required": ["value"], "additionalProperties": False}},
    "$ref": "#/$defs/tree",
}
LIST = {
    "type": "object", "properties": {
        "head": {"type": "string", "maxLength": 8},
        "next": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}},
    "required": ["head", "next"], "additionalProperties": False,
}
META = {
    "$defs": {"schema": {"anyOf": [{"type": "boolean"}, {"type": "object", "properties": {
        "type": {"enum": ["string", "number", "integer", "object", "array", "boolean", "null"]},
        "description": {"type": "string"},
        "properties": {"type": "object", "additionalProperties": {"$ref": "#/$defs/schema"}},
        "required": {"type": "array", "items": {"type": "string"}},
        "items": {"$ref": "#/$defs/schema"},
        "anyOf": {"type": "array", "items": {"$ref": "#/$defs/schema"}, "minItems": 1},
    }, "additionalProperties": False}]}},
    "$ref": "#/$defs/schema",
}
EXPR = {
    "$defs": {
        "expr": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[a-z]+$"}, {"$ref": "#/$defs/call"}]},
        "call": {"type": "object", "properties": {
            "fn": {"enum": ["add", "neg", "if"]},
            "args": {"type": "array", "items": {"$ref": "#/$defs/expr"}, "maxItems": 3}},
            "required": ["fn", "args"], "additionalProperties": False},
    },
    "$ref": "#/$defs/call",
}
EVEN = {  # even = 0 | [odd];  odd = [even]: 0, [[0]], [[[[0]]]], ... (an even number of brackets)
    "$defs": {
        "even": {"anyOf": [{"const": 0}, {"type": "array", "prefixItems": [{"$ref": "#/$defs/odd"}],
                                          "items": False, "minItems": 1}]},
        "odd": {"type": "array", "prefixItems": [{"$ref": "#/$defs/even"}], "items": False, "minItems": 1},
    },
    "$ref": "#/$defs/even",
}


def tree(depth: int) -> Any:
    """A tree whose left spine is ``depth`` nodes long, with right leaves along it."""
    node: Any = {"value": depth}
    for d in range(depth - 1, 0, -1):
        node = {"value": d, "left": node, "right": {"value": -d}} if d % 3 else {"value": d, "left": node}
    return node


def linked(depth: int) -> Any:
    node: Any = {"head": "end", "next": None}
    for d in range(depth - 1):
        node = {"head": f"n{d}é", "next": node}
    return node


def meta(depth: int) -> Any:
    """A schema of nested objects, arrays and anyOfs, ``depth`` levels of ``meta`` deep."""
    s: Any = {"type": "string", "description": "leaf"}
    for d in range(depth - 1):
        s = [{"type": "object", "properties": {"p": s, "q": True}, "required": ["p"]},
             {"type": "array", "items": s}, {"anyOf": [s, False]}][d % 3]
    return s


def expr(depth: int) -> Any:
    e: Any = "x"
    for d in range(depth):
        e = {"fn": ["add", "neg", "if"][d % 3], "args": [e, d] if d % 3 == 0 else [e]}
    return e


def nested(depth: int) -> Any:
    """0 inside an even number (``depth`` rounded up to even) of arrays."""
    v: Any = 0
    for _ in range(depth + depth % 2):
        v = [v]
    return v


def leaf_path(value: Any, pick: Callable[[Any], Any]) -> Any:
    """Follow ``pick`` down from ``value`` while it returns a container; the last container reached."""
    while True:
        nxt = pick(value)
        if not isinstance(nxt, (dict, list)):
            return value
        value = nxt


def _deepest_dict(v: Any) -> Any:
    if isinstance(v, dict):
        for k in ("left", "next", "args", "p", "items", "anyOf"):
            if isinstance(v.get(k), (dict, list)):
                return v[k]
    if isinstance(v, list) and v and isinstance(v[0], (dict, list)):
        return v[0]
    return None


def break_tree(v: Any) -> None:
    leaf_path(v, _deepest_dict)["value"] = "x"


def break_list(v: Any) -> None:
    leaf_path(v, _deepest_dict)["head"] = "too long a head"


def break_meta(v: Any) -> None:
    leaf_path(v, _deepest_dict)["type"] = "str"


def break_expr(v: Any) -> None:
    leaf_path(v, _deepest_dict).append(1.5)  # the innermost args list: 1.5 is no expression


def break_nested(v: Any) -> None:
    leaf_path(v, _deepest_dict)[0] = [0]  # one bracket more: odd


SHAPES = [  # name, schema, builder, breaker
    ("tree", TREE, tree, break_tree),
    ("linked-list", LIST, linked, break_list),
    ("meta-schema", META, meta, break_meta),
    ("mutual-expr", EXPR, expr, break_expr),
    ("mutual-even-odd", EVEN, nested, break_nested),
]
IDS = [s[0] for s in SHAPES]


def json_depth(v: Any) -> int:
    if isinstance(v, dict):
        return 1 + max((json_depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((json_depth(x) for x in v), default=0)
    return 0


@pytest.fixture(scope="module")
def vocab(small_bpe_tokenizer: Any) -> Vocab:
    return make_vocab(small_bpe_tokenizer)


def _tokens_accepted(vocab: Vocab, compiled: Any, hf: Any, text: str) -> int:
    """Step ``text``'s tokens through a matcher (each must be in the mask); the number accepted, and
    -1 when all are and the stop token is allowed at the end."""
    m = GrammarMatcher(compiled)
    v = vocab.info.vocab_size
    ids = hf.encode(text, add_special_tokens=False)
    for i, t in enumerate(ids):
        if not allowed_of(m.next_token_mask(), v)[t]:
            assert not m.accept_token(t), "a token outside the mask was accepted"
            return i
        assert m.accept_token(t), "a token in the mask was refused"
    return -1 if allowed_of(m.next_token_mask(), v)[vocab.stop] else len(ids)


@pytest.mark.parametrize("name,schema,build,break_", SHAPES, ids=IDS)
def test_compiles_to_recursive_rules(name: str, schema: Any, build: Any, break_: Any, vocab: Vocab) -> None:
    g = Grammar.from_json_schema(schema)
    assert len(g.automaton.rule_names) >= 2, f"{name}: no recursive rule left: {g!r}"
    compiled = vocab.compiler.compile_json_schema(schema)
    assert compiled.num_states == g.automaton.num_states
    for depth in (1, 2, 3):
        assert g.accepts(json.dumps(build(depth), ensure_ascii=False)), (name, depth)


@pytest.fixture
def deep_python() -> Any:
    """``json`` and ``jsonschema`` recurse in Python, several frames per level."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    yield
    sys.setrecursionlimit(limit)


@pytest.mark.usefixtures("deep_python")
@pytest.mark.parametrize("depth", [50, 120])
@pytest.mark.parametrize("name,schema,build,break_", SHAPES, ids=IDS)
def test_deep_instances_accepted_and_broken_ones_refused(
        name: str, schema: Any, build: Any, break_: Any, depth: int, vocab: Vocab, small_bpe_tokenizer: Any) -> None:
    validator = oracle(json.dumps(schema))
    g = Grammar.from_json_schema(schema)
    compiled = vocab.compiler.compile_json_schema(schema)
    good = build(depth)
    assert json_depth(good) >= depth
    assert validator.is_valid(good)
    for text in (json.dumps(good, ensure_ascii=False), json.dumps(good)):
        assert g.accepts(text), f"{name}: false reject at depth {depth}"
    # indented: at most max_whitespace (16) blanks in a row, so 15 levels of indent=1
    shallow = build(max(k for k in range(1, 16) if json_depth(build(k)) <= 15))
    assert g.accepts(json.dumps(shallow, indent=1)) and not g.accepts(json.dumps(good, indent=1))
    text = json.dumps(good, ensure_ascii=False)
    assert _tokens_accepted(vocab, compiled, small_bpe_tokenizer, text) == -1, f"{name}: token-level reject"

    bad = build(depth)
    break_(bad)
    assert not validator.is_valid(bad), "the breaker left the instance valid"
    text = json.dumps(bad, ensure_ascii=False)
    with pytest.raises(ValidationError) as err:
        g.validate(text)
    first_diff = next(i for i, (a, b) in enumerate(zip(json.dumps(good, ensure_ascii=False).encode(), text.encode()))
                      if a != b)
    assert err.value.offset >= first_diff - 12, f"{name}: refused at byte {err.value.offset}, broken at {first_diff}"
    assert _tokens_accepted(vocab, compiled, small_bpe_tokenizer, text) != -1, f"{name}: token-level false accept"


def test_thousands_of_levels() -> None:
    """A depth far beyond any model's choice only costs stack: 3,000 levels of the list and of
    even/odd (written out by hand: ``json`` and ``jsonschema`` recurse in Python)."""
    g = Grammar.from_json_schema(LIST)
    n = 3000
    assert g.accepts('{"head": "a", "next": ' * n + "null" + "}" * n)
    assert not g.accepts('{"head": "a", "next": ' * n + "0" + "}" * n)
    assert not g.accepts('{"head": "a", "next": ' * n + "null" + "}" * (n - 1))
    g = Grammar.from_json_schema(EVEN)
    assert g.accepts("[" * n + "0" + "]" * n)
    assert not g.accepts("[" * (n + 1) + "0" + "]" * (n + 1))


@pytest.mark.parametrize("name,schema", [(s[0], s[1]) for s in SHAPES], ids=IDS)
def test_sampler_pushed_deep_stays_valid(name: str, schema: Any, vocab: Vocab) -> None:
    compiled = vocab.compiler.compile_json_schema(schema)
    rng = np.random.default_rng(sum(map(ord, name)))
    depths: list[int] = []
    completed = 0
    for _ in range(8):
        raw, done = sample(compiled, vocab, rng, "open", cap=900, ramp_after=250, open_weight=6.0)
        if not done:
            assert compiled.grammar.is_prefix(raw)
            continue
        completed += 1
        why = check_instance(schema, raw)
        assert why is None, f"{name}: {why}"
        depths.append(json_depth(json.loads(raw)))
    assert completed >= 4, f"{name}: only {completed} of 8 generations completed"
    assert max(depths) >= 10, f"{name}: the deepest completed instance has depth {max(depths)}"
