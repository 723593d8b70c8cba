"""Thompson construction of a rule's byte NFA as one numba kernel over a flattened IR.

:func:`flatten` turns a rule body into flat arrays: each *distinct* node of the expression DAG once,
equal subtrees being one node (frontends share subtrees a lot, and the tree read with its copies
can be 100x larger), children in CSR form, and every leaf as a fragment (:mod:`pda.utf8`; a
reference: one call edge).

:func:`thompson` then writes the NFA the way :meth:`pda.fsm.ThompsonNFA.build` does, copy for
copy and with the same shared suffixes (:meth:`~pda.fsm.ThompsonNFA.entry`: one fragment per
(node, end state), held in a hash table here), with an explicit stack of (node, from, to) tasks
instead of recursion; only the state numbering differs (which no DFA built from it can see).
:meth:`ThompsonNFA.build` stays the pure-Python reference; ``tests/core/test_fsm.py`` compares the
two.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
from numba import njit

from .ir import Alt, ByteClass, Bytes, CharClass, Expr, Ref, Repeat, Seq
from .utf8 import Fragment, leaf_fragment

__all__ = ["FlatExpr", "flatten", "thompson", "THOMPSON_OK", "THOMPSON_TOO_MANY_STATES"]

THOMPSON_OK = 0
THOMPSON_TOO_MANY_STATES = 1

# node kinds
_SEQ, _ALT, _REPEAT, _LEAF, _EMPTY, _LITERAL = 0, 1, 2, 3, 4, 5


class FlatExpr(NamedTuple):
    """Rule bodies as arrays (:func:`flatten` says which node is the root of each).

    ``kind[i]`` (seq, alt, repeat, leaf, empty, literal); children ``child[child_ptr[i]:child_ptr[i+1]]``
    (a literal of two or more bytes: its bytes there instead, built byte by byte with shared
    suffixes); a repeat's ``rmin[i]``, ``rmax[i]`` (-1: unbounded); a leaf's fragment ``frag[i]``, whose
    internal states number ``frag_states[f]``, whose byte edges are rows ``frag_edge_ptr[f]..``
    of ``frag_edges`` (from, lo, hi, to; local numbers) and whose calls are rows
    ``frag_call_ptr[f]..`` of ``frag_calls`` (from, rule, to).
    """

    kind: np.ndarray
    child_ptr: np.ndarray
    child: np.ndarray
    rmin: np.ndarray
    rmax: np.ndarray
    frag: np.ndarray
    frag_states: np.ndarray
    frag_edge_ptr: np.ndarray
    frag_edges: np.ndarray
    frag_call_ptr: np.ndarray
    frag_calls: np.ndarray


def flatten(exprs: Sequence[Expr], rule_index: dict[str, int]) -> tuple[FlatExpr, list[int]]:
    """The distinct (unequal) nodes of all of ``exprs`` as arrays (see :class:`FlatExpr`), and the
    node of each expression.  A grammar's rules are flattened together: they share subtrees (a
    definition used in many members), which are then flattened once, not once per rule."""
    index: dict[Expr, int] = {}
    nodes: list[Expr] = []
    # number the distinct nodes (by value) in pre-order
    for expr in exprs:
        stack = [expr]
        while stack:
            e = stack.pop()
            if e in index:
                continue
            index[e] = len(nodes)
            nodes.append(e)
            if isinstance(e, (Seq, Alt)):
                stack.extend(reversed(e.items))
            elif isinstance(e, Repeat):
                stack.append(e.expr)
    n = len(nodes)
    # Python lists, made arrays at the end: item assignment into numpy arrays costs more per node
    kind = [_LEAF] * n
    rmin = [0] * n
    rmax = [0] * n
    frag = [-1] * n
    counts = [0] * (n + 1)
    child: list[int] = []
    frags: dict[Fragment, int] = {}
    for i, e in enumerate(nodes):
        c = e.__class__
        if c is Seq or c is Alt:
            items = e.items  # type: ignore[attr-defined]
            kind[i] = _SEQ if c is Seq else _ALT
            child.extend([index[k] for k in items])
            counts[i + 1] = len(items)
        elif c is Repeat:
            kind[i] = _REPEAT
            child.append(index[e.expr])  # type: ignore[attr-defined]
            counts[i + 1] = 1
            rmin[i] = e.min  # type: ignore[attr-defined]
            rmax[i] = -1 if e.max is None else e.max  # type: ignore[attr-defined]
        elif c is Ref:
            f: Fragment = (0, (), ((0, rule_index[e.name], 1),))  # type: ignore[attr-defined]
            frag[i] = frags.setdefault(f, len(frags))
        elif c is Bytes and not e.data:  # type: ignore[attr-defined]
            kind[i] = _EMPTY
        elif c is Bytes and len(e.data) > 1:  # type: ignore[attr-defined]
            kind[i] = _LITERAL
            child.extend(e.data)  # type: ignore[attr-defined]
            counts[i + 1] = len(e.data)  # type: ignore[attr-defined]
        elif c is Bytes or c is CharClass or c is ByteClass:
            frag[i] = frags.setdefault(leaf_fragment(e), len(frags))  # type: ignore[arg-type]
        else:
            raise TypeError(f"not an IR node: {e!r}")
    fl = list(frags)
    frag_states = np.array([f[0] for f in fl], dtype=np.int64)
    frag_edge_ptr = np.zeros(len(fl) + 1, dtype=np.int64)
    frag_edge_ptr[1:] = np.cumsum([len(f[1]) for f in fl])
    frag_call_ptr = np.zeros(len(fl) + 1, dtype=np.int64)
    frag_call_ptr[1:] = np.cumsum([len(f[2]) for f in fl])
    frag_edges = np.array([r for f in fl for r in f[1]], dtype=np.int64).reshape(-1, 4)
    frag_calls = np.array([r for f in fl for r in f[2]], dtype=np.int64).reshape(-1, 3)
    i64 = np.int64
    flat = FlatExpr(np.array(kind, dtype=i64), np.cumsum(np.array(counts, dtype=i64)), np.array(child, dtype=i64),
                    np.array(rmin, dtype=i64), np.array(rmax, dtype=i64), np.array(frag, dtype=i64), frag_states,
                    frag_edge_ptr, frag_edges, frag_call_ptr, frag_calls)
    return flat, [index[e] for e in exprs]


@njit(cache=True, nogil=True)
def _room(a, need):  # type: ignore[no-untyped-def]
    """``a`` with room for at least ``need`` rows (doubling)."""
    if need <= a.shape[0]:
        return a
    b = np.empty((max(need, 2 * a.shape[0]),) + a.shape[1:], dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@njit(cache=True, nogil=True)
def _push(rows, k, a, b, c):  # type: ignore[no-untyped-def]
    """Write row ``k`` = (a, b, c) of a (room-checked) 3-column array; returns ``k + 1``."""
    rows[k, 0] = a
    rows[k, 1] = b
    rows[k, 2] = c
    return k + 1


@njit(cache=True, nogil=True)
def _eps(eps, k, a, b):  # type: ignore[no-untyped-def]
    """Write epsilon edge ``k`` = (a, b) (room-checked); returns ``k + 1``."""
    eps[k, 0] = a
    eps[k, 1] = b
    return k + 1


@njit(cache=True, nogil=True)
def _entry_slot(keys, key):  # type: ignore[no-untyped-def]
    """The slot of ``key`` in the open-addressing table ``keys`` (-1: empty): where it is, or the
    empty slot where it would go."""
    mask = keys.shape[0] - 1
    h = np.uint64(key)  # splitmix64's finaliser
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    i = np.int64((h ^ (h >> np.uint64(31))) & np.uint64(mask))
    while keys[i] != -1 and keys[i] != key:
        i = (i + 1) & mask
    return i


@njit(cache=True, nogil=True)
def _entry_grow(keys, vals):  # type: ignore[no-untyped-def]
    """The table rehashed into twice the slots."""
    k2 = np.full(2 * keys.shape[0], -1, dtype=np.int64)
    v2 = np.empty(2 * keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        if keys[i] != -1:
            j = _entry_slot(k2, keys[i])
            k2[j] = keys[i]
            v2[j] = vals[i]
    return k2, v2


@njit(cache=True, nogil=True)
def _entry(keys, vals, nkeys, key, n):  # type: ignore[no-untyped-def]
    """The entry state of ``key`` ((a node, or the node count plus a byte) << 32 | end state):
    ``(keys, vals, nkeys, state, made)``; a new one is state ``n`` (``made``: the caller counts it
    and builds it)."""
    if 2 * (nkeys + 1) > keys.shape[0]:
        keys, vals = _entry_grow(keys, vals)
    j = _entry_slot(keys, key)
    if keys[j] != -1:
        return keys, vals, nkeys, vals[j], False
    keys[j] = key
    vals[j] = n
    return keys, vals, nkeys + 1, n, True


@njit(cache=True, nogil=True)
def thompson(kind, child_ptr, child, rmin, rmax, frag, frag_states, frag_edge_ptr, frag_edges,  # type: ignore[no-untyped-def]
             frag_call_ptr, frag_calls, root, max_states):
    """The Thompson NFA of node ``root`` (see the module docstring) from state 0 (start) to 1 (end).

    Returns ``(status, n, eps, edges, calls)``: ``n`` states, ``eps`` rows (from, to), ``edges``
    rows (from, lo, hi, to), ``calls`` rows (from, rule, to).  ``status`` is
    :data:`THOMPSON_TOO_MANY_STATES` once ``n`` would pass ``max_states``.
    """
    eps = np.empty((64, 2), dtype=np.int64)
    edges = np.empty((64, 4), dtype=np.int64)
    calls = np.empty((16, 3), dtype=np.int64)
    ne = 0
    nb = 0
    nc = 0
    if max_states < 2:
        return THOMPSON_TOO_MANY_STATES, 0, eps[:0], edges[:0], calls[:0]
    n = 2
    # shared fragments: key node << 32 | end state -> entry state
    keys = np.full(64, -1, dtype=np.int64)
    vals = np.empty(64, dtype=np.int64)
    nkeys = 0
    tasks = np.empty((64, 3), dtype=np.int64)
    nt = _push(tasks, 0, root, 0, 1)
    while nt > 0:
        nt -= 1
        node = tasks[nt, 0]
        s = tasks[nt, 1]
        t = tasks[nt, 2]
        k = kind[node]
        if k == _LEAF:
            f = frag[node]
            base = n - 2
            n += frag_states[f]
            if n > max_states:
                return THOMPSON_TOO_MANY_STATES, n, eps[:0], edges[:0], calls[:0]
            lo = frag_edge_ptr[f]
            hi = frag_edge_ptr[f + 1]
            edges = _room(edges, nb + hi - lo)
            for j in range(lo, hi):
                a = frag_edges[j, 0]
                b = frag_edges[j, 3]
                edges[nb, 0] = s if a == 0 else (t if a == 1 else base + a)
                edges[nb, 1] = frag_edges[j, 1]
                edges[nb, 2] = frag_edges[j, 2]
                edges[nb, 3] = s if b == 0 else (t if b == 1 else base + b)
                nb += 1
            for j in range(frag_call_ptr[f], frag_call_ptr[f + 1]):
                calls = _room(calls, nc + 1)
                a = frag_calls[j, 0]
                b = frag_calls[j, 2]
                nc = _push(calls, nc, s if a == 0 else (t if a == 1 else base + a), frag_calls[j, 1],
                           s if b == 0 else (t if b == 1 else base + b))
            continue
        if k == _EMPTY:
            eps = _room(eps, ne + 1)
            ne = _eps(eps, ne, s, t)
            continue
        c0 = child_ptr[node]
        c1 = child_ptr[node + 1]
        if k == _LITERAL:
            # one edge per byte, last to first; the states before the later bytes are shared
            # (ThompsonNFA.byte_entry): key (node count + byte, next state)
            edges = _room(edges, nb + c1 - c0)
            nxt = t
            for i in range(c1 - 1, c0, -1):
                keys, vals, nkeys, u, made = _entry(keys, vals, nkeys, ((kind.shape[0] + child[i]) << 32) | nxt, n)
                if made:
                    n += 1
                    if n > max_states:
                        return THOMPSON_TOO_MANY_STATES, n, eps[:0], edges[:0], calls[:0]
                    edges[nb, 0] = u
                    edges[nb, 1] = child[i]
                    edges[nb, 2] = child[i]
                    edges[nb, 3] = nxt
                    nb += 1
                nxt = u
            edges[nb, 0] = s
            edges[nb, 1] = child[c0]
            edges[nb, 2] = child[c0]
            edges[nb, 3] = nxt
            nb += 1
            continue
        if k == _SEQ or k == _ALT:
            tasks = _room(tasks, nt + c1 - c0)
            eps = _room(eps, ne + c1 - c0)
            nxt = t
            # a sequence's items after the first, last to first, and a choice's non-leaf choices
            # start in shared entries (ThompsonNFA.entry); the rest start in s
            for i in range(c1 - 1, c0 - 1, -1):
                x = child[i]
                if k == _SEQ and i == c0:
                    nt = _push(tasks, nt, x, s, nxt)
                    break
                if k == _ALT and kind[x] != _SEQ and kind[x] != _ALT and kind[x] != _REPEAT:  # a leaf
                    nt = _push(tasks, nt, x, s, t)
                    continue
                end = nxt if k == _SEQ else t
                keys, vals, nkeys, u, made = _entry(keys, vals, nkeys, (x << 32) | end, n)
                if made:
                    n += 1
                    if n > max_states:
                        return THOMPSON_TOO_MANY_STATES, n, eps[:0], edges[:0], calls[:0]
                    nt = _push(tasks, nt, x, u, end)
                if k == _SEQ:
                    nxt = u
                else:
                    ne = _eps(eps, ne, s, u)
        else:  # repeat
            x = child[c0]
            lo = rmin[node]
            hi = rmax[node]
            copies = lo + (1 if hi < 0 else hi - lo)
            extra = lo + (2 if hi < 0 else hi - lo)
            if n + extra > max_states:
                return THOMPSON_TOO_MANY_STATES, n + extra, eps[:0], edges[:0], calls[:0]
            tasks = _room(tasks, nt + copies)
            cur = s
            for _ in range(lo):
                nt = _push(tasks, nt, x, cur, n)
                cur = n
                n += 1
            if hi < 0:
                loop = n
                n += 2
                eps = _room(eps, ne + 3)
                ne = _eps(eps, ne, cur, loop)
                ne = _eps(eps, ne, loop + 1, loop)
                ne = _eps(eps, ne, loop, t)
                nt = _push(tasks, nt, x, loop, loop + 1)
            else:
                eps = _room(eps, ne + hi - lo + 1)
                for _ in range(hi - lo):
                    ne = _eps(eps, ne, cur, t)
                    nt = _push(tasks, nt, x, cur, n)
                    cur = n
                    n += 1
                ne = _eps(eps, ne, cur, t)
    return THOMPSON_OK, n, eps[:ne], edges[:nb], calls[:nc]
