"""The whole grammar as one pushdown automaton in flat numpy arrays.

Every kept rule's minimal DFA gets a block of global state numbers.  Bytes go through one global
class map, so a byte step is ``trans[state, byte_class[b]]``:

* ``byte_class[256] uint8`` and ``trans[S, C] int32`` (-1: no edge);
* calls in CSR form: ``call_ptr[S+1]``, ``call_rule[E]``, ``call_return[E]`` (the state after the
  call, in the caller's rule);
* ``rule_start[R]``, ``is_end[S]`` (the rule may return here), ``state_rule[S]``;
* ``has_bytes[S]`` (some byte leaves the state), ``simple[S]`` (no calls and not an end: a byte
  walk through such states needs no stack work), ``push_rank[S]`` (a topological order of the
  "call from s enters the start of r" graph, which is acyclic once left recursion is gone).

Rule 0 is the root; only the root may accept the empty string.

:func:`automaton_of` normalises a grammar and builds its automaton.  Inlining every rule that is
called once makes regular parts of a grammar one DFA, which is what masks want, but the DFA of a
large inlined body may be exponentially larger than its NFA: a Lark grammar of Go whose statements
are inlined into its start rule may cut identifiers anywhere (``%ignore`` between terminals is
optional), and the subset construction of that rule ran past a million states for a minimal DFA
of 62,000.  So the subset construction of a rule with inlined parts is bounded by a small
multiple of its NFA (:data:`pda.fsm.BLOWUP_PER_NFA_STATE`) and by what ``max_states`` leaves; past
it, the heaviest rule written out in its body (:attr:`pda.normalize.NormalGrammar.inlined`) is
kept as a call there, and the grammar is normalised and built again (rule DFAs whose body did not
change are reused), until every rule fits or a rule with nothing inlined passes ``max_states``.
Grammars with no such rule (every JSON Schema and bundled grammar measured) build once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fsm import BuiltRules, SubsetBlowup, build_rule_dfas
from .ir import GrammarIR
from .limits import check_deadline
from .normalize import ROOT, NormalGrammar, normalize
from .rule_kernels import place_rule

__all__ = ["Automaton", "automaton_of", "call_edges", "build_automaton", "DEFAULT_MAX_STATES"]

DEFAULT_MAX_STATES = 250_000


@dataclass(eq=False)
class Automaton:
    rule_names: list[str]
    byte_class: np.ndarray
    trans: np.ndarray
    call_ptr: np.ndarray
    call_rule: np.ndarray
    call_return: np.ndarray
    rule_start: np.ndarray
    is_end: np.ndarray
    state_rule: np.ndarray
    has_bytes: np.ndarray
    simple: np.ndarray
    push_rank: np.ndarray

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def num_classes(self) -> int:
        return int(self.trans.shape[1])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays())

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (
            self.byte_class, self.trans, self.call_ptr, self.call_rule, self.call_return, self.rule_start,
            self.is_end, self.state_rule, self.has_bytes, self.simple, self.push_rank,
        )

    def calls(self, state: int) -> tuple[tuple[int, int], ...]:
        """((rule, return_state), ...) of the call edges leaving ``state``."""
        return call_edges(self.call_ptr, self.call_rule, self.call_return, state)

    def allowed_bytes(self, state: int) -> list[int]:
        row = self.trans[state]
        return [b for b in range(256) if row[self.byte_class[b]] >= 0]


def call_edges(call_ptr: np.ndarray, call_rule: np.ndarray, call_return: np.ndarray, state: int) -> tuple[tuple[int, int], ...]:
    """((rule, return_state), ...) of the call edges leaving ``state`` (:meth:`Automaton.calls`): a
    tuple of int pairs, which the garbage collector stops tracking after its first pass (the byte
    walker keeps one per state read for as long as its grammar lives; a list stays tracked)."""
    a, b = call_ptr[state], call_ptr[state + 1]
    return tuple(zip(call_rule[a:b].tolist(), call_return[a:b].tolist()))


def automaton_of(ir: GrammarIR, *, max_states: int = DEFAULT_MAX_STATES) -> tuple[NormalGrammar, Automaton]:
    """The normal form of ``ir`` and its automaton, with the heaviest inlined part of each rule whose
    DFA blows up kept as a call there, round after round (see the module docstring)."""
    keep: frozenset[tuple[str, str]] = frozenset()
    known = BuiltRules()
    while True:
        g = normalize(ir, keep_calls=keep)
        try:
            return g, build_automaton(g, max_states=max_states, watch_blowups=True, known=known)
        except SubsetBlowup as e:
            names = list(g.rules)
            keep |= {g.inlined[names[p]][0] for p in e.positions}
            check_deadline()


def build_automaton(g: NormalGrammar, *, max_states: int = DEFAULT_MAX_STATES, watch_blowups: bool = False,
                    known: BuiltRules | None = None) -> Automaton:
    """The automaton of ``g``.  With ``watch_blowups``, the subset construction of a rule with inlined
    parts raises :class:`pda.fsm.SubsetBlowup` past its bound; ``known`` keeps and reuses rule DFAs
    across calls (both for :func:`automaton_of`)."""
    names = list(g.rules)
    assert names[0] == ROOT
    index = {n: i for i, n in enumerate(names)}
    watch = frozenset(i for i, n in enumerate(names) if g.inlined.get(n)) if watch_blowups else frozenset()
    dfas = build_rule_dfas([g.rules[n] for n in names], index, max_states=max_states, watch=watch, known=known)

    cuts = sorted({b for d in dfas for b in d.bounds})
    ncls = len(cuts) - 1
    byte_class = np.zeros(256, dtype=np.uint8)
    for k in range(ncls):
        byte_class[cuts[k]:cuts[k + 1]] = k
    offsets = np.cumsum([0] + [len(d.trans) for d in dfas])
    S = int(offsets[-1])
    trans = np.empty((S, ncls), dtype=np.int32)  # every row is one rule's (place_rule)
    is_end = np.zeros(S, dtype=np.bool_)
    state_rule = np.zeros(S, dtype=np.int32)
    call_rows = []
    starts = np.asarray(cuts[:-1])
    for r, d in enumerate(dfas):
        base = int(offsets[r])
        # global class k starts at byte cuts[k]; find the rule's class holding that byte
        local = np.searchsorted(np.asarray(d.bounds), starts, side="right") - 1
        place_rule(trans, base, d.trans, local)
        is_end[base:base + len(d.trans)] = d.accept
        state_rule[base:base + len(d.trans)] = r
        call_rows.append(d.call_rows + np.array([base, 0, base], dtype=np.int64))
    calls = np.concatenate(call_rows)  # each rule's rows are sorted by (state, callee): so are these
    call_ptr = np.zeros(S + 1, dtype=np.int32)
    np.cumsum(np.bincount(calls[:, 0], minlength=S), out=call_ptr[1:])
    call_rule = calls[:, 1].astype(np.int32)
    call_return = calls[:, 2].astype(np.int32)
    rule_start = offsets[:-1].astype(np.int32)
    has_bytes = (trans >= 0).any(axis=1)
    has_calls = call_ptr[1:] > call_ptr[:-1]
    simple = ~has_calls & ~is_end
    push_rank = _push_ranks(S, call_ptr, call_rule, rule_start)
    return Automaton(
        names, byte_class, trans, call_ptr, call_rule, call_return, rule_start, is_end, state_rule,
        has_bytes, simple, push_rank,
    )


def _push_ranks(S: int, call_ptr: np.ndarray, call_rule: np.ndarray, rule_start: np.ndarray) -> np.ndarray:
    """Longest-path depth in the graph s -> rule_start[r] over call edges (acyclic after normalisation).

    Only rule starts have edges entering them, so a path of two or more edges runs through rule
    starts: the depths are those of the (small) graph of rules whose start state calls a rule,
    found by Kahn's algorithm over rules; any other called rule's start is at depth 1.
    """
    rank = np.zeros(S, dtype=np.int32)
    if not len(call_rule):
        return rank
    R = len(rule_start)
    src = np.repeat(np.arange(S), np.diff(call_ptr))
    is_start = np.full(S, -1, dtype=np.int64)
    is_start[rule_start] = np.arange(R)
    from_rule = is_start[src]  # the rule whose start makes the call, or -1
    out: dict[int, set[int]] = {}
    for a, b in zip(from_rule[from_rule >= 0].tolist(), call_rule[from_rule >= 0].tolist()):
        out.setdefault(a, set()).add(b)
    indeg = [0] * R
    for targets in out.values():
        for b in targets:
            indeg[b] += 1
    depth = [0] * R
    depth_of_called = np.zeros(R, dtype=np.int64)
    depth_of_called[call_rule] = 1
    queue = [r for r in range(R) if indeg[r] == 0]
    seen = 0
    while queue:
        r = queue.pop()
        seen += 1
        d = max(depth[r], int(depth_of_called[r]))
        depth[r] = d
        for b in out.get(r, ()):
            depth[b] = max(depth[b], d + 1)
            indeg[b] -= 1
            if indeg[b] == 0:
                queue.append(b)
    if seen != R:
        raise RuntimeError("internal error: left recursion survived normalisation")
    rank[rule_start] = np.maximum(np.asarray(depth, dtype=np.int32), depth_of_called.astype(np.int32))
    return rank
