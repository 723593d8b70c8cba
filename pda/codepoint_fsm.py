"""Deterministic automata over code points: intersection, complement (back to IR: :mod:`pda.dfa_to_ir`).

The grammar IR has no intersection or complement, but a JSON Schema needs both: a string must
match every ``pattern`` *and* fit ``minLength``/``maxLength``; an undeclared property name must be
a string that is *not* a declared name and matches no ``patternProperties`` regex; a number must
lie within its bounds *and* be a multiple of ``multipleOf``.  This module turns the regular part of
the IR into deterministic automata over code points (transitions are inclusive code-point ranges),
and combines them exactly (:mod:`pda.dfa_to_ir` turns the result back into IR):

* :func:`from_expr` — Thompson NFA (:class:`pda.fsm.ThompsonNFA`) + subset construction; the
  result is trimmed and minimised by pda's one minimiser (:func:`pda.dfa_kernels.minimize_partial`);
* :func:`intersect`, :func:`union`, :func:`difference`, :func:`complement`, :func:`is_empty`,
  :func:`matches`, :func:`length_dfa`.

Everything here works on decoded characters; the JSON spelling of each character (escapes) is
applied by the caller through the ``label`` function given to :func:`pda.dfa_to_ir.to_expr`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from pda.dfa_kernels import minimize_partial
from pda.errors import FsmTooLarge
from pda.fsm import ThompsonNFA
from pda.limits import check_deadline
from pda.ir import MAX_CODE_POINT, ByteClass, Bytes, CharClass, Expr

__all__ = [
    "DFA", "from_expr", "intersect", "union", "difference", "complement", "is_empty", "matches",
    "length_dfa", "literal_set_dfa", "FsmTooLarge", "MAX_STATES",
]

Ranges = tuple[tuple[int, int], ...]
MAX_STATES = 20000


@dataclass
class DFA:
    """A trimmed DFA: state 0 is the start; ``trans[s]`` is a sorted list of disjoint (lo, hi, target).

    A DFA with no states (``trans == []``) recognises the empty language.
    """

    trans: list[list[tuple[int, int, int]]]
    accept: list[bool]

    @property
    def size(self) -> int:
        return len(self.trans)


EMPTY = DFA([], [])


# ----------------------------------------------------------------------------- NFA


class _NFA(ThompsonNFA):
    """:class:`pda.fsm.ThompsonNFA` over code points: a literal is its characters, a class its ranges."""

    def __init__(self) -> None:
        super().__init__(20 * MAX_STATES)

    def too_many(self) -> Exception:
        return FsmTooLarge("NFA", 20 * MAX_STATES)

    def leaf(self, e: Expr, s: int, t: int) -> None:
        if isinstance(e, Bytes):
            text = e.data.decode("utf-8")
            cur = s
            for i, ch in enumerate(text):
                nxt = t if i == len(text) - 1 else self.new()
                self.edges.append((cur, ord(ch), ord(ch), nxt))
                cur = nxt
        elif isinstance(e, CharClass):
            for lo, hi in e.ranges:
                self.edges.append((s, lo, hi, t))
        elif isinstance(e, ByteClass):
            for lo, hi in e.ranges:
                if hi >= 0x80:
                    raise ValueError("raw byte classes above 0x7F have no character meaning")
                self.edges.append((s, lo, hi, t))
        else:
            raise ValueError(f"rule reference {e.name!r} in a regular expression")  # type: ignore[attr-defined]

    def adjacency(self) -> tuple[list[list[int]], list[list[tuple[int, int, int]]]]:
        """Per state: its epsilon successors, and its (lo, hi, to) edges."""
        eps: list[list[int]] = [[] for _ in range(self.n)]
        edges: list[list[tuple[int, int, int]]] = [[] for _ in range(self.n)]
        for a, b in self.eps:
            eps[a].append(b)
        for a, lo, hi, b in self.edges:
            edges[a].append((lo, hi, b))
        return eps, edges


def _closure(eps: list[list[int]], states: Iterable[int]) -> frozenset[int]:
    seen = set(states)
    stack = list(seen)
    while stack:
        for n in eps[stack.pop()]:
            if n not in seen:
                seen.add(n)
                stack.append(n)
    return frozenset(seen)


def _number(index: dict, states: list, key: object, what: str) -> int:  # type: ignore[type-arg]
    """The number of state ``key``, a new one (appended to ``states``) the first time; the compile
    budget (:func:`pda.limits.check_deadline`) is checked at each new state."""
    got = index.get(key)
    if got is None:
        got = index[key] = len(states)
        states.append(key)
        if len(states) > MAX_STATES:
            raise FsmTooLarge(what, MAX_STATES)
        check_deadline()
    return got


def _split(edges: list[tuple[int, int, object]]) -> list[tuple[int, int, list[object]]]:
    """Disjoint elementary intervals of overlapping (lo, hi, x) edges, with the x's covering each."""
    points = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
    out: list[tuple[int, int, list[object]]] = []
    for a, b in zip(points, points[1:]):
        xs = [x for lo, hi, x in edges if lo <= a and b - 1 <= hi]
        if xs:
            out.append((a, b - 1, xs))
    return out


