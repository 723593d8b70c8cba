"""From a code-point DFA (:mod:`pda.codepoint_fsm`) back to grammar IR.

:func:`to_expr` turns the automaton into a regular expression tree by state elimination, within a
size budget; past it, and when the caller lets it add rules, into rules
(:func:`_rules`): per strongly connected component of the states, one rule per way into the
component -- the state elimination of its states, calling the rules of the components it leaves
for -- and, where that passes the budget too, one rule per state, a self-loop written as a
repetition.  A rule that reads a character and calls the next state's rule pushes a frame: round
after round of a cycle, so a token walk on a long key kept a thread per depth (the classification
of one key state took 35-60 ms on Github_ultra/o65323, whose keys are BCP 47 language tags; 2.2 ms
once the self-loops were repetitions).  Long chains of one label (counted repetitions) are folded
first (:func:`_chains`), in both forms.

Each transition's code-point ranges become IR through the caller's ``label`` (the JSON spellings of
the characters, for strings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pda.codepoint_fsm import DFA, Ranges
from pda.errors import FsmTooLarge
from pda.graphs import strongly_connected
from pda.ir import EPSILON, NOTHING, Expr, Ref, alt, chars, node_count, repeat, seq, star

__all__ = ["to_expr", "default_label", "CYCLE_MAX_ENTRIES"]




def default_label(ranges: Ranges) -> Expr:
    return chars(ranges)


def to_expr(
    d: DFA,
    label: Callable[[Ranges], Expr] = default_label,
    *,
    add_rule: Callable[[str, Expr], str] | None = None,
    name: str = "fsm",
    budget: int = 4000,
) -> Expr:
    """An IR expression for the language of ``d``; each transition's ranges go through ``label``.

    State elimination first (a plain regular expression the core can inline); when the expression
    would exceed ``budget`` nodes and ``add_rule`` is given, the DFA is emitted as one rule per
    state instead (``add_rule(hint, expr)`` registers a rule and returns its name).
    """
    if not d.trans:
        return NOTHING
    try:
        return _eliminate(d, label, budget)
    except FsmTooLarge:
        if add_rule is None:
            raise
    return _rules(d, label, add_rule, name, budget)


def _groups(row: list[tuple[int, int, int]]) -> dict[int, Ranges]:
    """A DFA row as target -> the ranges leading there."""
    out: dict[int, list[tuple[int, int]]] = {}
    for lo, hi, t in row:
        out.setdefault(t, []).append((lo, hi))
    return {t: tuple(rs) for t, rs in out.items()}


@dataclass
class _Chains:
    inner: set[int]  # states folded away
    # (from, first) -> (end, steps, whether the inner states accept, their other edges)
    starts: dict[tuple[int, int], tuple[int, int, bool, tuple[tuple[int, Ranges], ...]]]

    def edges(self, s: int, t: int, rs: Ranges, label: Callable[[Ranges], Expr]) -> list[tuple[int | None, Expr]]:
        """The edges from ``s`` that replace its edge to ``t`` (target None: acceptance)."""
        chain = self.starts.get((s, t))
        if chain is None:
            return [(t, label(rs))]
        end, m, accepting, side = chain
        lab = label(rs)
        some = repeat(lab, 1, m - 1)  # into one of the inner states
        out: list[tuple[int | None, Expr]] = [(end, repeat(lab, m, m))]
        if accepting:
            out.append((None, some))
        out += [(x, seq(some, label(r))) for x, r in side]
        return out


def _chains(d: DFA, groups: list[dict[int, Ranges]]) -> _Chains:
    """Runs ``q0 -L-> q1 -L-> ... -L-> qm`` (m >= 3) whose inner states have one way in, go on
    by the same label ``L``, and share their acceptance and their other edges: folded into
    counted repetitions (eliminating such states one by one would nest m levels deep)."""
    preds: list[set[int]] = [set() for _ in d.trans]
    for s, g in enumerate(groups):
        for t in g:
            preds[t].add(s)

    def inner(q: int, rs: Ranges) -> tuple[int, tuple[tuple[int, Ranges], ...]] | None:
        """q's successor on rs and its other edges, when q can be inside a chain on rs."""
        if q == 0 or len(preds[q]) != 1:
            return None
        nxt = [t for t, r in groups[q].items() if r == rs and t != q]
        if not nxt:
            return None
        return nxt[0], tuple(sorted((t, r) for t, r in groups[q].items() if t != nxt[0]))

    # States in breadth-first order: a chain is found from its first state before any of its
    # inner states could be taken for the start of another one.
    order, seen = [0], {0}
    for s in order:
        for t in groups[s]:
            if t not in seen:
                seen.add(t)
                order.append(t)
    found = _Chains(set(), {})
    for s in order:
        if s in found.inner:
            continue
        for q1, rs in groups[s].items():
            first = inner(q1, rs)
            if first is None or q1 in found.inner:
                continue
            run, (q, side) = [q1], first
            while q not in run and q != s and d.accept[q] == d.accept[q1]:
                step = inner(q, rs)
                if step is None or step[1] != side or q in (x for x, _ in side):
                    break
                run.append(q)
                q = step[0]
            if len(run) >= 2 and q not in run and not any(x in run for x, _ in side):
                found.inner.update(run)
                found.starts[(s, q1)] = (q, len(run) + 1, d.accept[q1], side)
    return found


