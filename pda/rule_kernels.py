"""One rule's minimal DFA from its NFA arrays in two kernel calls (:func:`pda.fsm.build_rule_dfas`).

A grammar has tens to hundreds of rules, most of them small, and the array bookkeeping around the
two algorithms of :mod:`pda.dfa_kernels` cost more than the algorithms on such rules when it was
numpy calls: about 1 ms a rule, a quarter of the compile of a typical schema.  Here it is plain
loops over the same arrays, inside the kernels:

* :func:`nfa_to_dfa`: the byte classes of the NFA's edges (the cuts of their ranges), the edges,
  epsilon edges and calls sorted by state (stable counting sorts), the symbols
  (:func:`~pda.dfa_kernels.class_symbols`), then the subset construction
  (:func:`~pda.dfa_kernels.determinize_nfa`).
* :func:`minimal_dfa`: the transitions as the minimiser takes them (call edges are labels after
  the symbols, one per callee), :func:`~pda.dfa_kernels.minimize_partial`, then the minimal DFA:
  blocks numbered by their smallest state (the start state's block first), spelled over the byte
  classes, dead states dropped, call rows sorted by (state, callee).

:func:`place_rule` then writes each rule's minimal DFA into the grammar's transition table
(:func:`pda.automaton.build_automaton`), over the grammar's byte classes, in one pass.

``tests/core/test_fsm.py`` compares both with the numpy code they replaced.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .dfa_kernels import DETERMINIZE_OK, class_symbols, determinize_nfa, minimize_partial, transition_lists

__all__ = ["nfa_to_dfa", "minimal_dfa", "place_rule"]


@njit(cache=True, nogil=True)
def _by_state(n, src):  # type: ignore[no-untyped-def]
    """A stable counting sort of rows by their state ``src``: ``(ptr[n+1], order)``."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    for v in src:
        ptr[v + 1] += 1
    for q in range(n):
        ptr[q + 1] += ptr[q]
    pos = ptr[:n].copy()
    order = np.empty(src.shape[0], dtype=np.int64)
    for i in range(src.shape[0]):
        order[pos[src[i]]] = i
        pos[src[i]] += 1
    return ptr, order


@njit(cache=True, nogil=True)
def _sorted_call_rows(src, rule, dst, k):  # type: ignore[no-untyped-def]
    """Rows (src, rule, dst) of the first ``k`` entries, sorted by (src, rule); (0, 3) if none."""
    out = np.empty((k, 3), dtype=np.int64)
    if k == 0:
        return out
    key = np.empty(k, dtype=np.int64)
    top = 0
    for i in range(k):
        top = max(top, rule[i])
    for i in range(k):
        key[i] = src[i] * (top + 1) + rule[i]
    order = np.argsort(key, kind="mergesort")
    for i in range(k):
        j = order[i]
        out[i, 0] = src[j]
        out[i, 1] = rule[j]
        out[i, 2] = dst[j]
    return out


@njit(cache=True, nogil=True)
def nfa_to_dfa(n, eps, edges, calls, max_states, merge_classes):  # type: ignore[no-untyped-def]
    """The subset construction of an NFA of ``n`` states from state 0 (start) to 1 (end).

    ``eps`` rows (from, to), ``edges`` rows (from, lo, hi, to) over bytes, ``calls`` rows (from,
    rule, to).  Returns ``(status, bounds, symbol, trans, accept, call_rows)``: class ``k`` holds
    bytes ``bounds[k]..bounds[k+1]-1``, ``trans[d, symbol[k]]`` is the next state on class ``k``
    (symbols: classes merged where the NFA moves alike, unless ``merge_classes`` is false),
    ``call_rows`` (state, rule, return state) sorted by state and rule.
    """
    cut = np.zeros(257, dtype=np.bool_)
    cut[0] = True
    cut[256] = True
    m = edges.shape[0]
    for j in range(m):
        cut[edges[j, 1]] = True
        cut[edges[j, 2] + 1] = True
    at = np.full(257, -1, dtype=np.int64)  # cut value -> its index in bounds
    nb = 0
    for b in range(257):
        if cut[b]:
            at[b] = nb
            nb += 1
    bounds = np.empty(nb, dtype=np.int64)
    for b in range(257):
        if cut[b]:
            bounds[at[b]] = b
    nclasses = nb - 1
    # byte edges by state, their ranges as class ranges
    e_ptr, order = _by_state(n, edges[:, 0].copy())
    e_clo = np.empty(m, dtype=np.int64)
    e_chi = np.empty(m, dtype=np.int64)
    e_to = np.empty(m, dtype=np.int64)
    for i in range(m):
        j = order[i]
        e_clo[i] = at[edges[j, 1]]
        e_chi[i] = at[edges[j, 2] + 1] - 1
        e_to[i] = edges[j, 3]
    if merge_classes:
        # Merge the classes on which the NFA moves alike (every pair of states joined on both or
        # on neither; a string's "any byte but quote and backslash" splits the bytes into classes
        # that are alike elsewhere).  Symbols are numbered by their first class, so edge ``j``
        # stands for the symbols whose first class lies in ``clo[j]..chi[j]`` (a run, maybe empty)
        # and the edges joining two states still hold exactly their symbols.
        symbol, first = class_symbols(n, nclasses, e_ptr, e_clo, e_chi, e_to)
        below = np.zeros(nclasses + 1, dtype=np.int64)  # below[c]: symbols whose first class is < c
        for g in range(first.shape[0]):
            below[first[g] + 1] += 1
        for c in range(nclasses):
            below[c + 1] += below[c]
        for i in range(m):
            lo = e_clo[i]
            hi = e_chi[i]
            e_clo[i] = below[lo]
            e_chi[i] = below[hi + 1] - 1
        nsym = first.shape[0]
    else:
        symbol = np.arange(nclasses)
        nsym = nclasses
    eps_ptr, eps_order = _by_state(n, eps[:, 0].copy())
    eps_to = np.empty(eps.shape[0], dtype=np.int64)
    for i in range(eps.shape[0]):
        eps_to[i] = eps[eps_order[i], 1]
    c_ptr, c_order = _by_state(n, calls[:, 0].copy())
    c_rule = np.empty(calls.shape[0], dtype=np.int64)
    c_to = np.empty(calls.shape[0], dtype=np.int64)
    for i in range(calls.shape[0]):
        c_rule[i] = calls[c_order[i], 1]
        c_to[i] = calls[c_order[i], 2]
    status, trans, accept, csrc, crule, cdst = determinize_nfa(
        n, eps_ptr, eps_to, e_ptr, e_clo, e_chi, e_to, c_ptr, c_rule, c_to, 0, 1, nsym, max_states)
    rows = _sorted_call_rows(csrc, crule, cdst, csrc.shape[0] if status == DETERMINIZE_OK else 0)
    return status, bounds, symbol, trans, accept, rows


