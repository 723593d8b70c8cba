"""Byte-level finite automata for one rule: Thompson NFA, subset construction, minimisation.

A rule body is an IR expression over bytes, code point classes and calls of other rules.  Code
points are lowered to UTF-8 byte ranges here (surrogates never match, so every path spells valid
UTF-8).  The alphabet of a rule's DFA is a partition of the 256 byte values into classes (bytes
that no edge of the rule tells apart share a class) plus one call symbol per called rule.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from .errors import LimitExceededError
from .ir import Alt, ByteClass, Bytes, CharClass, Expr, Ref, Repeat, Seq

__all__ = ["RuleDFA", "build_rule_dfa", "utf8_sequences"]

_LENGTH_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


@lru_cache(maxsize=4096)
def utf8_sequences(lo: int, hi: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Byte-range sequences whose union is the UTF-8 encodings of code points ``lo..hi``.

    Surrogates (U+D800..U+DFFF) are left out.  Each sequence is a list of inclusive byte ranges,
    one per byte of the encoding.
    """
    out: list[list[tuple[int, int]]] = []
    for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)):
        for blo, bhi in _LENGTH_BOUNDS:
            x, y = max(a, blo), min(b, bhi)
            if x <= y:
                _split_same_length(x, y, out)
    return tuple(tuple(seq) for seq in out)


def _split_same_length(a: int, b: int, out: list[list[tuple[int, int]]]) -> None:
    n = len(_encode(a))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if a & ~m != b & ~m:
            if a & m:
                _split_same_length(a, a | m, out)
                _split_same_length((a | m) + 1, b, out)
                return
            if b & m != m:
                _split_same_length(a, (b & ~m) - 1, out)
                _split_same_length(b & ~m, b, out)
                return
    out.append(list(zip(_encode(a), _encode(b))))


class _NFA:
    """Thompson construction; states are ints, edges are byte ranges, calls, or epsilon."""

    def __init__(self, rule_index: dict[str, int], max_states: int) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.calls: list[list[tuple[int, int]]] = []
        self.rule_index = rule_index
        self.max_states = max_states

    def new(self) -> int:
        if len(self.eps) >= self.max_states:
            raise LimitExceededError(
                "max_states", self.max_states, "the grammar needs a larger automaton; raise max_states or "
                "use smaller repetition counts",
            )
        self.eps.append([])
        self.edges.append([])
        self.calls.append([])
        return len(self.eps) - 1

    def build(self, e: Expr, s: int, t: int) -> None:
        if isinstance(e, Bytes):
            cur = s
            for i, byte in enumerate(e.data):
                nxt = t if i == len(e.data) - 1 else self.new()
                self.edges[cur].append((byte, byte, nxt))
                cur = nxt
            if not e.data:
                self.eps[s].append(t)
        elif isinstance(e, ByteClass):
            for lo, hi in e.ranges:
                self.edges[s].append((lo, hi, t))
        elif isinstance(e, CharClass):
            # sequences that end alike share their tail states (a suffix trie into t)
            tails: dict[tuple[tuple[int, int], ...], int] = {(): t}

            def tail(rest: tuple[tuple[int, int], ...]) -> int:
                got = tails.get(rest)
                if got is None:
                    got = tails[rest] = self.new()
                    self.edges[got].append((rest[0][0], rest[0][1], tail(rest[1:])))
                return got

            for lo, hi in e.ranges:
                for sequence in utf8_sequences(lo, hi):
                    blo, bhi = sequence[0]
                    self.edges[s].append((blo, bhi, tail(sequence[1:])))
        elif isinstance(e, Seq):
            cur = s
            for i, item in enumerate(e.items):
                nxt = t if i == len(e.items) - 1 else self.new()
                self.build(item, cur, nxt)
                cur = nxt
        elif isinstance(e, Alt):
            for item in e.items:
                self.build(item, s, t)
        elif isinstance(e, Repeat):
            cur = s
            for _ in range(e.min):
                nxt = self.new()
                self.build(e.expr, cur, nxt)
                cur = nxt
            if e.max is None:
                loop, back = self.new(), self.new()
                self.eps[cur].append(loop)
                self.build(e.expr, loop, back)
                self.eps[back].append(loop)
                self.eps[loop].append(t)
            else:
                for _ in range(e.max - e.min):
                    nxt = self.new()
                    self.eps[cur].append(t)
                    self.build(e.expr, cur, nxt)
                    cur = nxt
                self.eps[cur].append(t)
        elif isinstance(e, Ref):
            self.calls[s].append((self.rule_index[e.name], t))
        else:
            raise TypeError(f"not an IR node: {e!r}")


