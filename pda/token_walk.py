"""The token walk: the vocabulary's sorted trie walked from one top of the pushdown automaton.

:func:`walk_tokens` sorts tokens into accepted / uncertain / rejected from a bare frame (token
classes, :mod:`pda.precompute`) or decides uncertain tokens on a real stack (:mod:`pda.matcher`;
:func:`pda.path_survivors.survivors_on_path` does that for one linear stack in one call).
A plain-Python definition of the same result is :func:`pda.walk_reference.walk_tokens_reference`;
the tests compare the two.  Kernels are ``@njit(cache=True, nogil=True)`` over flat arrays; the
entry points take the automaton, trie and workspace NamedTuples, or the same by reference
(:mod:`pda.kernel_refs`, as :func:`pda.kernel_entry.run_direct` calls them); its helpers take arrays (a
numba call with NamedTuple arguments costs about 100 ns).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .loop_bytes import loop_bytes, utf8_loops_memo
from .thread_sets import closure, copy_set, free_nodes, same_moves, same_set, single_step
from .kernel_entry import run_direct
from .kernel_refs import KernelAutomaton
from .token_trie import starts_with
from .walk_workspace import Workspace

__all__ = [
    "KernelAutomaton", "walk_tokens", "walk_listing", "TOKEN_REJECTED", "TOKEN_ACCEPTED", "TOKEN_UNCERTAIN",
    "TOKEN_OVERFLOW",
]


TOKEN_REJECTED = 0  # no path consumes the token
TOKEN_ACCEPTED = 1  # a path consumes it inside the frame (or on the real stack, at run time)
TOKEN_UNCERTAIN = 2  # only paths that leave the frame for some possible caller consume it
TOKEN_OVERFLOW = 3  # the walk outgrew its buffers: decide another way
SAME_SET_MAX = 64  # the largest thread set a walk checks for a step that left it as it was


@njit(cache=True, nogil=True, inline="always")
def _emit(out, found, n, j, code):
    # token j's code: into out[j]; or, listing (found non-empty), into out[n] with j in found[n]
    # when it is not rejected.  Returns how many are listed.
    if found.shape[0] == 0:
        out[j] = code
    elif code != TOKEN_REJECTED:
        out[n] = code
        found[n] = j
        n += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def _next_live(starts, base, x, trans, byte_class, st, cnt, d):
    # the least byte y >= x that starts some token of the ranges starts[base + y]:starts[base + y + 1]
    # and that some thread of the set at depth d reads (256: none)
    while x < 256:
        if starts[base + x] < starts[base + x + 1]:
            c = byte_class[x]
            for k in range(cnt[d]):
                if trans[st[d, k], c] >= 0:
                    return x
        x += 1
    return 256


@njit(cache=True, nogil=True, inline="always")
def _overflow_all(out, found, ncand):
    # every token overflows (listed, if listing)
    for j in range(ncand):
        out[j] = TOKEN_OVERFLOW
        if found.shape[0]:
            found[j] = j
    return ncand


def walk_tokens(A: KernelAutomaton, T: Any, cand: np.ndarray, start_state: int, stack: np.ndarray, expand: bool,
                out: np.ndarray, ws: Workspace) -> int:
    """Classify the sorted tokens ``cand`` from one top (:func:`_walk_tokens`, which says how):
    ``out[j]`` gets the TOKEN_* code of token ``cand[j]``.  Returns how many frames of ``stack``
    some pop read."""
    return _call(A, T, cand, start_state, stack, expand, out, ws, _NO_FOUND)[0]


def walk_listing(A: KernelAutomaton, T: Any, cand: np.ndarray, start_state: int, stack: np.ndarray, expand: bool,
                 out: np.ndarray, ws: Workspace, found: np.ndarray) -> int:
    """:func:`walk_tokens` that lists only the tokens it does not reject: returns their number
    ``n``; ``found[:n]`` are their positions in ``cand`` (ascending) and ``out[:n]`` their codes.
    ``out`` and ``found`` (int32) hold at least ``len(cand)`` entries.  A whole vocabulary from a
    top that allows a few hundred tokens is then read and written a few hundred times, not 129k."""
    if found.shape[0] < cand.shape[0] or out.shape[0] < cand.shape[0]:
        raise ValueError("walk_listing: out and found must hold an entry per candidate")
    if cand.shape[0] == 0:
        return 0
    return _call(A, T, cand, start_state, stack, expand, out, ws, found)[1]


_NO_FOUND = np.zeros(0, dtype=np.int32)  # walk_tokens: every code into out, none listed


def _call(A: KernelAutomaton, T: Any, cand: np.ndarray, start_state: int, stack: np.ndarray, expand: bool,
          out: np.ndarray, ws: Workspace, found: np.ndarray) -> tuple[int, int]:
    """Run :func:`_walk_tokens`; returns (frames read, tokens listed or ``len(cand)``).  Its
    per-call arrays are made contiguous here, as the entry point compiled for them assumes (an
    output that is not is written through a contiguous copy): one specialisation of the kernel,
    with the references of :mod:`pda.kernel_refs`, serves every call."""
    if cand.flags.c_contiguous and stack.flags.c_contiguous and out.flags.c_contiguous and found.flags.c_contiguous:
        read, n = run_direct(_walk_tokens, "walk", A, T, ws, (A, T, cand, start_state, stack, expand, out, ws, found))
        return int(read), int(n)
    o, f = np.ascontiguousarray(out), np.ascontiguousarray(found)
    read, n = _call(A, T, np.ascontiguousarray(cand), start_state, np.ascontiguousarray(stack), expand, o, ws, f)
    out[...] = o
    found[...] = f
    return read, n


@njit(cache=True, nogil=True)
def _walk_tokens(A, T, cand, start_state, stack, expand, out, ws, found):
    """Classify the sorted tokens ``cand`` (ascending sorted-trie indices) from one top.

    ``A`` is a :class:`KernelAutomaton`, ``T`` the :class:`~pda.token_trie.TokenTrie`, ``ws`` a
    :class:`Workspace`.
    The walk starts at ``start_state`` over ``stack`` (return states, bottom first; empty for a
    bare frame).  With ``expand`` (precompute), reaching the end of the rule at the frame bottom
    either continues at every return site of the rule as a context thread ("context expansion"),
    or, for a rule with ``rule_escape``, marks every token that gets there *uncertain* whatever
    follows (the rule's callers decide, at run time).  ``out[j]`` gets a TOKEN_* code; or, with a
    non-empty ``found`` (:func:`walk_listing`), only the tokens not rejected are written, their codes
    to ``out[0:n]`` and their positions ``j`` to ``found[0:n]``.

    Tokens share the work of their common prefix; a prefix that dies decides every token that starts
    with it without further work.  When ``cand`` is the whole vocabulary, the trie's ``lcp`` gives
    the common prefixes and a dead prefix jumps over its subtree through ``skip`` (a dead first or
    second byte through ``first_starts`` or ``second_starts``, together with the subtrees of the
    following bytes that no thread at that depth reads), so a top that allows few tokens costs
    little more than the tokens it allows; in a subset (a state's uncertain tokens on a real stack)
    a dead prefix's candidates are found by galloping and bisection.  A token whose bytes
    (``bytesets``) all loop on the start state is accepted without a walk (whole vocabulary), and
    so is a token whose remaining bytes loop on the state of some thread inside the frame at the
    depth the walk reached (that thread keeps its state and stack to the end, whatever the other
    threads do; :mod:`pda.loop_bytes`); the later tokens with that prefix are then decided by
    their byte sets alone (``bytesets``, or ``tailsets`` -- the bytes past the first -- when only
    the rest of the token loops: `` foo`` after a space, from an identifier's loop: on a C-like
    grammar's expression starts, 42,697 walked tokens became 781).  Over the whole vocabulary the
    tokens that follow such a token in the trie and share its prefix are decided in a tight loop
    (an SQL expression start's walk took 1.35 ms instead of 1.88).  A byte that
    leaves a thread set as it was (an identifier's next letter: its loop, and every way the rule can
    end, popped again) is remembered with the depths that hold that set, and a byte that moves every
    thread of it alike is a copy of the set, not a closure (the SQL walk's 1,632 closures became
    501).  Thread sets are built by :mod:`pda.thread_sets`.

    Returns ``(read, n)``: how many frames of ``stack`` (from the top) some pop read -- a stack
    that agrees with this one on that many top frames gets the same answer for every token -- and
    how many tokens were listed (``len(cand)`` when not listing).
    """
    # unpacked once: numba passes NamedTuples to helpers slowly
    st, nd, cx, cnt, a_state, a_parent, n_nodes, a_top = ws.states, ws.nd, ws.cx, ws.cnt, ws.a_state, ws.a_parent, \
        ws.n_nodes, ws.a_top
    seeds_s, seeds_n, seeds_c, wl_s, wl_n, wl_c, esc, lazy = ws.seeds_s, ws.seeds_n, ws.seeds_c, ws.wl_s, ws.wl_n, \
        ws.wl_c, ws.esc, ws.lazy
    h_node, node_slot = ws.h_node, ws.node_slot
    hn = (h_node, node_slot, ws.h_thread, ws.h_stamp)
    free_nodes(n_nodes, n_nodes[2], h_node, node_slot)  # the last walk's local nodes leave the table
    trans, byte_class, simple, is_end, state_rule, rule_escape, has_loop, utf8_memo = A.trans, A.byte_class, \
        A.simple, A.is_end, A.state_rule, A.rule_escape, A.has_loop, A.utf8_loop
    ret_ptr, ret_state, call_ptr, call_rule, call_return, rule_start = A.ret_ptr, A.ret_state, A.call_ptr, \
        A.call_rule, A.call_return, A.rule_start
    data, offsets, lcp, skip, bytesets, tailsets, whole_utf8, first_starts, second_starts = T.data, T.offsets, T.lcp, \
        T.skip, T.bytesets, T.tailsets, T.whole_utf8, T.first_starts, T.second_starts
    n_stack = stack.shape[0]
    if n_stack > a_state.shape[0] // 2:
        return n_stack, _overflow_all(out, found, cand.shape[0])
    top = -1
    for k in range(n_stack):
        a_state[k] = stack[k]
        a_parent[k] = top
        top = k
    n_nodes[0] = n_stack
    n_nodes[1] = n_stack
    n_nodes[2] = n_stack
    seeds_s[0] = start_state
    seeds_n[0] = top
    seeds_c[0] = 0
    if not closure(0, 1, hn, n_stack, expand, st, nd, cx, cnt, a_state, a_parent, n_nodes,
            seeds_s, seeds_n, seeds_c, wl_s, wl_n, wl_c, esc, is_end, state_rule, rule_escape, ret_ptr,
            ret_state, call_ptr, call_rule, call_return, rule_start):
        return n_stack, _overflow_all(out, found, cand.shape[0])
    lazy[0] = 0
    a_top[0] = n_nodes[0]
    valid = 0  # depths 0..valid hold the sets of the previous token's prefix
    dead_at = -1  # the previous token's prefix of this length (>0) died ...
    dead_res = TOKEN_REJECTED  # ... deciding every token that starts with it so
    over_at = -1  # ... or overflowed
    prev = -1
    ncand = cand.shape[0]
    full = ncand == offsets.shape[0] - 1  # ascending and distinct: cand[j] == j
    sparse = found.shape[0] > 0
    nfound = 0
    if full and not sparse:
        for j in range(ncand):
            out[j] = TOKEN_REJECTED
    # the bytes that lead from the start state back to itself: a token made only of them is
    # accepted by the start thread (it never leaves the state), with no walk
    loops = np.zeros(4, dtype=np.uint64)
    nloops = 0
    utf8 = False
    if full:
        for b in range(256):
            if trans[start_state, byte_class[b]] == start_state:
                loops[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
                nloops += 1
        utf8 = nloops > 0 and utf8_loops_memo(utf8_memo, trans, byte_class, start_state)
    # the same for a looping thread of a set the current prefix reaches
    class_bytes = np.zeros((trans.shape[1], 4), dtype=np.uint64)  # filled on first use
    class_bytes_ready = False
    loopsk = np.zeros(4, dtype=np.uint64)
    nloopsk = 0  # > 0: loopsk holds the loop bytes of the looping thread armed at depth kdepth
    kdepth = 0
    kres = TOKEN_ACCEPTED  # what the armed set decides
    utf8k = False
    ktail = False  # armed on the bytes past the first (tailsets), not the whole token's
    lbytes = np.zeros(4, dtype=np.uint64)  # the loop bytes of the last looping state looked at
    lstate = -1
    lcount = 0
    lutf8 = False
    lfail_tok = -1
    lfail_state = -1
    lfail_at = 0
    stat_lo = -1  # depths stat_lo..stat_hi hold one thread set, which byte class stat_c leaves as it is
    stat_hi = -1
    stat_c = 0
    j = -1
    while True:
        j += 1
        if dead_at > 0 and j < ncand:
            # every token below the dead prefix is decided: jump over them (through skip; in a
            # subset, past the candidates that start with the prefix)
            nj = j
            if full:
                # a first or second byte that dies: past its tokens, and those of every following
                # byte no thread at that depth reads, at once (a state that allows a few first
                # bytes visited a token of every other first byte, then skipped its subtree)
                if dead_at == 1:  # (the start set is never lazy)
                    x = _next_live(first_starts, 0, data[offsets[prev]] + 1, trans, byte_class, st, cnt, 0)
                    nj = max(nj, first_starts[x])
                elif dead_at == 2 and lazy[1] == 0:
                    base = data[offsets[prev]] * 257
                    x = _next_live(second_starts, base, data[offsets[prev] + 1] + 1, trans, byte_class, st, cnt, 1)
                    nj = max(nj, second_starts[base + x])
                while nj < ncand and lcp[nj] >= dead_at:
                    nj = skip[nj]
            else:  # the candidates that start with the prefix follow j: gallop, then bisect
                pa = offsets[prev]
                hi = j
                step = 1
                while hi < ncand and starts_with(data, offsets, cand[hi], pa, dead_at):
                    nj = hi + 1
                    hi = nj + step
                    step *= 2
                hi = min(hi, ncand)
                while nj < hi:
                    mid = (nj + hi) >> 1
                    if starts_with(data, offsets, cand[mid], pa, dead_at):
                        nj = mid + 1
                    else:
                        hi = mid
            if dead_res != TOKEN_REJECTED or not (full or sparse):  # out is pre-filled, or lists the others
                for k in range(j, nj):
                    nfound = _emit(out, found, nfound, k, dead_res)
            j = nj
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
        # every byte loops on the start state (or its ASCII bytes do and its other characters are
        # whole and every such character loops): accepted; or the shared prefix leads to the set
        # armed below (kdepth), on whose looping thread the same holds for every byte of the token
        shortcut = -1
        if nloops > 0 and (bytesets[i, 0] & ~loops[0]) == 0 and (bytesets[i, 1] & ~loops[1]) == 0 \
                and ((bytesets[i, 2] & ~loops[2]) == 0 and (bytesets[i, 3] & ~loops[3]) == 0 or utf8 and whole_utf8[i]):
            shortcut = TOKEN_ACCEPTED
        elif nloopsk > 0 and common >= kdepth and valid >= kdepth and not ktail \
                and (bytesets[i, 0] & ~loopsk[0]) == 0 and (bytesets[i, 1] & ~loopsk[1]) == 0 \
                and ((bytesets[i, 2] & ~loopsk[2]) == 0 and (bytesets[i, 3] & ~loopsk[3]) == 0 or utf8k and whole_utf8[i]):
            shortcut = kres
        elif nloopsk > 0 and common >= kdepth and valid >= kdepth and ktail and ln > kdepth \
                and (tailsets[i, 0] & ~loopsk[0]) == 0 and (tailsets[i, 1] & ~loopsk[1]) == 0 \
                and ((tailsets[i, 2] & ~loopsk[2]) == 0 and (tailsets[i, 3] & ~loopsk[3]) == 0
                     or utf8k and whole_utf8[i] and (data[a + kdepth] < 0x80 or data[a + kdepth] >= 0xC0)):
            shortcut = kres
        if shortcut >= 0:
            nfound = _emit(out, found, nfound, j, shortcut)
            valid = min(valid, common)  # the next token shares with the last walked one at most this
            # the tokens that follow in the trie and take the same shortcut, in a tight loop (from
            # an SQL expression start, 67,000 of the 68,000 tokens it accepts): those that share the
            # first rk bytes with this one and whose bytes (past the first, rtail) are within the
            # loop bytes r0..r3, or whose characters are whole when every multi-byte character
            # loops (rutf8, from a character boundary at rk with rtail).  Written out here: as a
            # helper taking the arrays, a call that decides no token cost more than the loop saved.
            # They are decided as this one was (shortcut): accepted by the start state's loop, or
            # the armed set's kres.
            rk = -1
            if full and nloops > 0 and shortcut == TOKEN_ACCEPTED and (bytesets[i, 0] & ~loops[0]) == 0 \
                    and (bytesets[i, 1] & ~loops[1]) == 0:
                rk, rtail, rutf8, r0, r1, r2, r3 = 0, False, utf8, loops[0], loops[1], loops[2], loops[3]
            elif full and nloopsk > 0 and common >= kdepth and valid >= kdepth:
                rk, rtail, rutf8, r0, r1, r2, r3 = kdepth, ktail, utf8k, loopsk[0], loopsk[1], loopsk[2], loopsk[3]
            while rk >= 0 and j + 1 < ncand:
                i = j + 1
                if lcp[i] < rk or rk > 0 and offsets[i + 1] - offsets[i] <= rk:
                    break
                if rtail:
                    w0, w1, w2, w3 = tailsets[i, 0], tailsets[i, 1], tailsets[i, 2], tailsets[i, 3]
                else:
                    w0, w1, w2, w3 = bytesets[i, 0], bytesets[i, 1], bytesets[i, 2], bytesets[i, 3]
                if (w0 & ~r0) != 0 or (w1 & ~r1) != 0:
                    break
                if ((w2 & ~r2) != 0 or (w3 & ~r3) != 0) and not (
                        rutf8 and whole_utf8[i] and not (rtail and 0x80 <= data[offsets[i] + rk] < 0xC0)):
                    break
                valid = min(valid, lcp[i])
                nfound = _emit(out, found, nfound, i, shortcut)
                j = i
            dead_at = -1
            over_at = -1
            continue
        prev = i
        if dead_at > 0 and common >= dead_at:
            nfound = _emit(out, found, nfound, j, dead_res)
            continue
        if over_at > 0 and common >= over_at:
            nfound = _emit(out, found, nfound, j, TOKEN_OVERFLOW)
            continue
        dead_at = -1
        over_at = -1
        d = min(common, valid)
        if d < kdepth:
            nloopsk = 0
        stat_hi = min(stat_hi, d)  # the sets above d are this token's to make (below stat_lo: none left)
        free_nodes(n_nodes, a_top[d], h_node, node_slot)
        result = -1
        while d < ln:
            # a thread inside the frame whose next byte loops on its state (or starts a character):
            # when the rest of the token loops there too, it keeps its state and stack to the end,
            # so it accepts the token whatever the other threads do (an identifier, a string body).
            # When every thread is a context thread, one such thread makes the token uncertain:
            # no thread inside the frame can come back, and that one survives to the end.
            ls = -1
            lres = TOKEN_ACCEPTED
            ctx_only = True
            for k in range(cnt[d]):
                q = st[d, k]
                if cx[d, k] == 0:
                    ctx_only = False
                    if has_loop[q] and (data[a + d] >= 0xC2 or trans[q, byte_class[data[a + d]]] == q):
                        ls = q
                        break
            if ls < 0 and ctx_only:
                for k in range(cnt[d]):
                    q = st[d, k]
                    if has_loop[q] and (data[a + d] >= 0xC2 or trans[q, byte_class[data[a + d]]] == q):
                        ls = q
                        lres = TOKEN_UNCERTAIN
                        break
            if ls >= 0:
                # when every byte of the token loops on that state, the rest of the token stays
                # there: decided (lres), and so is every later token with this prefix whose bytes
                # loop there too (armed as kdepth / loopsk / kres)
                if ls != lstate:
                    if not class_bytes_ready:
                        for x in range(256):
                            class_bytes[byte_class[x], x >> 6] |= np.uint64(1) << np.uint64(x & 63)
                        class_bytes_ready = True
                    lstate = ls
                    lcount = loop_bytes(trans, class_bytes, lstate, lbytes)
                    lutf8 = lcount > 0 and utf8_loops_memo(utf8_memo, trans, byte_class, lstate)
                if lcount > 0 and (bytesets[i, 0] & ~lbytes[0]) == 0 and (bytesets[i, 1] & ~lbytes[1]) == 0 \
                        and ((bytesets[i, 2] & ~lbytes[2]) == 0 and (bytesets[i, 3] & ~lbytes[3]) == 0
                             or lutf8 and whole_utf8[i]):
                    for k in range(4):
                        loopsk[k] = lbytes[k]
                    utf8k = lutf8
                    ktail = False
                    nloopsk = 1
                    kdepth = d
                    kres = lres
                    valid = d
                    result = lres
                    break
                if lcount > 0 and not (j == lfail_tok and ls == lfail_state and d < lfail_at):
                    # only the token's bytes from here on need to loop (a space, then an identifier)
                    utf = lutf8 and whole_utf8[i] and (data[a + d] < 0x80 or data[a + d] >= 0xC0)
                    p = d
                    while p < ln:
                        x = data[a + p]
                        if (lbytes[x >> 6] >> np.uint64(x & 63)) & np.uint64(1) == 0 and not (utf and x >= 0x80):
                            break
                        p += 1
                    if p == ln:
                        valid = d
                        result = lres
                        if d > 0 and (tailsets[i, 0] & ~lbytes[0]) == 0 and (tailsets[i, 1] & ~lbytes[1]) == 0 \
                                and ((tailsets[i, 2] & ~lbytes[2]) == 0 and (tailsets[i, 3] & ~lbytes[3]) == 0 or utf):
                            # so do the later tokens with this prefix whose bytes past the first loop
                            # there (`` foo`` from an identifier's loop after a space): armed on those
                            for k in range(4):
                                loopsk[k] = lbytes[k]
                            utf8k = lutf8
                            ktail = True
                            nloopsk = 1
                            kdepth = d
                            kres = lres
                        break
                    lfail_tok = j  # no such shortcut on this state before byte p of this token
                    lfail_state = ls
                    lfail_at = p
            b = byte_class[data[a + d]]
            if 0 <= stat_lo <= d <= stat_hi and cnt[d] > 1 and same_moves(trans, st, d, cnt[d], b, stat_c):
                # a byte that leaves the set as it is, as stat_c does (an identifier's letters, each
                # followed by every way its rule can end): the set is copied, not stepped
                copy_set(st, nd, cx, cnt, esc, lazy, d)
                d += 1
                a_top[d] = n_nodes[0]
                stat_hi = d
                continue
            if cnt[d] == 1 and lazy[d]:
                # the thread sits at an end inside a call: popping reaches a_state[n], which can
                # only matter when it reads this byte; else write the pop out now
                n0 = nd[d, 0]
                r = a_state[n0]
                if n0 < n_stack and n0 < n_nodes[1]:
                    n_nodes[1] = n0
                if not (simple[r] and trans[r, b] < 0):
                    lazy[d] = 0
                    free_nodes(n_nodes, a_top[d], h_node, node_slot)
                    seeds_s[0] = st[d, 0]
                    seeds_n[0] = n0
                    seeds_c[0] = cx[d, 0]
                    if not closure(d, 1, hn, n_stack, expand, st, nd, cx, cnt, a_state, a_parent, n_nodes,
                            seeds_s, seeds_n, seeds_c, wl_s, wl_n, wl_c, esc, is_end, state_rule, rule_escape, ret_ptr,
                            ret_state, call_ptr, call_rule, call_return, rule_start):
                        over_at = d
                        valid = d - 1
                        result = TOKEN_OVERFLOW
                        break
                    a_top[d] = n_nodes[0]
            if cnt[d] == 1:
                # one thread: a step often needs no closure (see single_step)
                t = trans[st[d, 0], b]
                if t < 0:
                    dead_at = d + 1
                    dead_res = TOKEN_UNCERTAIN if esc[d] else TOKEN_REJECTED
                    valid = d
                    result = dead_res
                    break
                if simple[t]:  # single_step's first case, written out: a call per byte costs ~80 ns here
                    esc[d + 1] = esc[d]
                    st[d + 1, 0] = t
                    nd[d + 1, 0] = nd[d, 0]
                    cx[d + 1, 0] = cx[d, 0]
                    cnt[d + 1] = 1
                    lazy[d + 1] = 0
                    d += 1
                    a_top[d] = n_nodes[0]
                    continue
                # the rest of single_step, written out too (a counted repeat's tail is an end at every
                # item: each of its bytes comes here)
                n0 = nd[d, 0]
                if call_ptr[t] == call_ptr[t + 1] and (n0 >= 0 or not expand or rule_escape[state_rule[t]]):
                    esc[d + 1] = 1 if n0 < 0 and expand else esc[d]
                    st[d + 1, 0] = t
                    nd[d + 1, 0] = n0
                    cx[d + 1, 0] = cx[d, 0]
                    cnt[d + 1] = 1
                    lazy[d + 1] = 1 if n0 >= 0 else 0
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
                dead_res = TOKEN_UNCERTAIN if esc[d] else TOKEN_REJECTED
                valid = d
                result = dead_res
                break
            if ns == 1 and single_step(d, seeds_s[0], seeds_n[0], seeds_c[0], expand, st, nd, cx, cnt, esc, lazy, simple, call_ptr, state_rule, rule_escape):
                d += 1
                a_top[d] = n_nodes[0]
                continue
            # seeds that are simple, or ends without calls inside a call whose pop reaches a simple
            # state (a counted repeat's tail beside its next block), need no closure: set d + 1 is
            # the distinct seeds and those pops
            m = 0
            for k in range(ns):
                t = seeds_s[k]
                if not simple[t]:
                    n = seeds_n[k]
                    if n < 0 or call_ptr[t] != call_ptr[t + 1] or not simple[a_state[n]]:
                        m = -1
                        break
                    m += 1
            if m >= 0 and ns + m <= st.shape[1]:
                m = 0
                for k in range(2 * ns):
                    if k < ns:
                        s = seeds_s[k]
                        n = seeds_n[k]
                        c = seeds_c[k]
                    else:
                        n = seeds_n[k - ns]
                        if simple[seeds_s[k - ns]]:
                            continue
                        if n < n_stack and n < n_nodes[1]:
                            n_nodes[1] = n
                        s = a_state[n]
                        c = seeds_c[k - ns]
                        n = a_parent[n]
                    dup = False
                    for q in range(m):
                        if st[d + 1, q] == s and nd[d + 1, q] == n and cx[d + 1, q] == c:
                            dup = True
                            break
                    if not dup:
                        st[d + 1, m] = s
                        nd[d + 1, m] = n
                        cx[d + 1, m] = c
                        m += 1
                cnt[d + 1] = m
                esc[d + 1] = esc[d]
                lazy[d + 1] = 0
                d += 1
                a_top[d] = n_nodes[0]
                continue
            ok = closure(d + 1, ns, hn, n_stack, expand, st, nd, cx, cnt, a_state, a_parent, n_nodes,
                    seeds_s, seeds_n, seeds_c, wl_s, wl_n, wl_c, esc, is_end, state_rule, rule_escape, ret_ptr,
                    ret_state, call_ptr, call_rule, call_return, rule_start)
            if not ok:
                over_at = d + 1
                valid = d
                result = TOKEN_OVERFLOW
                break
            lazy[d + 1] = 0
            # a step that left the set as it was (equal sets escape alike: esc is checked all the same),
            # in sets of at most SAME_SET_MAX threads: same_set's check is quadratic once the sums agree
            if cnt[d + 1] == cnt[d] and 1 < cnt[d] <= SAME_SET_MAX and esc[d + 1] == esc[d] \
                    and same_set(st, nd, cx, d, cnt[d]):
                if not 0 <= stat_lo <= d <= stat_hi:
                    stat_lo = d
                stat_hi = d + 1
                stat_c = b
            d += 1
            a_top[d] = n_nodes[0]
        if result < 0:
            valid = ln
            result = TOKEN_UNCERTAIN if esc[ln] else TOKEN_REJECTED
            for k in range(cnt[ln]):
                if cx[ln, k] == 0:
                    result = TOKEN_ACCEPTED
                    break
                result = TOKEN_UNCERTAIN
        nfound = _emit(out, found, nfound, j, result)
    return n_stack - n_nodes[1], nfound if sparse else ncand