@njit(cache=True, nogil=True)
def minimal_dfa(trans, symbol, rows, accept):  # type: ignore[no-untyped-def]
    """The minimal DFA of the DFA ``trans[s, symbol[k]]`` with call ``rows`` (state, rule, return
    state) and ``accept``, over byte classes: ``(out, call_rows, accept)``, or ``out`` of 0 rows
    when the language is empty.  States are numbered by the smallest state of their block."""
    n = trans.shape[0]
    k = rows.shape[0]
    # one label per callee after the symbols, in callee order
    callees = np.unique(rows[:, 1])
    label = np.empty(k, dtype=np.int64)
    for i in range(k):
        label[i] = np.searchsorted(callees, rows[i, 1])
    T, L, H = transition_lists(trans, rows[:, 0].copy(), label, rows[:, 2].copy())
    block, nblocks = minimize_partial(n, T, L, H, accept)
    ncls = symbol.shape[0]
    if block[0] < 0:
        return np.empty((0, ncls), dtype=np.int32), np.empty((0, 3), dtype=np.int64), np.zeros(0, dtype=np.bool_)
    # blocks in order of their smallest state (states ascending: first seen is smallest)
    renum = np.full(nblocks, -1, dtype=np.int64)
    rep = np.empty(nblocks, dtype=np.int64)
    nb = 0
    for q in range(n):
        b = block[q]
        if b >= 0 and renum[b] < 0:
            renum[b] = nb
            rep[nb] = q
            nb += 1
    new_of = np.full(n, -1, dtype=np.int64)
    for q in range(n):
        if block[q] >= 0:
            new_of[q] = renum[block[q]]
    out = np.empty((nb, ncls), dtype=np.int32)
    acc = np.empty(nb, dtype=np.bool_)
    for i in range(nb):
        r = rep[i]
        acc[i] = accept[r]
        for c in range(ncls):
            t = trans[r, symbol[c]]
            out[i, c] = new_of[t] if t >= 0 else -1
    src = np.empty(k, dtype=np.int64)
    rule = np.empty(k, dtype=np.int64)
    dst = np.empty(k, dtype=np.int64)
    kept = 0
    for i in range(k):
        a = rows[i, 0]
        na = new_of[a]
        if na >= 0 and rep[na] == a and new_of[rows[i, 2]] >= 0:  # from a block's first state, to a live one
            src[kept] = na
            rule[kept] = rows[i, 1]
            dst[kept] = new_of[rows[i, 2]]
            kept += 1
    return out, _sorted_call_rows(src, rule, dst, kept), acc


@njit(cache=True, nogil=True)
def place_rule(trans, base, rule_trans, local):  # type: ignore[no-untyped-def]
    """Write one rule's DFA into the grammar's table: ``trans[base + s, c] = rule_trans[s, local[c]]
    + base`` (-1 stays -1), where ``local[c]`` is the rule's class holding the grammar's class
    ``c``.  One pass over the rows, no temporaries (numpy's gather, add and where took 0.4 s on a
    186,502-state rule, and 2.8 ms a compile on 400 JSON Schemas)."""
    for s in range(rule_trans.shape[0]):
        row = trans[base + s]
        src = rule_trans[s]
        for c in range(local.shape[0]):
            t = src[local[c]]
            row[c] = t + base if t >= 0 else -1
