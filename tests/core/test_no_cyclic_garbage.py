"""Compiling a grammar leaves no reference cycles behind, and a dropped grammar is freed.

Whatever a compile allocates must be freed by reference counting when it is done.  An object
kept alive by a cycle (a recursive closure over a memo table, a compiler and its helpers pointing
at each other) waits for Python's full garbage collection, and the IR it holds makes that
collection long: a pause of 0.1-0.3 s in a server, in whichever request's decode step it lands.
For the same reason a compiled grammar keeps no IR once its compile is done.
"""

from __future__ import annotations

import copy
import gc
import types
import weakref
from pathlib import Path
from typing import Callable

import numpy as np

from pda import GrammarCompiler, GrammarMatcher, TokenizerInfo
from pda import kernel_entry, kernel_refs
from pda.grammar import Grammar
from pda.ir import Expr

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 2000}, "tags": {
        "type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "minItems": 1, "maxItems": 4},
        "kind": {"enum": ["alpha", "beta", "gamma", "delta"]}, "n": {"type": "integer", "minimum": 3}},
     "required": ["name"], "patternProperties": {"^x_": {"type": "number"}}, "additionalProperties": False},
    {"type": "array", "prefixItems": [{"type": "boolean"}, {"const": "π ≈ 3.14"}], "items": {"type": "null"}},
    {"anyOf": [{"type": "string", "format": "date"}, {"type": "object", "additionalProperties": {"type": "integer"}}]},
]


def _pda_garbage() -> list[str]:
    """What the next full collection would free that pda made (functions, pda objects)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = []
        for o in gc.garbage:
            # type(), not isinstance(): a dead weakref.proxy left by some other library raises
            # ReferenceError as soon as its __class__ is asked for
            module = o.__module__ if type(o) is types.FunctionType else type(o).__module__
            if isinstance(module, str) and module.startswith(("pda", "frontends")):
                found.append(getattr(o, "__qualname__", type(o).__qualname__))
        return found
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()  # free them: cycles that DEBUG_SAVEALL kept are not freed by the clear()


def _pda_garbage_of(work: Callable[[], None], tries: int = 3) -> list[str]:
    """What ``work`` leaves in cyclic garbage every time: run once first (imports and one-time
    tables), then again with the collector off and its garbage cleared beforehand, up to ``tries``
    times.  A cycle in pda's code shows on every run; a one-time one does not: numba's first compile
    of a kernel inside the run (a fresh clone after ``make demo``, which compiled only some) leaves
    cycles through its typing errors' tracebacks, whose frames hold the matcher."""
    work()
    enabled = gc.isenabled()
    gc.disable()
    try:
        found: list[str] = []
        for _ in range(tries):
            _pda_garbage()
            work()
            found = _pda_garbage()
            if not found:
                break
        return found
    finally:
        if enabled:
            gc.enable()


def test_compiles_leave_no_cycles() -> None:
    def compile_all() -> None:
        for schema in SCHEMAS:
            Grammar.from_json_schema(schema)
        Grammar.from_ebnf((GRAMMARS / "c_like.gbnf").read_text())
        Grammar.from_ebnf((GRAMMARS / "sql_select.gbnf").read_text())
        Grammar.from_lark((GRAMMARS / "arithmetic.lark").read_text())
        Grammar.from_regex(r"(\d{1,3}\.){3}\d{1,3}|[a-zé_]+@example\.(com|org)")

    assert _pda_garbage_of(compile_all) == []


def test_matchers_leave_no_cycles() -> None:
    tokens = [bytes([b]) for b in range(256)] + [b'{"', b'":', b'"}', b"true", b"<eos>"]
    info = TokenizerInfo.from_vocab_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    compiled = GrammarCompiler(info, cache=False).compile_json_schema(SCHEMAS[0])

    def decode() -> None:
        m = GrammarMatcher(compiled)
        for t in [256, *b"name", 257, *b' "x', 258]:
            m.next_token_mask()
            assert m.accept_token(t)
        other = m.fork()
        other.rollback(2)
        assert other.accept_string('y"}')
        m.reset()

    assert _pda_garbage_of(decode) == []


