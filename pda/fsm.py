"""Byte-level finite automata for one rule: Thompson NFA, subset construction, minimisation.

A rule body is an IR expression over bytes, code point classes and calls of other rules.  Code
points are lowered to UTF-8 byte ranges (:mod:`pda.utf8`; surrogates never match, so every path
spells valid UTF-8).  The alphabet of a rule's DFA is a partition of the 256 byte values into
classes (bytes that no edge of the rule tells apart share a class) plus one call symbol per called
rule.  The three steps run as numba kernels: the Thompson NFA in :mod:`pda.nfa_kernels` (over the
grammar's IR flattened once per distinct node; :class:`ThompsonNFA` here is its Python reference),
subset construction and minimisation in :mod:`pda.dfa_kernels` (each one kernel call with its array
bookkeeping, :mod:`pda.rule_kernels`), both over *symbols*: the byte classes merged where the NFA
moves alike (classes split apart by one edge, like the bytes below and above a quote in "any byte
but quote or backslash", are often alike everywhere else).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np

from .dfa_kernels import DETERMINIZE_OK
from .errors import LimitExceededError
from .limits import check_deadline
from .nfa_kernels import THOMPSON_OK, flatten, thompson
from .rule_kernels import minimal_dfa, nfa_to_dfa
from .ir import Alt, ByteClass, Bytes, CharClass, Expr, Ref, Repeat, Seq
from .utf8 import leaf_fragment, utf8_sequences

__all__ = ["BuiltRules", "RuleDFA", "SubsetBlowup", "ThompsonNFA", "build_rule_dfa", "build_rule_dfas", "determinize", "utf8_sequences"]


class ThompsonNFA:
    """Thompson construction into flat edge lists: ``eps`` (from, to) and ``edges`` (from, lo, hi,
    to).  Sequences, choices and repeats are built here; a subclass says what a leaf (literal,
    class, call) becomes over its alphabet, and what happens past ``max_states``.

    Suffixes are shared: the fragment of a node that ends in a given state is built once, and
    every other place an equal node ends in the same state enters it by an epsilon
    edge (see :meth:`entry`).  Frontends repeat tails a lot (an object's optional members each
    end with the same rest of the object, a string's closing quote with the same continuation),
    and every copy in the NFA is a copy in the subset construction too: sharing them made the
    subset DFAs of real schemas 3-4x smaller, and they all minimise to the same DFA.
    """

    def __init__(self, max_states: int) -> None:
        self.n = 0
        self.eps: list[tuple[int, int]] = []
        self.edges: list[tuple[int, int, int, int]] = []
        self.max_states = max_states
        self.entries: dict[tuple[Expr, int], int] = {}

    def too_many(self) -> Exception:
        raise NotImplementedError

    def leaf(self, e: Expr, s: int, t: int) -> None:
        raise NotImplementedError

    def new(self) -> int:
        if self.n >= self.max_states:
            raise self.too_many()
        self.n += 1
        if not self.n & 4095:
            check_deadline()
        return self.n - 1

    def entry(self, e: Expr, t: int) -> int:
        """A state whose paths to ``t`` spell the language of ``e`` and that no other path leaves.

        Built once per (node, ``t``): a fragment's inner states are its own, and its entry is left
        only by the fragment's edges, so a second use may enter it as it is.
        """
        key = (e, t)
        u = self.entries.get(key)
        if u is None:
            u = self.entries[key] = self.new()
            self.build(e, u, t)
        return u

    def build(self, e: Expr, s: int, t: int) -> None:
        """Add paths from ``s`` to ``t`` spelling the language of ``e``.

        ``s`` may be left by other paths too (the choices of a choice share it), so the fragment
        of ``e`` itself starts there unshared; its parts that start in a state of their own are
        shared (:meth:`entry`): a sequence's items after the first, a choice's non-leaf choices.
        """
        if isinstance(e, Seq):
            nxt = t
            for item in e.items[:0:-1]:
                nxt = self.entry(item, nxt)
            if e.items:  # an empty sequence matches nothing (no path), as it always has here
                self.build(e.items[0], s, nxt)
        elif isinstance(e, Alt):
            for item in e.items:
                if isinstance(item, (Seq, Alt, Repeat)):
                    self.eps.append((s, self.entry(item, t)))
                else:
                    self.build(item, s, t)
        elif isinstance(e, Repeat):
            cur = s
            for _ in range(e.min):
                nxt = self.new()
                self.build(e.expr, cur, nxt)
                cur = nxt
            if e.max is None:
                loop, back = self.new(), self.new()
                self.eps.append((cur, loop))
                self.build(e.expr, loop, back)
                self.eps.append((back, loop))
                self.eps.append((loop, t))
            else:
                for _ in range(e.max - e.min):
                    nxt = self.new()
                    self.eps.append((cur, t))
                    self.build(e.expr, cur, nxt)
                    cur = nxt
                self.eps.append((cur, t))
        elif isinstance(e, Bytes) and not e.data:
            self.eps.append((s, t))
        elif isinstance(e, (Bytes, CharClass, ByteClass, Ref)):
            self.leaf(e, s, t)
        else:
            raise TypeError(f"not an IR node: {e!r}")


class _NFA(ThompsonNFA):
    """Over bytes: code points lowered to UTF-8, and calls of other rules."""

    def __init__(self, rule_index: dict[str, int], max_states: int) -> None:
        super().__init__(max_states)
        self.calls: list[tuple[int, int, int]] = []  # (from, rule, to)
        self.rule_index = rule_index
        self.byte_entries: dict[tuple[int, int], int] = {}

    def byte_entry(self, b: int, t: int) -> int:
        """The state whose one edge is byte ``b`` to ``t`` (made once per (``b``, ``t``))."""
        key = (b, t)
        u = self.byte_entries.get(key)
        if u is None:
            u = self.byte_entries[key] = self.new()
            self.edges.append((u, b, b, t))
        return u

    def too_many(self) -> Exception:
        return LimitExceededError(
            "max_states", self.max_states, "the grammar needs a larger automaton; raise max_states or "
            "use smaller repetition counts",
        )

    def leaf(self, e: Expr, s: int, t: int) -> None:
        if isinstance(e, Ref):
            self.calls.append((s, self.rule_index[e.name], t))
            return
        if isinstance(e, Bytes) and len(e.data) > 1:
            # Byte by byte, last to first, the state before each later byte shared: literals that
            # end alike share their ends, so the choice of 50,000 enum strings determinises to
            # about its minimal DFA, not to the trie of its prefixes (which is 2-3x larger).
            nxt = t
            for b in reversed(e.data[1:]):
                nxt = self.byte_entry(b, nxt)
            self.edges.append((s, e.data[0], e.data[0], nxt))
            return
        assert isinstance(e, (Bytes, CharClass, ByteClass))
        internal, edges, _ = leaf_fragment(e)
        ports = [s, t] + [self.new() for _ in range(internal)]
        self.edges.extend((ports[a], lo, hi, ports[b]) for a, lo, hi, b in edges)


@dataclass
class RuleDFA:
    """A minimal DFA of one rule. State 0 is the start.

    ``bounds`` are the class boundaries: class ``k`` holds bytes ``bounds[k] .. bounds[k+1]-1``.
    ``trans[s, k]`` is the next state or -1; ``call_rows`` are the call edges, rows (state, rule,
    return state) sorted by state and rule; ``accept[s]`` says whether the rule may end in ``s``.
    """

    bounds: list[int]
    trans: np.ndarray  # (states, classes) int32
    call_rows: np.ndarray  # (edges, 3) int64
    accept: np.ndarray  # (states,) bool

    @cached_property
    def calls(self) -> list[dict[int, int]]:
        """``calls[s]`` maps a rule index to the return state of the call from ``s``."""
        out: list[dict[int, int]] = [{} for _ in range(len(self.trans))]
        for d, r, t in self.call_rows.tolist():
            out[d][r] = t
        return out


def build_rule_dfa(expr: Expr, rule_index: dict[str, int], *, max_states: int) -> RuleDFA:
    """Determinise and minimise the rule ``expr`` (only live states are kept).

    Both steps run over the rule's *symbols* (:func:`pda.dfa_kernels.class_symbols`), the byte
    classes merged where the NFA moves alike; the result is spelled over the byte classes.
    """
    return build_rule_dfas([expr], rule_index, max_states=max_states)[0]


# The Thompson NFA of a rule may have this many times the states its DFA may have: it is only edge
# lists, and one with shared literal ends (the suffix trie of 50,000 enum strings) can be larger
# than the minimal DFA it determinises to.  The subset construction is bounded by ``max_states``.
NFA_STATES_PER_STATE = 4

# A watched rule whose subset construction passes BLOWUP_PER_NFA_STATE x its NFA states, plus
# BLOWUP_FLOOR (or what max_states leaves), is given up (:class:`SubsetBlowup`).  On 400
# JSONSchemaBench schemas, the bundled grammars and the llama.cpp ones, no rule's subset DFA has
# more than 5.4x its NFA's states (most have fewer); rules of SynCode's Go grammar had 13-270x.
BLOWUP_PER_NFA_STATE = 8
BLOWUP_FLOOR = 4096


class SubsetBlowup(Exception):
    """The subset constructions of the watched rules at ``positions`` passed their blow-up bounds."""

    def __init__(self, positions: list[int]) -> None:
        super().__init__(positions)
        self.positions = positions


def build_rule_dfas(exprs: Sequence[Expr], rule_index: dict[str, int], *, max_states: int,
                    watch: frozenset[int] = frozenset(), known: BuiltRules | None = None) -> list[RuleDFA]:
    """:func:`build_rule_dfa` of each rule body of a grammar, ``max_states`` counting over all.

    The bodies are flattened together (:func:`pda.nfa_kernels.flatten`): rules share subtrees, and
    flattening each rule on its own walked them 2-5x over on real schemas.  The subset construction
    of a rule whose position is in ``watch`` raises :class:`SubsetBlowup` past its blow-up bound
    (see :data:`BLOWUP_PER_NFA_STATE`) or past what ``max_states`` leaves; the other rules are
    built first, so that one exception names every rule that blew up.  ``known`` keeps
    the DFAs built, by body, for a later call with other rule numbers (:func:`pda.automaton.automaton_of`
    builds a grammar again after keeping some calls; most rules did not change)."""
    names = {i: n for n, i in rule_index.items()}
    todo = [p for p, e in enumerate(exprs) if known is None or e not in known.dfas]
    flat, roots = flatten([exprs[p] for p in todo], rule_index)
    root_of = dict(zip(todo, roots))
    out = []
    blown = []
    total = 0
    for position, expr in enumerate(exprs):
        check_deadline()
        left = max_states - total
        if position not in root_of:
            d = known.renumbered(expr, rule_index)  # type: ignore[union-attr]
            if len(d.trans) > left:
                raise _NFA(rule_index, max_states).too_many()
        else:
            status, n, eps, edges, call_rows = thompson(*flat, root_of[position], NFA_STATES_PER_STATE * left)
            if status != THOMPSON_OK:
                raise _NFA(rule_index, max_states).too_many()
            if position in watch:
                try:
                    subset = _determinize(n, eps, edges, call_rows, min(left, BLOWUP_PER_NFA_STATE * n + BLOWUP_FLOOR))
                except LimitExceededError:
                    blown.append(position)
                    continue
            else:
                subset = _determinize(n, eps, edges, call_rows, left, reported=max_states)
            d = _minimal(*subset)
            if known is not None:
                known.add(expr, d, names)
        total += len(d.trans)
        out.append(d)
    if blown:
        raise SubsetBlowup(blown)
    return out


class BuiltRules:
    """Rule DFAs by rule body, their call edges naming the callee (:func:`build_rule_dfas`)."""

    def __init__(self) -> None:
        self.dfas: dict[Expr, tuple[RuleDFA, list[str]]] = {}

    def add(self, body: Expr, d: RuleDFA, names: dict[int, str]) -> None:
        self.dfas[body] = (d, [names[r] for r in d.call_rows[:, 1].tolist()])

    def renumbered(self, body: Expr, rule_index: dict[str, int]) -> RuleDFA:
        """The DFA of ``body`` with its calls numbered by ``rule_index``, rows sorted again."""
        d, callees = self.dfas[body]
        rows = d.call_rows.copy()
        rows[:, 1] = [rule_index[n] for n in callees]
        rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
        return RuleDFA(d.bounds, d.trans, rows, d.accept)


def determinize(expr: Expr, rule_index: dict[str, int], *, max_states: int, reference: bool = False,
                merge_classes: bool = True) -> RuleDFA:
    """The subset-construction DFA of ``expr`` (all states reachable, not minimal, maybe dead states).

    The Thompson NFA comes from the kernel of :mod:`pda.nfa_kernels`; ``reference=True`` builds it
    with the pure-Python :class:`ThompsonNFA` instead (the tests compare the two).
    ``merge_classes=False`` runs the subset construction over the byte classes themselves rather
    than over the merged symbols; the DFA is the same, numbering included (the tests compare).
    """
    bounds, symbol, trans, call_rows, accept = _subset(expr, rule_index, max_states, reference, merge_classes)
    return RuleDFA(bounds, trans[:, symbol], call_rows, accept)


def _subset(expr: Expr, rule_index: dict[str, int], max_states: int, reference: bool,
            merge_classes: bool = True) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The subset construction of ``expr`` over its symbols: ``(bounds, symbol, trans, call_rows,
    accept)`` where ``trans[s, symbol[k]]`` is the next state on byte class ``k``."""
    if reference:
        nfa = _NFA(rule_index, max_states)
        start, end = nfa.new(), nfa.new()
        nfa.build(expr, start, end)
        n = nfa.n
        edges = np.array(nfa.edges, dtype=np.int64).reshape(-1, 4)
        eps = np.array(nfa.eps, dtype=np.int64).reshape(-1, 2)
        call_rows = np.array(nfa.calls, dtype=np.int64).reshape(-1, 3)
    else:
        flat, roots = flatten([expr], rule_index)
        status, n, eps, edges, call_rows = thompson(*flat, roots[0], max_states)
        if status != THOMPSON_OK:
            raise _NFA(rule_index, max_states).too_many()
    return _determinize(n, eps, edges, call_rows, max_states, merge_classes)


def _determinize(n: int, eps: np.ndarray, edges: np.ndarray, call_rows: np.ndarray, max_states: int,
                 merge_classes: bool = True, reported: int | None = None,
                 ) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_subset` of an NFA of ``n`` states from state 0 (start) to 1 (end): epsilon rows
    (from, to), byte edge rows (from, lo, hi, to) and call rows (from, rule, to)
    (:func:`pda.rule_kernels.nfa_to_dfa`).  Past ``max_states`` states, the error names the limit
    ``reported`` (the grammar's, default ``max_states``)."""
    status, bounds, symbol, trans, accept, rows = nfa_to_dfa(n, eps, edges, call_rows, max_states, merge_classes)
    if status != DETERMINIZE_OK:
        raise LimitExceededError("max_states", max_states if reported is None else reported,
                                 "raise max_states or simplify the grammar")
    return bounds.tolist(), symbol, trans, rows, accept


def _minimize(d: RuleDFA) -> RuleDFA:
    """The minimal DFA of ``d``'s language (dead states dropped), states renumbered in first-seen order."""
    return _minimal(d.bounds, np.arange(len(d.bounds) - 1), d.trans, d.call_rows, d.accept)


def _minimal(bounds: list[int], symbol: np.ndarray, trans: np.ndarray, rows: np.ndarray,
             accept: np.ndarray) -> RuleDFA:
    """The minimal DFA of the DFA ``trans[s, symbol[k]]`` (see :func:`_subset`), over byte classes.

    States are renumbered in first-seen order and dead states dropped.  Call edges are transitions
    too, one label per callee after the symbols (:func:`pda.rule_kernels.minimal_dfa`).
    """
    out, calls, acc = minimal_dfa(trans, symbol, rows, np.asarray(accept, dtype=np.bool_))
    if not len(out):  # the empty language: one state, no way out
        return RuleDFA(bounds, np.full((1, len(symbol)), -1, dtype=np.int32), np.zeros((0, 3), dtype=np.int64),
                       np.zeros(1, dtype=np.bool_))
    return RuleDFA(bounds, out, calls, acc)