@dataclass
class RuleDFA:
    """A minimal DFA of one rule. State 0 is the start.

    ``bounds`` are the class boundaries: class ``k`` holds bytes ``bounds[k] .. bounds[k+1]-1``.
    ``trans[s][k]`` is the next state or -1; ``calls[s]`` maps a rule index to the return state.
    """

    bounds: list[int]
    trans: list[list[int]]
    calls: list[dict[int, int]]
    accept: list[bool]


def build_rule_dfa(expr: Expr, rule_index: dict[str, int], *, max_states: int) -> RuleDFA:
    """Determinise and minimise the rule ``expr`` (only live states are kept)."""
    nfa = _NFA(rule_index, max_states)
    start, end = nfa.new(), nfa.new()
    nfa.build(expr, start, end)

    cuts = {0, 256}
    for edges in nfa.edges:
        for lo, hi, _ in edges:
            cuts.add(lo)
            cuts.add(hi + 1)
    bounds = sorted(cuts)
    cls_of = {b: i for i, b in enumerate(bounds)}
    nclasses = len(bounds) - 1
    # edges as class index ranges
    cedges = [[(cls_of[lo], cls_of[hi + 1] - 1, t) for lo, hi, t in edges] for edges in nfa.edges]

    closure_memo: dict[int, frozenset[int]] = {}

    def closure1(q: int) -> frozenset[int]:
        got = closure_memo.get(q)
        if got is None:
            seen = {q}
            todo = [q]
            while todo:
                for r in nfa.eps[todo.pop()]:
                    if r not in seen:
                        seen.add(r)
                        todo.append(r)
            got = closure_memo[q] = frozenset(seen)
        return got

    def closure(qs: set[int]) -> frozenset[int]:
        out: set[int] = set()
        for q in qs:
            out |= closure1(q)
        return frozenset(out)

    first = closure({start})
    ids = {first: 0}
    sets = [first]
    trans: list[list[int]] = []
    calls: list[dict[int, int]] = []
    i = 0
    while i < len(sets):
        cur = sets[i]
        i += 1
        by_class: dict[int, set[int]] = {}
        by_call: dict[int, set[int]] = {}
        for q in cur:
            for clo, chi, t in cedges[q]:
                for c in range(clo, chi + 1):
                    by_class.setdefault(c, set()).add(t)
            for r, t in nfa.calls[q]:
                by_call.setdefault(r, set()).add(t)
        row = [-1] * nclasses
        targets_memo: dict[frozenset[int], int] = {}
        for c, ts in by_class.items():
            key = frozenset(ts)
            d = targets_memo.get(key)
            if d is None:
                nxt = closure(ts)
                d = ids.get(nxt)
                if d is None:
                    if len(sets) >= max_states:
                        raise LimitExceededError("max_states", max_states, "raise max_states or simplify the grammar")
                    d = ids[nxt] = len(sets)
                    sets.append(nxt)
                targets_memo[key] = d
            row[c] = d
        crow: dict[int, int] = {}
        for r, ts in by_call.items():
            nxt = closure(ts)
            d = ids.get(nxt)
            if d is None:
                d = ids[nxt] = len(sets)
                sets.append(nxt)
            crow[r] = d
        trans.append(row)
        calls.append(crow)
    accept = [end in s for s in sets]
    return _minimize(RuleDFA(bounds, trans, calls, accept))