def from_expr(e: Expr) -> DFA:
    """The minimal DFA of a regular IR expression (no ``Ref``)."""
    nfa = _NFA()
    s, t = nfa.new(), nfa.new()
    nfa.build(e, s, t)
    eps, out_edges = nfa.adjacency()
    start = _closure(eps, [s])
    index = {start: 0}
    sets = [start]
    trans: list[list[tuple[int, int, int]]] = []
    accept: list[bool] = []
    i = 0
    while i < len(sets):
        cur = sets[i]
        i += 1
        accept.append(t in cur)
        edges = [ed for n in cur for ed in out_edges[n]]
        row: list[tuple[int, int, int]] = []
        for lo, hi, targets in _split(edges):  # type: ignore[arg-type]
            row.append((lo, hi, _number(index, sets, _closure(eps, targets), "DFA")))  # type: ignore[arg-type]
        trans.append(_merge_row(row))
    return minimize(DFA(trans, accept))


def _merge_row(row: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    row.sort()
    out: list[tuple[int, int, int]] = []
    for lo, hi, t in row:
        if out and out[-1][2] == t and out[-1][1] + 1 == lo:
            out[-1] = (out[-1][0], hi, t)
        else:
            out.append((lo, hi, t))
    return out


# ----------------------------------------------------------------------------- trim / minimise


def trim(d: DFA) -> DFA:
    """Drop states that are unreachable or cannot reach acceptance; renumber with start = 0."""
    if not d.trans:
        return EMPTY
    n = len(d.trans)
    rev: list[list[int]] = [[] for _ in range(n)]
    for s, row in enumerate(d.trans):
        for _, _, t in row:
            rev[t].append(s)
    live = _closure(rev, (s for s in range(n) if d.accept[s]))  # the states that reach acceptance
    if 0 not in live:
        return EMPTY
    order = [0]
    index = {0: 0}
    k = 0
    while k < len(order):
        s = order[k]
        k += 1
        for _, _, t in d.trans[s]:
            if t in live and t not in index:
                index[t] = len(order)
                order.append(t)
    trans = [[(lo, hi, index[t]) for lo, hi, t in d.trans[s] if t in live] for s in order]
    return DFA([_merge_row(r) for r in trans], [d.accept[s] for s in order])


def minimize(d: DFA) -> DFA:
    """Trim and merge equivalent states, with the one minimiser of pda
    (:func:`pda.dfa_kernels.minimize_partial`, over the elementary code-point intervals)."""
    d = trim(d)
    if not d.trans:
        return d
    cuts = sorted({lo for row in d.trans for lo, _, _ in row} | {hi + 1 for row in d.trans for _, hi, _ in row})
    where = {c: i for i, c in enumerate(cuts)}
    tails: list[int] = []
    labels: list[int] = []
    heads: list[int] = []
    for s, row in enumerate(d.trans):
        for lo, hi, t in row:
            for k in range(where[lo], where[hi + 1]):
                tails.append(s)
                labels.append(k)
                heads.append(t)
    block, _ = minimize_partial(len(d.trans), np.array(tails, dtype=np.int32), np.array(labels, dtype=np.int32),
                                np.array(heads, dtype=np.int32), np.array(d.accept, dtype=np.bool_))
    # Renumber blocks so that the start's block is 0, in BFS order.
    order = {int(block[0]): 0}
    rep: dict[int, int] = {int(block[0]): 0}
    queue = [0]
    k = 0
    while k < len(queue):
        s = queue[k]
        k += 1
        for _, _, t in d.trans[s]:
            b = int(block[t])
            if b not in order:
                order[b] = len(order)
                rep[b] = t
                queue.append(t)
    trans: list[list[tuple[int, int, int]]] = [[] for _ in order]
    accept = [False] * len(order)
    for b, s in rep.items():
        trans[order[b]] = _merge_row([(lo, hi, order[int(block[t])]) for lo, hi, t in d.trans[s]])
        accept[order[b]] = d.accept[s]
    return DFA(trans, accept)


# ----------------------------------------------------------------------------- operations


def _product(a: DFA, b: DFA, mode: str) -> DFA:
    """Product automaton; ``mode`` is 'and', 'or' or 'diff' (a and not b).  b must be total for 'diff'."""
    if mode == "and" and (not a.trans or not b.trans):
        return EMPTY
    if mode == "diff":
        b = _totalize(b)
        if not a.trans:
            return EMPTY
    if mode == "or":
        a, b = _totalize(a), _totalize(b)
    index = {(0, 0): 0}
    pairs = [(0, 0)]
    trans: list[list[tuple[int, int, int]]] = []
    accept: list[bool] = []
    k = 0
    while k < len(pairs):
        p, q = pairs[k]
        k += 1
        fa, fb = a.accept[p], b.accept[q]
        accept.append(fa and fb if mode == "and" else fa or fb if mode == "or" else fa and not fb)
        row = []
        ra, rb = a.trans[p], b.trans[q]
        i = j = 0
        while i < len(ra) and j < len(rb):
            lo = max(ra[i][0], rb[j][0])
            hi = min(ra[i][1], rb[j][1])
            if lo <= hi:
                row.append((lo, hi, _number(index, pairs, (ra[i][2], rb[j][2]), "product automaton")))
            if ra[i][1] < rb[j][1]:
                i += 1
            else:
                j += 1
        trans.append(_merge_row(row))
    return minimize(DFA(trans, accept))


def _totalize(d: DFA) -> DFA:
    """The same language with a total transition function over 0..MAX_CODE_POINT (adds a sink)."""
    if not d.trans:
        return DFA([[(0, MAX_CODE_POINT, 0)]], [False])
    sink = len(d.trans)
    trans = []
    for row in d.trans:
        full = []
        nxt = 0
        for lo, hi, t in row:
            if lo > nxt:
                full.append((nxt, lo - 1, sink))
            full.append((lo, hi, t))
            nxt = hi + 1
        if nxt <= MAX_CODE_POINT:
            full.append((nxt, MAX_CODE_POINT, sink))
        trans.append(full)
    trans.append([(0, MAX_CODE_POINT, sink)])
    return DFA(trans, d.accept + [False])


def intersect(a: DFA, b: DFA) -> DFA:
    return _product(a, b, "and")


def union(a: DFA, b: DFA) -> DFA:
    if not a.trans:
        return b
    if not b.trans:
        return a
    return _product(a, b, "or")


def difference(a: DFA, b: DFA) -> DFA:
    """Strings of ``a`` that ``b`` rejects."""
    if not b.trans:
        return a
    return _product(a, b, "diff")


def complement(d: DFA) -> DFA:
    """All strings of code points that ``d`` rejects."""
    t = _totalize(d)
    return minimize(DFA(t.trans, [not x for x in t.accept]))


def is_empty(d: DFA) -> bool:
    return not d.trans


def matches(d: DFA, text: str) -> bool:
    """Whether ``d`` accepts ``text``."""
    if not d.trans:
        return False
    s = 0
    for ch in text:
        c = ord(ch)
        for lo, hi, t in d.trans[s]:
            if lo <= c <= hi:
                s = t
                break
        else:
            return False
    return d.accept[s]


def length_dfa(lo: int, hi: int | None, alphabet: Ranges = ((0, MAX_CODE_POINT),)) -> DFA:
    """Strings over ``alphabet`` with ``lo <= len <= hi`` characters (``hi=None``: no upper bound)."""
    top = lo if hi is None else hi
    trans = []
    for i in range(top + 1):
        if i < top:
            trans.append([(a, b, i + 1) for a, b in alphabet])
        elif hi is None:
            trans.append([(a, b, i) for a, b in alphabet])
        else:
            trans.append([])
    return trim(DFA(trans, [i >= lo for i in range(top + 1)]))


def literal_set_dfa(words: Iterable[str]) -> DFA:
    """The finite language of ``words`` (a trie, minimised)."""
    trans: list[dict[int, int]] = [{}]
    accept = [False]
    for w in words:
        s = 0
        for ch in w:
            c = ord(ch)
            if c not in trans[s]:
                trans[s][c] = len(trans)
                trans.append({})
                accept.append(False)
            s = trans[s][c]
        accept[s] = True
    rows = [_merge_row([(c, c, t) for c, t in row.items()]) for row in trans]
    return minimize(DFA(rows, accept))