def test_dropped_grammars_are_freed() -> None:
    """Module-level tables (the byte walker's Python tables, the token walk's entry points) must not
    keep a compiled grammar's automaton alive once its users drop it: a server compiling a schema
    per request would otherwise grow without bound."""
    tokens = [bytes([b]) for b in range(256)] + [b'{"', b'":', b'"}', b"true", b"<eos>"]
    info = TokenizerInfo.from_vocab_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    compiled = GrammarCompiler(info, cache=False).compile_json_schema(SCHEMAS[0])
    m = GrammarMatcher(compiled)
    for t in [256, *b"name", 257, *b' "x', 258]:
        m.next_token_mask()
        assert m.accept_token(t)
    assert m.accept_string("")  # the byte walker's tables are built too
    automaton = weakref.ref(compiled.grammar.automaton)
    kernel_id = id(compiled.kernel)
    assert any(k[1] == kernel_id for k in kernel_entry._entries)
    assert kernel_id in kernel_refs._refs  # its arrays by reference, for the entry points
    del m, compiled
    assert automaton() is None
    assert not any(k[1] == kernel_id for k in kernel_entry._entries)
    assert kernel_id not in kernel_refs._refs


def _ir_nodes_from(root: object) -> int:
    """How many IR nodes are reachable from ``root`` through instances and containers (not through
    functions, classes or modules, which reach everything)."""
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
    seen: set[int] = set()
    todo, found = [root], 0
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, skip):
            continue
        seen.add(id(o))
        found += isinstance(o, Expr)
        todo.extend(gc.get_referents(o))
    return found


def test_compiled_grammars_keep_no_ir() -> None:
    """A grammar a GrammarCompiler builds lets go of its IR and normal form once compiled: they
    are most of its Python objects, and every full garbage collection walks each object alive.
    ``to_ebnf`` and ``ir`` come back on demand, equal, built again from a snapshot of the schema
    (the caller's object may change meanwhile).  A Grammar the caller passes in keeps its own."""
    tokens = [bytes([b]) for b in range(256)] + [b"<eos>"]
    info = TokenizerInfo.from_vocab_bytes(tokens, stop_token_ids=[256])
    compiler = GrammarCompiler(info, cache=False)
    schema = copy.deepcopy(SCHEMAS[0])
    compiled = compiler.compile_json_schema(schema)
    compiler.wait()
    fresh = Grammar.from_json_schema(SCHEMAS[0])
    assert _ir_nodes_from(fresh) > 100
    assert _ir_nodes_from(compiled) == 0
    schema["properties"]["n"]["minimum"] = 5
    assert compiled.grammar.to_ebnf(normalized=True) == fresh.to_ebnf(normalized=True)
    assert compiled.grammar.to_ebnf() == fresh.to_ebnf()
    assert list(compiled.grammar.ir.rules) == list(fresh.ir.rules)
    for compile_text in (lambda: compiler.compile_lark((GRAMMARS / "arithmetic.lark").read_text()),
                         lambda: compiler.compile_regex(r"[a-z]+@example\.(com|org)")):
        assert _ir_nodes_from(compile_text()) == 0
    own = Grammar.from_ebnf((GRAMMARS / "sql_select.gbnf").read_text())
    compiler.compile_grammar(own)
    compiler.wait()
    assert _ir_nodes_from(own) > 100