def _minimize(d: RuleDFA) -> RuleDFA:
    n = len(d.trans)
    # live states: those that can reach an accepting state (calls count as edges: every rule is productive)
    rev: list[list[int]] = [[] for _ in range(n)]
    for s in range(n):
        for t in d.trans[s]:
            if t >= 0:
                rev[t].append(s)
        for t in d.calls[s].values():
            rev[t].append(s)
    live = [False] * n
    todo = [s for s in range(n) if d.accept[s]]
    for s in todo:
        live[s] = True
    while todo:
        for p in rev[todo.pop()]:
            if not live[p]:
                live[p] = True
                todo.append(p)
    if not live[0]:
        return RuleDFA(d.bounds, [[-1] * (len(d.bounds) - 1)], [{}], [False])

    block = _hopcroft(d, live)
    # renumber blocks so that the start state's block is 0, in BFS order
    order: dict[int, int] = {block[0]: 0}
    rep: dict[int, int] = {block[0]: 0}
    queue = deque([0])
    while queue:
        s = queue.popleft()
        targets = [t for t in d.trans[s] if t >= 0 and live[t]] + [t for t in d.calls[s].values() if live[t]]
        for t in targets:
            if block[t] not in order:
                order[block[t]] = len(order)
                rep[block[t]] = t
                queue.append(t)
    m = len(order)
    trans = [[-1] * (len(d.bounds) - 1) for _ in range(m)]
    calls: list[dict[int, int]] = [{} for _ in range(m)]
    accept = [False] * m
    for b, s in rep.items():
        i = order[b]
        accept[i] = d.accept[s]
        trans[i] = [order[block[t]] if t >= 0 and live[t] else -1 for t in d.trans[s]]
        calls[i] = {r: order[block[t]] for r, t in d.calls[s].items() if live[t]}
    return RuleDFA(d.bounds, trans, calls, accept)


def _hopcroft(d: RuleDFA, live: list[bool]) -> list[int]:
    """Hopcroft's partition refinement over byte classes and call symbols; dead states get -1.

    The DFA is partial (a missing edge is -1) and is refined as such, with no sink state: both
    initial blocks start on the work list, and preimages only follow edges that exist, so the work
    is O(edges · log states) however many edges are missing.
    """
    n = len(d.trans)
    nclasses = len(d.bounds) - 1
    callees = sorted({r for calls in d.calls for r in calls})
    call_sym = {r: nclasses + k for k, r in enumerate(callees)}
    nsym = nclasses + len(callees)
    # inverse edges per symbol: inv[sym][t] -> sources
    inv: list[dict[int, list[int]]] = [{} for _ in range(nsym)]
    states = [q for q in range(n) if live[q]]
    for q in states:
        for c, t in enumerate(d.trans[q]):
            if t >= 0 and live[t]:
                inv[c].setdefault(t, []).append(q)
        for r, t in d.calls[q].items():
            if live[t]:
                inv[call_sym[r]].setdefault(t, []).append(q)
    used = [sym for sym in range(nsym) if inv[sym]]
    # the symbols on which each state has incoming edges: a work item (block, sym) whose block has
    # no incoming sym edge is a no-op, so it is never queued
    in_syms: list[set[int]] = [set() for _ in range(n)]
    for sym in used:
        for t in inv[sym]:
            in_syms[t].add(sym)
    acc = [q for q in states if d.accept[q]]
    rej = [q for q in states if not d.accept[q]]
    blocks: list[set[int]] = [set(b) for b in (acc, rej) if b]
    block_of = [-1] * n
    for i, b in enumerate(blocks):
        for q in b:
            block_of[q] = i
    work: set[tuple[int, int]] = {(i, sym) for i, b in enumerate(blocks) for sym in set().union(*(in_syms[q] for q in b))}
    while work:
        a, sym = work.pop()
        table = inv[sym]
        touched: dict[int, set[int]] = {}
        for t in blocks[a]:
            src = table.get(t)
            if src:
                for q in src:
                    touched.setdefault(block_of[q], set()).add(q)
        for y, inside in touched.items():
            whole = blocks[y]
            if len(inside) == len(whole):
                continue
            whole.difference_update(inside)  # y keeps the rest: the cost is the size of `inside`
            z = len(blocks)
            blocks.append(inside)
            for q in inside:
                block_of[q] = z
            inside_syms = set().union(*(in_syms[q] for q in inside)) if len(inside) <= len(whole) else None
            for s2 in used:
                if (y, s2) in work:
                    work.add((z, s2))
                elif inside_syms is None:
                    work.add((y, s2))  # `whole` is the smaller half
                elif s2 in inside_syms:
                    work.add((z, s2))
    return [block_of[q] if live[q] else -1 for q in range(n)]