def _eliminate(d: DFA, label: Callable[[Ranges], Expr], budget: int) -> Expr:
    return _eliminate_graph(_folded_edges(d, label), 0, budget)


Edges = dict[int, list[tuple["int | None", Expr]]]  # state -> (next state, or None: accept here; label)


def _folded_edges(d: DFA, label: Callable[[Ranges], Expr]) -> Edges:
    """The edges of ``d``'s states with its long chains folded (:func:`_chains`; the inner states
    are gone), acceptance as an edge to None."""
    groups = [_groups(row) for row in d.trans]
    folded = _chains(d, groups)
    edges: Edges = {}
    for s in range(len(d.trans)):
        if s in folded.inner:
            continue
        edges[s] = [(x, e) for t, rs in groups[s].items() for x, e in folded.edges(s, t, rs, label)]
        if d.accept[s]:
            edges[s].append((None, EPSILON))
    return edges


def _eliminate_graph(edges: Edges, entry: int, budget: int) -> Expr:
    """State elimination: the expression of the paths from ``entry`` to acceptance (an edge to
    None) over the states of ``edges``, whose every edge stays among them or accepts."""
    n = max(edges) + 1
    start, final = n, n + 1
    out: dict[int, dict[int, Expr]] = {i: {} for i in [*edges, start, final]}
    inc: dict[int, set[int]] = {i: set() for i in [*edges, start, final]}
    sizes: dict[tuple[int, int], int] = {}

    def put(p: int, q: int, e: Expr) -> None:
        old = out[p].get(q)
        new = e if old is None else alt(old, e)
        out[p][q] = new
        inc[q].add(p)
        sizes[(p, q)] = node_count(new)

    put(start, entry, EPSILON)
    for s, es in edges.items():
        for x, e in es:
            put(s, final if x is None else x, e)
    remaining = set(edges)
    total = sum(sizes.values())
    while remaining:
        # Eliminate the state whose removal creates the least: in-degree * out-degree weighted.
        def cost(q: int) -> int:
            ins = [p for p in inc[q] if p != q]
            outs = [r for r in out[q] if r != q]
            return len(ins) * len(outs) + sum(sizes[(p, q)] for p in ins) * max(1, len(outs)) \
                + sum(sizes[(q, r)] for r in outs) * max(1, len(ins))
        q = min(remaining, key=cost)
        remaining.discard(q)
        loop = out[q].pop(q, None)
        inc[q].discard(q)
        sizes.pop((q, q), None)
        mid = star(loop) if loop is not None else EPSILON
        ins = [p for p in inc[q]]
        outs = list(out[q].items())
        for p in ins:
            ep = out[p].pop(q)
            sizes.pop((p, q), None)
            for r, er in outs:
                put(p, r, seq(ep, mid, er))
        for r, _ in outs:
            inc[r].discard(q)
            sizes.pop((q, r), None)
        out[q] = {}
        inc[q] = set()
        total = sum(sizes.values())
        if total > budget:
            raise FsmTooLarge("regular expression", budget)
    return out[start].get(final, NOTHING)


# A cycle through several states of the rule-per-state fallback becomes one rule per way into it when
# it has at most this many (each is a state elimination of the cycle's states).
CYCLE_MAX_ENTRIES = 8


def _rules(d: DFA, label: Callable[[Ranges], Expr], add_rule: Callable[[str, Expr], str], name: str,
           budget: int = 4000) -> Expr:
    """``d`` as rules (see :func:`to_expr`): per strongly connected component of its states, one
    rule per way into the component, the state elimination of its states (``budget`` nodes at
    most), calling the rules of the components it leaves for; past that budget, or with more than
    :data:`CYCLE_MAX_ENTRIES` ways in, one rule per state.  A rule reading a character and calling
    the next state's rule pushes a frame: within a component, round after round, so a token walk
    kept a thread per depth on a long key (the classification of one key state took 35-60 ms on
    Github_ultra/o65323 and 5.8 ms on each of the "contains a word" strings of Github_hard/o12278)."""
    names = [f"{name}_s{i}" for i in range(len(d.trans))]
    edges = _folded_edges(d, label)

    def register(s: int, body: Expr) -> None:
        if add_rule(names[s], body) != names[s]:
            raise ValueError(f"rule name {names[s]!r} already taken")

    comps = strongly_connected({s: {x for x, _ in es if x is not None} for s, es in edges.items()})
    comp_of = {s: i for i, comp in enumerate(comps) for s in comp}
    entered = {x for q, es in edges.items() for x, _ in es if x is not None and comp_of[x] != comp_of[q]}
    for comp in comps:
        members = set(comp)
        if len(comp) > 1:
            inside: Edges = {s: [(x, e) if x is None or x in members else (None, seq(e, Ref(names[x])))
                                 for x, e in edges[s]] for s in comp}
            entries = [s for s in comp if s == 0 or s in entered]
            if len(entries) <= CYCLE_MAX_ENTRIES:
                try:
                    bodies = [(s, _eliminate_graph(inside, s, budget)) for s in entries]
                except FsmTooLarge:
                    pass
                else:
                    for s, body in bodies:
                        register(s, body)
                    continue
        for s in comp:  # a self-loop is a repetition, not a call of the rule itself
            loop = [e for x, e in edges[s] if x == s]
            body = alt(*(e if x is None else seq(e, Ref(names[x])) for x, e in edges[s] if x != s))
            register(s, seq(repeat(alt(*loop), 0, None), body) if loop else body)
    return Ref(names[0])
