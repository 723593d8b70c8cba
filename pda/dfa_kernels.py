"""numba kernels for building rule automata: subset construction, minimisation of a partial DFA.

:func:`minimize_partial` is the partition-refinement algorithm of Valmari and Lehtinen
("Fast brief practical DFA minimization", 2012): two refinable partitions, one of states (blocks)
and one of transitions (cords, first grouped by label). A partial DFA needs no sink state, and the
work is O(n + m log m) for n states and m transitions.  States that cannot reach an accepting state
are dropped first (their block is -1).  It is pda's one minimiser: the byte automata of
:mod:`pda.fsm` and the code-point automata of :mod:`pda.codepoint_fsm` (labels: elementary
code-point intervals) both use it.  Its cords start as a counting sort by label (labels are small).

:func:`determinize_nfa` is the subset construction of a rule's NFA; :func:`class_symbols` merges
the byte classes on which that NFA moves alike, so that both kernels run over fewer labels
(:func:`pda.fsm.build_rule_dfa`; the DFAs are the same, numbering included).

Each kernel's ``py_func`` is plain Python over the same arrays, so the package works under
``NUMBA_DISABLE_JIT=1``; ``tests/core/test_fsm.py`` checks the minimiser against a brute-force
equivalence and the merged symbols against the subset construction over plain byte classes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["minimize_partial", "determinize_nfa", "DETERMINIZE_OK", "DETERMINIZE_TOO_MANY_STATES", "class_symbols",
           "transition_lists"]


@njit(cache=True, nogil=True)
def _mark(e, E, loc, S, F, M, W, w):  # type: ignore[no-untyped-def]
    """Move element ``e`` into the marked front of its set; queue the set when first touched."""
    s = S[e]
    i = loc[e]
    j = F[s] + M[s]
    E[i] = E[j]
    loc[E[i]] = i
    E[j] = e
    loc[e] = j
    if M[s] == 0:
        W[w] = s
        w += 1
    M[s] += 1
    return w


@njit(cache=True, nogil=True)
def _split(E, S, F, P, M, W, w, z):  # type: ignore[no-untyped-def]
    """Split every touched set into marked and unmarked parts; the smaller part becomes a new set."""
    while w > 0:
        w -= 1
        s = W[w]
        j = F[s] + M[s]
        if j == P[s]:
            M[s] = 0
            continue
        if M[s] <= P[s] - j:
            F[z] = F[s]
            P[z] = j
            F[s] = j
        else:
            P[z] = P[s]
            F[z] = j
            P[s] = j
        for i in range(F[z], P[z]):
            S[E[i]] = z
        M[s] = 0
        M[z] = 0
        z += 1
    return z


@njit(cache=True, nogil=True)
def _by_head(H, m, n):  # type: ignore[no-untyped-def]
    """CSR of the first ``m`` transitions grouped by head state: ``adj[ptr[q]:ptr[q+1]]`` enter ``q``."""
    ptr = np.zeros(n + 1, dtype=np.int32)
    for k in range(m):
        ptr[H[k] + 1] += 1
    for q in range(n):
        ptr[q + 1] += ptr[q]
    fill = ptr[:-1].copy()
    adj = np.empty(m, dtype=np.int32)
    for k in range(m):
        adj[fill[H[k]]] = k
        fill[H[k]] += 1
    return ptr, adj


@njit(cache=True, nogil=True)
def _by_label(labels, m):  # type: ignore[no-untyped-def]
    """The first ``m`` transitions ordered by label, stably (a counting sort: labels are small)."""
    top = 0
    for k in range(m):
        top = max(top, labels[k] + 1)
    ptr = np.zeros(top + 1, dtype=np.int32)
    for k in range(m):
        ptr[labels[k] + 1] += 1
    for a in range(top):
        ptr[a + 1] += ptr[a]
    order = np.empty(m, dtype=np.int32)
    for k in range(m):
        order[ptr[labels[k]]] = k
        ptr[labels[k]] += 1
    return order


@njit(cache=True, nogil=True)
def transition_lists(trans, call_src, call_label, call_dst):  # type: ignore[no-untyped-def]
    """The transitions of a DFA table as :func:`minimize_partial` takes them (int32 ``T``, ``L``,
    ``H``): ``s --c--> trans[s, c]`` for every entry that is not -1, row by row, then the call
    edges ``call_src[j] --nsym + call_label[j]--> call_dst[j]`` (``nsym``: the table's columns)."""
    n, nsym = trans.shape
    m = 0
    for s in range(n):
        for c in range(nsym):
            if trans[s, c] >= 0:
                m += 1
    k = call_src.shape[0]
    T = np.empty(m + k, dtype=np.int32)
    L = np.empty(m + k, dtype=np.int32)
    H = np.empty(m + k, dtype=np.int32)
    i = 0
    for s in range(n):
        for c in range(nsym):
            t = trans[s, c]
            if t >= 0:
                T[i] = s
                L[i] = c
                H[i] = t
                i += 1
    for j in range(k):
        T[i] = call_src[j]
        L[i] = nsym + call_label[j]
        H[i] = call_dst[j]
        i += 1
    return T, L, H


@njit(cache=True, nogil=True)
def minimize_partial(n, T, L, H, accept):  # type: ignore[no-untyped-def]
    """Blocks of language-equivalent states of a partial DFA.

    ``T[k] --L[k]--> H[k]`` are the transitions (int32; labels are small non-negative ints),
    ``accept[s]`` the accepting states.  Its arrays are int32 (a third faster than int64: the
    refinement is bound by memory traffic; a rule has at most ``max_states`` states anyway).
    Returns ``(block, nblocks)``: ``block[s]`` is -1 for a state from which no accepting state can
    be reached.
    """
    m = T.shape[0]
    # co-reachability: walk transitions backwards from the accepting states
    inptr, inadj = _by_head(H, m, n)
    seeds = np.flatnonzero(accept)
    stamp = np.zeros(n, dtype=np.int32)
    _closure(seeds, seeds.shape[0], inptr, T[inadj], stamp, 1, np.empty(n, dtype=np.int32),
             np.empty(n, dtype=np.int32))
    live = stamp == 1

    # compact numbering of live states and of the transitions between them
    ids = np.full(n, -1, dtype=np.int32)
    nl = 0
    for q in range(n):
        if live[q]:
            ids[q] = nl
            nl += 1
    block = np.full(n, -1, dtype=np.int32)
    if nl == 0:
        return block, 0
    tt = np.empty(m, dtype=np.int32)
    tl = np.empty(m, dtype=np.int32)
    th = np.empty(m, dtype=np.int32)
    mm = 0
    for k in range(m):
        if live[T[k]] and live[H[k]]:
            tt[mm] = ids[T[k]]
            tl[mm] = L[k]
            th[mm] = ids[H[k]]
            mm += 1

    W = np.empty(max(nl, mm) + 1, dtype=np.int32)
    M = np.zeros(max(nl, mm) + 1, dtype=np.int32)
    w = 0
    # blocks: one set of all live states, split into accepting / not
    BE = np.arange(nl, dtype=np.int32)
    Bloc = np.arange(nl, dtype=np.int32)
    BS = np.zeros(nl, dtype=np.int32)
    BF = np.zeros(nl + 1, dtype=np.int32)
    BP = np.zeros(nl + 1, dtype=np.int32)
    BP[0] = nl
    bz = 1
    for q in range(n):
        if live[q] and accept[q]:
            w = _mark(ids[q], BE, Bloc, BS, BF, M, W, w)
    bz = _split(BE, BS, BF, BP, M, W, w, bz)
    w = 0

    # cords: transitions grouped by label
    cz = 0
    CE = _by_label(tl, mm)
    Cloc = np.empty(mm, dtype=np.int32)
    CS = np.empty(mm, dtype=np.int32)
    CF = np.zeros(mm + 1, dtype=np.int32)
    CP = np.zeros(mm + 1, dtype=np.int32)
    if mm > 0:
        label = tl[CE[0]]
        for i in range(mm):
            k = CE[i]
            if tl[k] != label:
                label = tl[k]
                CP[cz] = i
                cz += 1
                CF[cz] = i
            CS[k] = cz
            Cloc[k] = i
        CP[cz] = mm
        cz += 1

    # transitions by head, for marking the cords that enter a block
    hptr, hadj = _by_head(th, mm, nl)

    b = 1
    c = 0
    while c < cz:
        for i in range(CF[c], CP[c]):
            w = _mark(tt[CE[i]], BE, Bloc, BS, BF, M, W, w)
        bz = _split(BE, BS, BF, BP, M, W, w, bz)
        w = 0
        c += 1
        while b < bz:
            for i in range(BF[b], BP[b]):
                q = BE[i]
                for j in range(hptr[q], hptr[q + 1]):
                    w = _mark(hadj[j], CE, Cloc, CS, CF, M, W, w)
            cz = _split(CE, CS, CF, CP, M, W, w, cz)
            w = 0
            b += 1

    for q in range(n):
        if live[q]:
            block[q] = BS[ids[q]]
    return block, bz


# ----------------------------------------------------------------------------- subset construction

DETERMINIZE_OK = 0
DETERMINIZE_TOO_MANY_STATES = 1


@njit(cache=True, nogil=True)
def _grow(a, need):  # type: ignore[no-untyped-def]
    """``a`` with room for at least ``need`` items along axis 0 (doubling)."""
    if need <= a.shape[0]:
        return a
    size = max(need, 2 * a.shape[0])
    b = np.empty((size,) + a.shape[1:], dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@njit(cache=True, nogil=True)
def _closure(seeds, k, eps_ptr, eps_to, stamp, mark, stack, out):  # type: ignore[no-untyped-def]
    """Sorted epsilon closure of ``seeds[:k]`` into ``out``; returns its length."""
    top = 0
    size = 0
    for i in range(k):
        q = seeds[i]
        if stamp[q] != mark:
            stamp[q] = mark
            stack[top] = q
            top += 1
    while top > 0:
        top -= 1
        q = stack[top]
        out[size] = q
        size += 1
        for j in range(eps_ptr[q], eps_ptr[q + 1]):
            r = eps_to[j]
            if stamp[r] != mark:
                stamp[r] = mark
                stack[top] = r
                top += 1
    out[:size].sort()
    return size


@njit(cache=True, nogil=True)
def _set_hash(xs, k):  # type: ignore[no-untyped-def]
    h = np.uint64(1469598103934665603)
    for i in range(k):
        h = (h ^ np.uint64(xs[i])) * np.uint64(1099511628211)
        h ^= h >> np.uint64(29)
    return h


@njit(cache=True, nogil=True)
def determinize_nfa(n, eps_ptr, eps_to, e_ptr, e_clo, e_chi, e_to, c_ptr, c_rule, c_to,  # type: ignore[no-untyped-def]
                    start, end, nclasses, max_states):
    """Subset construction over class-range edges, epsilon edges and call edges of an NFA.

    The NFA's edges leaving ``q`` are ``e_ptr[q]..e_ptr[q+1]`` (classes ``e_clo..e_chi`` to
    ``e_to``), its epsilon edges ``eps_to[eps_ptr[q]:eps_ptr[q+1]]``, its calls ``c_rule``/``c_to``
    likewise.  Returns ``(status, trans, accept, call_src, call_rule, call_dst)``; DFA state 0 holds
    the closure of ``start``, ``accept[d]`` says whether ``end`` is in state ``d``.
    """
    stamp = np.zeros(n, dtype=np.int64)
    mark = 0
    stack = np.empty(n, dtype=np.int64)
    buf = np.empty(n, dtype=np.int64)
    # the sets of NFA states, one after another in `pool`
    pool = np.empty(1024, dtype=np.int64)
    set_ptr = np.zeros(1025, dtype=np.int64)
    set_hash = np.empty(1024, dtype=np.uint64)
    trans = np.full((1024, nclasses), -1, dtype=np.int32)
    cap = 1024
    table = np.full(cap, -1, dtype=np.int64)
    nd = 0
    csrc = np.empty(16, dtype=np.int64)
    crule = np.empty(16, dtype=np.int64)
    cdst = np.empty(16, dtype=np.int64)
    ncalls = 0
    count = np.zeros(nclasses + 1, dtype=np.int64)
    fill = np.zeros(nclasses + 1, dtype=np.int64)
    bucket = np.empty(64, dtype=np.int64)
    pairs = np.empty((64, 2), dtype=np.int64)
    seeds = np.empty(n, dtype=np.int64)

    seeds[0] = start
    mark += 1
    k = _closure(seeds, 1, eps_ptr, eps_to, stamp, mark, stack, buf)
    # insert the start set (the table is empty)
    pool = _grow(pool, k)
    pool[:k] = buf[:k]
    set_ptr[1] = k
    h = _set_hash(buf, k)
    set_hash[0] = h
    table[np.int64(h & np.uint64(cap - 1))] = 0
    nd = 1

    d = 0
    while d < nd:
        lo = set_ptr[d]
        hi = set_ptr[d + 1]
        # targets per class: count, then fill one flat bucket array
        count[:] = 0
        total = 0
        for i in range(lo, hi):
            q = pool[i]
            for j in range(e_ptr[q], e_ptr[q + 1]):
                for c in range(e_clo[j], e_chi[j] + 1):
                    count[c] += 1
                    total += 1
        bucket = _grow(bucket, total)
        acc = 0
        for c in range(nclasses):
            fill[c] = acc
            acc += count[c]
        fill[nclasses] = acc
        for i in range(lo, hi):
            q = pool[i]
            for j in range(e_ptr[q], e_ptr[q + 1]):
                t = e_to[j]
                for c in range(e_clo[j], e_chi[j] + 1):
                    bucket[fill[c]] = t
                    fill[c] += 1
        prev_c = -1
        for c in range(nclasses):
            cnt = count[c]
            if cnt == 0:
                continue
            b0 = fill[c] - cnt
            # a run of classes with the same targets (a wide range) shares one closure
            if prev_c >= 0 and count[prev_c] == cnt:
                p0 = fill[prev_c] - cnt
                same = True
                for i in range(cnt):
                    if bucket[p0 + i] != bucket[b0 + i]:
                        same = False
                        break
                if same:
                    trans[d, c] = trans[d, prev_c]
                    prev_c = c
                    continue
            seeds = _grow(seeds, cnt)
            for i in range(cnt):
                seeds[i] = bucket[b0 + i]
            mark += 1
            k = _closure(seeds, cnt, eps_ptr, eps_to, stamp, mark, stack, buf)
            target, nd, pool, set_ptr, set_hash, trans, table, cap = _intern(
                buf, k, nd, pool, set_ptr, set_hash, trans, table, cap)
            if target < 0 or nd > max_states:
                return DETERMINIZE_TOO_MANY_STATES, trans[:0], np.zeros(0, dtype=np.bool_), csrc[:0], crule[:0], cdst[:0]
            trans[d, c] = target
            prev_c = c
        # calls, grouped by callee
        npairs = 0
        for i in range(lo, hi):
            q = pool[i]
            for j in range(c_ptr[q], c_ptr[q + 1]):
                pairs = _grow(pairs, npairs + 1)
                pairs[npairs, 0] = c_rule[j]
                pairs[npairs, 1] = c_to[j]
                npairs += 1
        if npairs > 0:
            order = np.argsort(pairs[:npairs, 0], kind="mergesort")
            i = 0
            while i < npairs:
                r = pairs[order[i], 0]
                cnt = 0
                while i < npairs and pairs[order[i], 0] == r:
                    seeds = _grow(seeds, cnt + 1)
                    seeds[cnt] = pairs[order[i], 1]
                    cnt += 1
                    i += 1
                mark += 1
                k = _closure(seeds, cnt, eps_ptr, eps_to, stamp, mark, stack, buf)
                target, nd, pool, set_ptr, set_hash, trans, table, cap = _intern(
                    buf, k, nd, pool, set_ptr, set_hash, trans, table, cap)
                if nd > max_states:
                    return DETERMINIZE_TOO_MANY_STATES, trans[:0], np.zeros(0, dtype=np.bool_), csrc[:0], crule[:0], cdst[:0]
                csrc = _grow(csrc, ncalls + 1)
                crule = _grow(crule, ncalls + 1)
                cdst = _grow(cdst, ncalls + 1)
                csrc[ncalls] = d
                crule[ncalls] = r
                cdst[ncalls] = target
                ncalls += 1
        d += 1

    accept = np.zeros(nd, dtype=np.bool_)
    for d in range(nd):
        for i in range(set_ptr[d], set_ptr[d + 1]):
            if pool[i] == end:
                accept[d] = True
                break
    return DETERMINIZE_OK, trans[:nd], accept, csrc[:ncalls], crule[:ncalls], cdst[:ncalls]


@njit(cache=True, nogil=True)
def _intern(xs, k, nd, pool, set_ptr, set_hash, trans, table, cap):  # type: ignore[no-untyped-def]
    """The DFA state of the sorted set ``xs[:k]``, added when new (growing the arrays as needed)."""
    h = _set_hash(xs, k)
    mask = np.uint64(cap - 1)
    slot = np.int64(h & mask)
    while table[slot] >= 0:
        cand = table[slot]
        if set_hash[cand] == h and set_ptr[cand + 1] - set_ptr[cand] == k:
            base = set_ptr[cand]
            same = True
            for i in range(k):
                if pool[base + i] != xs[i]:
                    same = False
                    break
            if same:
                return cand, nd, pool, set_ptr, set_hash, trans, table, cap
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & mask)
    d = nd
    nd += 1
    end = set_ptr[d]
    pool = _grow(pool, end + k)
    pool[end:end + k] = xs[:k]
    set_ptr = _grow(set_ptr, nd + 1)
    set_ptr[nd] = end + k
    set_hash = _grow(set_hash, nd)
    set_hash[d] = h
    if nd > trans.shape[0]:
        old = trans.shape[0]
        trans = _grow(trans, nd)
        trans[old:] = -1
    table[slot] = d
    if 2 * nd > cap:  # keep the load factor under 1/2
        cap *= 2
        table = np.full(cap, -1, dtype=np.int64)
        mask = np.uint64(cap - 1)
        for e in range(nd):
            s = np.int64(set_hash[e] & mask)
            while table[s] >= 0:
                s = np.int64((np.uint64(s) + np.uint64(1)) & mask)
            table[s] = e
    return d, nd, pool, set_ptr, set_hash, trans, table, cap


@njit(cache=True, nogil=True)
def class_symbols(n, nclasses, e_ptr, e_clo, e_chi, e_to):  # type: ignore[no-untyped-def]
    """Merge the classes (at most 256) on which an NFA moves alike; see :func:`pda.fsm._symbols`.

    The edges leaving ``q`` are ``e_ptr[q]..e_ptr[q+1]`` (classes ``e_clo..e_chi`` to ``e_to``).
    Two classes are alike when every pair of states is joined on both or on neither.  Returns
    ``(symbol, first)``: ``symbol[k]`` numbered by first class, ``first[g]`` the first class of ``g``.
    """
    slot = np.full(n, -1, dtype=np.int64)
    most = 1  # the most edges leaving one state
    for q in range(n):
        most = max(most, e_ptr[q + 1] - e_ptr[q])
    tgt = np.empty(most, dtype=np.int64)
    acc = np.zeros((most, 4), dtype=np.uint64)
    seen = dict()
    seen[(np.uint64(0), np.uint64(0), np.uint64(0), np.uint64(0))] = True
    group = np.zeros(nclasses, dtype=np.int64)
    ngroups = 1
    remap = np.full(2 * nclasses + 2, -1, dtype=np.int64)
    for q in range(n):
        cnt = 0
        for j in range(e_ptr[q], e_ptr[q + 1]):
            t = e_to[j]
            if slot[t] < 0:
                slot[t] = cnt
                tgt[cnt] = t
                acc[cnt, :] = 0
                cnt += 1
            i = slot[t]
            for c in range(e_clo[j], e_chi[j] + 1):
                acc[i, c >> 6] |= np.uint64(1) << np.uint64(c & 63)
        for i in range(cnt):
            slot[tgt[i]] = -1
            key = (acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3])
            if key in seen:
                continue
            seen[key] = True
            # split every group into its classes inside and outside this union
            remap[: 2 * ngroups] = -1
            fresh = 0
            for c in range(nclasses):
                b = (acc[i, c >> 6] >> np.uint64(c & 63)) & np.uint64(1)
                k = 2 * group[c] + np.int64(b)
                if remap[k] < 0:
                    remap[k] = fresh
                    fresh += 1
                group[c] = remap[k]
            ngroups = fresh
    # number the symbols by their first class
    remap[:ngroups] = -1
    first = np.empty(ngroups, dtype=np.int64)
    g = 0
    for c in range(nclasses):
        if remap[group[c]] < 0:
            remap[group[c]] = g
            first[g] = c
            g += 1
        group[c] = remap[group[c]]
    return group, first