def test_a_collection_visits_nothing_inside_the_byte_walkers_tables() -> None:
    """The byte walker's tables of an automaton (per-state flags, push ranks, rule starts and the
    transitions) live as long as its grammar, and a full collection visits every element of a
    list: as lists, 147 compiled schemas with a matcher each held 4.4 million elements and a full
    collection took 112-149 ms, against 71-73 ms as bytes and arrays (whose traversal visits at most
    their type).  The transitions are one view of the automaton's table, not an object per state."""
    from pda import walker

    tok = TokenizerInfo.from_vocab_bytes([bytes([b]) for b in range(256)] + [b""], stop_token_ids=256)
    compiled = GrammarCompiler(tok, cache=False).compile_json_schema(SCHEMAS[0])
    matcher = GrammarMatcher(compiled)
    assert matcher.accept_string('{"name": "ab", "tags": ["x", "yz"], "kind": "beta", "n": 12, "x_1": 1.5}')
    aut = compiled.grammar.automaton
    byte_class, is_end, has_bytes, rank, calls, starts, rows = walker._TABLES[aut]
    for table in (is_end, has_bytes, rank, starts):
        assert gc.get_referents(table) in ([], [type(table)]), type(table)
    assert isinstance(rows, memoryview) and rows.shape == aut.trans.shape
    assert len(gc.get_referents(rows)) == 1  # its buffer, not an element
    s, c = np.argwhere(aut.trans >= 0)[-1].tolist()
    assert rows[s, c] == aut.trans[s, c] and rows[0, 0] == aut.trans[0, 0]
    assert len(byte_class) == 256  # one list of 256 byte classes per automaton


def test_configurations_share_one_object_per_parent_set_and_per_top() -> None:
    """Every top a closure makes, and its parent set, is the one object of its value (a large
    schema's documents left 8,400 parent sets alive, 94 of them distinct, and 8,500 tops, 3,300
    distinct), and both are tuples of ints that a collection stops tracking (as frozensets, 147 live
    matchers held 54,000 of them, each one more object for every full collection to walk)."""
    tok = TokenizerInfo.from_vocab_bytes([bytes([b]) for b in range(256)] + [b""], stop_token_ids=256)
    compiled = GrammarCompiler(tok, cache=False).compile_json_schema(SCHEMAS[0])
    matcher = GrammarMatcher(compiled)
    assert matcher.accept_string('{"name": "ab", "tags": ["x", "yz"], "kind": "beta", "n": 12, "x_1": 1.5}')
    walker = matcher._walker
    configs = {id(c): c for c in walker._memo.values()} | {id(c): c for c in walker._closed.values()}
    tops = [top for c in configs.values() for top in c.tops]
    assert len(tops) > 20
    assert len({id(t) for t in tops}) == len(set(tops))  # one object per top value
    parent_sets = [p for _, p in tops]
    assert len({id(p) for p in parent_sets}) == len(set(parent_sets))
    arena = walker.arena
    assert len({id(p) for p in arena.parents}) == len(set(arena.parents))  # the stack's nodes share them too
    gc.collect()
    assert not any(gc.is_tracked(top) or gc.is_tracked(top[1]) for top in tops)
    assert not any(gc.is_tracked(c.tops) for c in configs.values())
    other = GrammarMatcher(compiled)
    assert all(other.accept_token(b) for b in b'{"name": "ab"')
    steps = other._space.steps  # keyed by ints, not (configuration, token) tuples
    assert steps and all(type(k) is int for k in steps)
    assert walker._memo and all(type(k) is int for k in walker._memo)  # and the byte steps too
    made = list(walker._memo.values()) + list(walker._single.values()) + list(walker._closed.values())
    assert len({id(c) for c in made}) == len(set(made))  # one configuration object per value


def test_tokens_over_configurations_met_before_add_no_tracked_objects() -> None:
    """A matcher's rollback history holds one reference per token, and a token that leads to a
    configuration met before reuses its object: a long string adds nothing for the collector to
    track (a tuple and a new configuration per token did: 147 matchers after one document each held
    243,000 tracked objects, 200,000 after)."""
    tok = TokenizerInfo.from_vocab_bytes([bytes([b]) for b in range(256)] + [b"ab", b""], stop_token_ids=257)
    compiled = GrammarCompiler(tok, cache=False).compile_json_schema({"type": "array", "items": {"type": "string"}})
    matcher = GrammarMatcher(compiled)
    assert matcher.accept_string('["') and matcher.accept_token(256)  # into the string, warm
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(500):
        assert matcher.accept_token(256)  # "ab" inside the string
    gc.collect()
    assert len(gc.get_objects()) - before < 20
    assert matcher.num_tokens == 502
    matcher.rollback(500)
    assert matcher.accept_string('"]') and matcher.is_completed()
