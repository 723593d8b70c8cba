"""numba kernels over the automaton's flat arrays, each with a pure-Python reference.

Every kernel is ``@njit(cache=True, nogil=True)``; its ``py_func`` stays runnable, so the tests can
compare it with the reference and the package works under ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["run_simple", "run_simple_reference", "RUN_FAILED", "RUN_NEEDS_STACK", "RUN_END_OF_INPUT"]

RUN_FAILED = 0  # data[pos] has no edge from the returned state
RUN_NEEDS_STACK = 1  # data[pos-1] led into the returned state, which has calls or is an end
RUN_END_OF_INPUT = 2  # all of data was consumed; the returned state is simple (or the start)


@njit(cache=True, nogil=True)
def run_simple(trans: np.ndarray, byte_class: np.ndarray, simple: np.ndarray, state: int,
               data: np.ndarray, pos: int, end: int) -> tuple[int, int, int]:
    """Walk ``data[pos:end]`` from ``state`` while the states reached need no stack work.

    Returns ``(pos, state, status)``: see RUN_* for what they mean.
    """
    s = state
    while pos < end:
        t = trans[s, byte_class[data[pos]]]
        if t < 0:
            return pos, s, RUN_FAILED
        pos += 1
        if not simple[t]:
            return pos, t, RUN_NEEDS_STACK
        s = t
    return pos, s, RUN_END_OF_INPUT


def run_simple_reference(trans, byte_class, simple, state, data, pos, end):  # type: ignore[no-untyped-def]
    """Plain-Python twin of :func:`run_simple`."""
    s = state
    while pos < end:
        t = int(trans[s][byte_class[data[pos]]])
        if t < 0:
            return pos, s, RUN_FAILED
        pos += 1
        if not simple[t]:
            return pos, t, RUN_NEEDS_STACK
        s = t
    return pos, s, RUN_END_OF_INPUT


# ----------------------------------------------------------------------------- token walks

TOKEN_REJECTED = 0  # no path consumes the token
TOKEN_ACCEPTED = 1  # a path consumes it inside the frame (or on the real stack, at run time)
TOKEN_UNCERTAIN = 2  # only paths that leave the frame for some possible caller consume it
TOKEN_OVERFLOW = 3  # the walk outgrew its buffers: decide another way

_CAP = 256  # threads per depth
_NODES = 1 << 14  # local stack nodes


def make_workspace(max_token_len: int) -> tuple:
    """Scratch arrays for :func:`walk_tokens` (one per thread of use; reused across calls)."""
    d = max_token_len + 1
    return (
        np.empty((d, _CAP), np.int32), np.empty((d, _CAP), np.int32), np.empty((d, _CAP), np.int8),
        np.zeros(d, np.int32), np.empty(_NODES, np.int32), np.empty(_NODES, np.int32), np.zeros(1, np.int64),
        np.zeros(d, np.int64), np.empty(_CAP, np.int32), np.empty(_CAP, np.int32), np.empty(_CAP, np.int8),
        np.empty(4 * _CAP, np.int32), np.empty(4 * _CAP, np.int32), np.empty(4 * _CAP, np.int8),
    )


@njit(cache=True, nogil=True)
def _node(a_state, a_parent, n_nodes, lo, state, parent):
    # hash-consing among the nodes made since `lo` (the current depth)
    for k in range(lo, n_nodes[0]):
        if a_state[k] == state and a_parent[k] == parent:
            return k
    k = n_nodes[0]
    if k >= a_state.shape[0]:
        return -2
    a_state[k] = state
    a_parent[k] = parent
    n_nodes[0] = k + 1
    return k


@njit(cache=True, nogil=True)
def _closure(d, seeds_s, seeds_n, seeds_c, nseeds, st, nd, cx, cnt, a_state, a_parent, n_nodes, node_lo,
             wl_s, wl_n, wl_c, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr,
             ret_state, expand):
    """Put the closure of the seed threads into set ``d``; False on overflow."""
    cap = st.shape[1]
    wcap = wl_s.shape[0]
    w = 0
    for i in range(nseeds):
        wl_s[w] = seeds_s[i]
        wl_n[w] = seeds_n[i]
        wl_c[w] = seeds_c[i]
        w += 1
    cnt[d] = 0
    while w > 0:
        w -= 1
        s = wl_s[w]
        n = wl_n[w]
        c = wl_c[w]
        dup = False
        for k in range(cnt[d]):
            if st[d, k] == s and nd[d, k] == n and cx[d, k] == c:
                dup = True
                break
        if dup:
            continue
        if cnt[d] >= cap:
            return False
        st[d, cnt[d]] = s
        nd[d, cnt[d]] = n
        cx[d, cnt[d]] = c
        cnt[d] += 1
        if is_end[s]:
            if n >= 0:
                if w >= wcap:
                    return False
                wl_s[w] = a_state[n]
                wl_n[w] = a_parent[n]
                wl_c[w] = c
                w += 1
            elif expand:
                r = state_rule[s]
                for e in range(ret_ptr[r], ret_ptr[r + 1]):
                    if w >= wcap:
                        return False
                    wl_s[w] = ret_state[e]
                    wl_n[w] = -1
                    wl_c[w] = 1
                    w += 1
        for e in range(call_ptr[s], call_ptr[s + 1]):
            k = _node(a_state, a_parent, n_nodes, node_lo, call_return[e], n)
            if k < 0 or w >= wcap:
                return False
            wl_s[w] = rule_start[call_rule[e]]
            wl_n[w] = k
            wl_c[w] = c
            w += 1
    return True


@njit(cache=True, nogil=True)
def walk_tokens(trans, byte_class, is_end, call_ptr, call_rule, call_return, rule_start, state_rule,
                ret_ptr, ret_state, simple, data, offsets, lcp, skip, bytesets, cand, start_state, stack, expand,
                out, ws):
    """Classify the sorted tokens ``cand`` (ascending sorted-trie indices) from one top.

    The walk starts at ``start_state`` over ``stack`` (return states, bottom first; empty for a
    bare frame).  With ``expand`` (precompute), popping below the frame continues at every return
    site of the rule ("context expansion") as a context thread.  ``out[j]`` gets a TOKEN_* code.
    Tokens share the work of their common prefix; a prefix that dies rejects every token that
    starts with it without further work.  When ``cand`` is the whole vocabulary, the trie's ``lcp``
    gives the common prefixes and a dead prefix jumps over its subtree through ``skip``, so a top
    that allows few tokens costs little more than the tokens it allows; a token whose bytes
    (``bytesets``) all loop on the start state is accepted without a walk.  ``ws`` is a
    :func:`make_workspace` tuple.
    """
    st, nd, cx, cnt, a_state, a_parent, n_nodes, a_top, seeds_s, seeds_n, seeds_c, wl_s, wl_n, wl_c = ws
    if stack.shape[0] > a_state.shape[0] // 2:
        for j in range(cand.shape[0]):
            out[j] = TOKEN_OVERFLOW
        return
    top = -1
    for k in range(stack.shape[0]):
        a_state[k] = stack[k]
        a_parent[k] = top
        top = k
    n_nodes[0] = stack.shape[0]
    seeds_s[0] = start_state
    seeds_n[0] = top
    seeds_c[0] = 0
    ok0 = _closure(0, seeds_s, seeds_n, seeds_c, 1, st, nd, cx, cnt, a_state, a_parent, n_nodes, n_nodes[0],
                   wl_s, wl_n, wl_c, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr,
                   ret_state, expand)
    if not ok0:
        for j in range(cand.shape[0]):
            out[j] = TOKEN_OVERFLOW
        return
    a_top[0] = n_nodes[0]
    valid = 0  # depths 0..valid hold the sets of the previous token's prefix
    dead_at = -1  # the previous token's prefix of this length (>0) died
    over_at = -1  # ... or overflowed
    prev = -1
    ncand = cand.shape[0]
    full = ncand == offsets.shape[0] - 1  # ascending and distinct: cand[j] == j
    if full:
        for j in range(ncand):
            out[j] = TOKEN_REJECTED
    # the bytes that lead from the start state back to itself: a token made only of them is
    # accepted by the start thread (it never leaves the state), with no walk
    loops = np.zeros(4, dtype=np.uint64)
    nloops = 0
    if full:
        for b in range(256):
            if trans[start_state, byte_class[b]] == start_state:
                loops[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
                nloops += 1
    j = -1
    while True:
        j += 1
        if full and dead_at > 0:
            # every token below the dead prefix is rejected (out is pre-filled): jump over them
            while j < ncand and lcp[j] >= dead_at:
                j = skip[j]
        if j >= ncand:
            break
        i = cand[j]
        a = offsets[i]
        ln = offsets[i + 1] - a
        common = 0
        if full:
            common = min(lcp[i], ln) if j > 0 else 0
        elif prev >= 0:
            pa = offsets[prev]
            lim = min(ln, offsets[prev + 1] - pa)
            while common < lim and data[a + common] == data[pa + common]:
                common += 1
        if full and nloops > 0 and (bytesets[i, 0] & ~loops[0]) == 0 and (bytesets[i, 1] & ~loops[1]) == 0 \
                and (bytesets[i, 2] & ~loops[2]) == 0 and (bytesets[i, 3] & ~loops[3]) == 0:
            out[j] = TOKEN_ACCEPTED
            valid = min(valid, common)  # the next token shares with the last walked one at most this
            dead_at = -1
            over_at = -1
            continue
        prev = i
        if dead_at > 0 and common >= dead_at:
            out[j] = TOKEN_REJECTED
            continue
        if over_at > 0 and common >= over_at:
            out[j] = TOKEN_OVERFLOW
            continue
        dead_at = -1
        over_at = -1
        d = min(common, valid)
        n_nodes[0] = a_top[d]
        result = -1
        while d < ln:
            b = byte_class[data[a + d]]
            if cnt[d] == 1:
                # one thread: a step into a simple state needs no closure
                t = trans[st[d, 0], b]
                if t < 0:
                    dead_at = d + 1
                    valid = d
                    result = TOKEN_REJECTED
                    break
                if simple[t]:
                    st[d + 1, 0] = t
                    nd[d + 1, 0] = nd[d, 0]
                    cx[d + 1, 0] = cx[d, 0]
                    cnt[d + 1] = 1
                    d += 1
                    a_top[d] = n_nodes[0]
                    continue
            ns = 0
            for k in range(cnt[d]):
                t = trans[st[d, k], b]
                if t >= 0:
                    seeds_s[ns] = t
                    seeds_n[ns] = nd[d, k]
                    seeds_c[ns] = cx[d, k]
                    ns += 1
            if ns == 0:
                dead_at = d + 1
                valid = d
                result = TOKEN_REJECTED
                break
            ok = _closure(d + 1, seeds_s, seeds_n, seeds_c, ns, st, nd, cx, cnt, a_state, a_parent, n_nodes,
                          n_nodes[0], wl_s, wl_n, wl_c, is_end, call_ptr, call_rule, call_return, rule_start,
                          state_rule, ret_ptr, ret_state, expand)
            if not ok:
                over_at = d + 1
                valid = d
                result = TOKEN_OVERFLOW
                break
            d += 1
            a_top[d] = n_nodes[0]
        if result < 0:
            valid = ln
            result = TOKEN_REJECTED
            for k in range(cnt[ln]):
                if cx[ln, k] == 0:
                    result = TOKEN_ACCEPTED
                    break
                result = TOKEN_UNCERTAIN
        out[j] = result


WORD_BITS = (np.uint32(1) << np.arange(32, dtype=np.uint32)).view(np.int32)
"""The int32 value of each bit of a bitmask word: ``1 << i``, bit 31 being the sign bit (-2**31)."""


@njit(cache=True, nogil=True)
def set_bits(words, ids):
    """``words[id >> 5] |= 1 << (id & 31)`` for every id (an int32 bitmask row)."""
    for k in range(ids.shape[0]):
        t = ids[k]
        words[t >> 5] |= WORD_BITS[t & 31]


@njit(cache=True, nogil=True)
def token_bytesets(data, offsets):  # type: ignore[no-untyped-def]
    """The set of byte values in each token ``data[offsets[i]:offsets[i+1]]``, as 4 uint64 words."""
    n = offsets.shape[0] - 1
    out = np.zeros((n, 4), dtype=np.uint64)
    for i in range(n):
        for k in range(offsets[i], offsets[i + 1]):
            b = data[k]
            out[i, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return out
