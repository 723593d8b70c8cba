"""Bounded-lookahead keys: what a token walk of at most ``k`` bytes of a byte set can see from a state.

A token of ``L`` bytes walked from a bare frame holding state ``s`` (:func:`pda.token_walk.walk_tokens`
with context expansion) only ever meets states that ``L`` byte steps can reach from ``s``, plus the
moves that read no byte: calls (a callee's start, and the caller's state after the call), and, at
a rule end on the frame bottom, the rule's return sites (context expansion) or, for an escaping
rule, the escape.  So two states whose automata agree up to ``k`` bytes give every token of at
most ``k`` bytes the same class, in any grammar.  A token made only of the bytes of a set ``X``
moreover follows only byte moves labelled in ``X``: agreeing on those is enough for it.

:func:`lookahead_keys` writes that bounded part of the automaton down canonically and hashes it, for
several bounds ``k`` at once (one search: the region of a smaller bound is the first layers of a
larger one's, numbered alike, so its encoding is the same as a search of its own would write):

* states are numbered in the order a layered breadth-first search from ``s`` over the bytes of
  ``X`` (ascending) meets them: layer ``d`` holds the states whose fewest bytes from ``s`` is
  ``d``; a layer is closed under the moves that read no byte (calls, return sites) before its byte
  successors and the call returns due there open layer ``d + 1``; the search stops at layer ``k``;
* each state then contributes, in those numbers: whether it is an end, whether its rule escapes,
  its calls (callee start, return state), its return sites when it is an end of a rule that does
  not escape, and, below layer ``k`` only, its successors on the bytes of ``X`` as runs of byte
  values (a run starts where the successor changes).

The digest names the bounded automaton up to renumbering, independently of state numbers, byte
classes and grammars: equal digests (with the same ``k`` and ``X``) mean isomorphic walk regions,
so equal classes for every token of at most ``k`` bytes of ``X``.  A region of more than ``cap``
states gets no key.

A call's return state can only be reached after the callee has read its fewest bytes
(:func:`rule_min_lengths`), so the search meets it that many layers later, and leaves it out past
layer ``k``.  That is what makes the blocks of a long counted repeat alike: each block returns to
its own place in the caller, but the next of those places is a whole block away.
:func:`frame_key` searches from a state and one return state below its frame, both in layer 0: it
names what a walk on a one-frame stack sees.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

import numpy as np
import xxhash
from numba import njit

from .token_walk import KernelAutomaton

__all__ = ["LookaheadScratch", "byte_runs", "make_scratch", "lookahead_key", "lookahead_keys", "frame_key", "first_byte_weight",
           "two_byte_weight", "pair_counts", "class_bits", "rule_min_lengths", "NO_STRING"]

_CODE_WORDS = 1 << 18  # int32 words of the encodings of one search
_MAX_BOUNDS = 16  # bounds one search serves
_PENDING = 1 << 14  # call returns waiting for their layer in one search (more: no key)
NO_STRING = 1 << 30  # rule_min_lengths of a rule that derives no string


class LookaheadScratch(NamedTuple):
    """Scratch arrays of one :func:`lookahead_key` caller (one per thread; reused across calls)."""

    ids: np.ndarray  # int32[S]: -1, or a state's number in the current search (reset after use)
    order: np.ndarray  # int32[cap + 1]: the states met, in order
    depth: np.ndarray  # int32[cap + 1]: the layer of each
    code: np.ndarray  # int32[_CODE_WORDS]: the encodings
    spans: np.ndarray  # int64[_MAX_BOUNDS, 2]: where each encoding lies in ``code``
    pend: np.ndarray  # int32[_PENDING, 2]: call returns met in a later layer (state, layer)


def make_scratch(num_states: int, cap: int) -> LookaheadScratch:
    return LookaheadScratch(np.full(num_states, -1, np.int32), np.empty(cap + 1, np.int32),
                            np.empty(cap + 1, np.int32), np.empty(_CODE_WORDS, np.int32),
                            np.empty((_MAX_BOUNDS, 2), np.int64), np.empty((_PENDING, 2), np.int32))


def byte_runs(byte_class: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first byte, class) of each maximal run of consecutive ``allowed`` byte values in one byte
    class: the byte moves a key restricted to ``allowed`` follows and writes down."""
    cut = np.empty(256, dtype=np.bool_)  # (not np.r_: a compile makes 7 of these, 60 us each that way)
    cut[0] = True
    np.not_equal(byte_class[1:], byte_class[:-1], out=cut[1:])
    cut[1:] |= allowed[1:] != allowed[:-1]
    starts = np.flatnonzero(cut & allowed).astype(np.int32)
    return starts, byte_class[starts].astype(np.int32)


@njit(cache=True, nogil=True)
def _meet(t, d, ids, order, depth, n, cap):
    """Number state ``t`` (layer ``d``) if it is new; returns the count of states met, -1 past ``cap``."""
    if ids[t] >= 0:
        return n
    if n >= cap:
        return -1
    ids[t] = n
    order[n] = t
    depth[n] = d
    return n + 1


@njit(cache=True, nogil=True)
def _close(i, n, d, call_ptr, call_rule, call_return, rule_start, is_end, state_rule, rule_escape, ret_ptr, ret_state,
           ids, order, depth, cap, minlen, k, pend, npend):
    """Close the states ``order[i:n]`` (layer ``d``) under the moves that read no byte: calls,
    and the return sites of an end of a rule that does not escape.  A call's return state is met
    ``minlen[callee]`` layers later (the callee reads at least that many bytes before it returns):
    in this layer when that is 0, else written to ``pend[npend[0]]`` as (state, layer) when the
    layer is at most ``k``.  Returns the new count of states met, -1 past ``cap`` (or ``pend``)."""
    while i < n:
        q = order[i]
        i += 1
        for e in range(call_ptr[q], call_ptr[q + 1]):
            n = _meet(rule_start[call_rule[e]], d, ids, order, depth, n, cap)
            if n < 0:
                return n
            skip = minlen[call_rule[e]]
            if skip == 0:
                n = _meet(call_return[e], d, ids, order, depth, n, cap)
                if n < 0:
                    return n
            elif d + skip <= k and ids[call_return[e]] < 0:
                if npend[0] >= pend.shape[0]:
                    return -1
                pend[npend[0], 0] = call_return[e]
                pend[npend[0], 1] = d + skip
                npend[0] += 1
        if is_end[q] and not rule_escape[state_rule[q]]:
            r = state_rule[q]
            for e in range(ret_ptr[r], ret_ptr[r + 1]):
                n = _meet(ret_state[e], d, ids, order, depth, n, cap)
                if n < 0:
                    return n
    return n


def class_bits(trans: np.ndarray) -> np.ndarray:
    """uint64[S, 4]: bit ``c`` of row ``s`` set when state ``s`` reads byte class ``c``."""
    bits = np.zeros((trans.shape[0], 32), dtype=np.uint8)  # 256 bits a row
    packed = np.packbits(trans >= 0, axis=1, bitorder="little")
    bits[:, :packed.shape[1]] = packed
    return bits.view(np.uint64)


@njit(cache=True, nogil=True)
def first_byte_weight(class_bits, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr,
                      ret_state, rule_escape, class_weight, state, cap, ids, order, depth):
    """The sum of ``class_weight`` over the byte classes that some state of ``state``'s closure
    reads (``class_bits``, from :func:`class_bits`); -1 past ``cap`` states.  The closure is layer 0
    of :func:`lookahead_keys` with every call's return state in it too (a looser bound, and cheap).
    With ``class_weight[c]`` the number of tokens whose first byte is in class ``c``, a bound on the
    tokens a walk from ``state`` goes past the first byte of.  ``ids`` is all -1 on entry and on
    return."""
    n = _meet(state, 0, ids, order, depth, 0, cap)
    npend = np.zeros(1, np.int64)
    n = _close(0, n, 0, call_ptr, call_rule, call_return, rule_start, is_end, state_rule, rule_escape, ret_ptr,
               ret_state, ids, order, depth, cap, np.zeros(rule_start.shape[0], np.int32), 0,
               np.empty((0, 2), np.int32), npend)
    m = n if n >= 0 else cap
    total = 0
    if n >= 0:
        r0 = r1 = r2 = r3 = np.uint64(0)
        for j in range(n):
            q = order[j]
            r0 |= class_bits[q, 0]
            r1 |= class_bits[q, 1]
            r2 |= class_bits[q, 2]
            r3 |= class_bits[q, 3]
        for c in range(class_weight.shape[0]):
            w = r0 if c < 64 else r1 if c < 128 else r2 if c < 192 else r3
            if (w >> np.uint64(c & 63)) & np.uint64(1):
                total += class_weight[c]
    for j in range(m):
        ids[order[j]] = -1
    return total if n >= 0 else -1


@njit(cache=True, nogil=True)
def _region(trans, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr, ret_state, rule_escape,
            minlen, run_class, state, ret, k, cap, ids, order, depth, pend):
    """Meet the states of the ``k``-byte region of ``state`` in layers (see the module docstring):
    ``order[:n]`` in their numbers, ``depth`` their layers, ``ids`` their numbers.  Returns ``(n,
    last)``: ``n`` states met, of which layers ``0..last`` are complete; ``last < k`` when layer
    ``last + 1`` would pass ``cap`` states (``last`` is -1 when layer 0 would), and the states met
    of that layer are in ``order[:n]`` too.  ``ret >= 0`` is a return state below ``state``'s
    frame (:func:`frame_key`): met in layer 0 too, second."""
    npend = np.zeros(1, np.int64)
    n = _meet(state, 0, ids, order, depth, 0, cap)
    if ret >= 0:
        n = _meet(ret, 0, ids, order, depth, n, cap)
        if n < 0:
            return cap, -1
    i = 0
    d = 0
    lo = 0  # where layer d starts in order
    while True:
        m = _close(i, n, d, call_ptr, call_rule, call_return, rule_start, is_end, state_rule, rule_escape,
                   ret_ptr, ret_state, ids, order, depth, cap, minlen, k, pend, npend)
        if m < 0:
            return cap, d - 1
        n = m
        i = n
        if d >= k:
            return n, k
        # open layer d + 1: the byte successors of layer d, then the call returns due there
        hi = n
        for j in range(lo, hi):
            q = order[j]
            for r in range(run_class.shape[0]):
                t = trans[q, run_class[r]]
                if t >= 0:
                    m = _meet(t, d + 1, ids, order, depth, n, cap)
                    if m < 0:
                        return cap, d
                    n = m
        later = False
        for p in range(npend[0]):
            if pend[p, 1] == d + 1:
                m = _meet(pend[p, 0], d + 1, ids, order, depth, n, cap)
                if m < 0:
                    return cap, d
                n = m
            elif pend[p, 1] > d + 1:
                later = True
        if n == hi and not later:
            return n, k  # no state past layer d: every later layer is empty
        lo = hi
        d += 1


@njit(cache=True, nogil=True)
def _encode(trans, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr, ret_state, rule_escape,
            run_start, run_class, k, n, ids, order, depth, code):
    """Write the canonical encoding of the ``k``-byte region from the states met by :func:`_region`
    (``order[:n]``, layers ``0..k`` complete) into ``code``; returns its length in words, or -1 when
    it does not fit."""
    w = 0
    limit = code.shape[0]
    for j in range(n):
        q = order[j]
        if w + 8 + 2 * (call_ptr[q + 1] - call_ptr[q]) + 2 * run_class.shape[0] >= limit:
            return -1
        esc = rule_escape[state_rule[q]]
        below = depth[j] < k
        code[w] = (1 if is_end[q] else 0) | (2 if esc else 0) | (4 if below else 0)
        w += 1
        code[w] = call_ptr[q + 1] - call_ptr[q]
        w += 1
        for e in range(call_ptr[q], call_ptr[q + 1]):
            code[w] = ids[rule_start[call_rule[e]]]
            code[w + 1] = ids[call_return[e]]
            w += 2
        if is_end[q] and not esc:
            r = state_rule[q]
            if w + 1 + ret_ptr[r + 1] - ret_ptr[r] >= limit:
                return -1
            code[w] = ret_ptr[r + 1] - ret_ptr[r]
            w += 1
            for e in range(ret_ptr[r], ret_ptr[r + 1]):
                code[w] = ids[ret_state[e]]
                w += 1
        if below:
            at = w
            w += 1
            runs = 0
            last = -2
            for r in range(run_class.shape[0]):
                t = trans[q, run_class[r]]
                tid = ids[t] if t >= 0 else -1
                if tid != last:
                    code[w] = run_start[r]
                    code[w + 1] = tid
                    w += 2
                    runs += 1
                    last = tid
            code[at] = runs
    return w


@njit(cache=True, nogil=True)
def _region_codes(trans, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr, ret_state,
                  rule_escape, minlen, run_start, run_class, state, ks, caps, ids, order, depth, code, spans, pend):
    """The encodings of the regions of ``state`` for each bound ``ks[i]`` (with cap ``caps[i]``),
    one after the other in ``code``: ``spans[i]`` is ``(start, end)``, or ``(0, -1)`` for a region
    past its cap or an encoding that does not fit.  One search serves every bound: the regions of
    smaller bounds are its first layers, numbered alike.  ``ids`` is all -1 on entry and on return."""
    kmax = 0
    cmax = 0
    for i in range(ks.shape[0]):
        kmax = max(kmax, ks[i])
        cmax = max(cmax, caps[i])
    n, last = _region(trans, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr, ret_state,
                      rule_escape, minlen, run_class, state, -1, kmax, cmax, ids, order, depth, pend)
    at = 0
    for i in range(ks.shape[0]):
        k = ks[i]
        size = 0
        while size < n and depth[size] <= k:
            size += 1
        w = -1
        if k <= last and size <= caps[i]:
            w = _encode(trans, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr, ret_state,
                        rule_escape, run_start, run_class, k, size, ids, order, depth, code[at:])
        if w < 0:
            spans[i, 0] = 0
            spans[i, 1] = -1
        else:
            spans[i, 0] = at
            spans[i, 1] = at + w
            at += w
    for j in range(n):
        ids[order[j]] = -1


def lookahead_keys(A: KernelAutomaton, minlen: np.ndarray, runs: tuple[np.ndarray, np.ndarray], name: str, state: int,
                   ks: np.ndarray, caps: np.ndarray, scratch: LookaheadScratch) -> list[bytes | None]:
    """For each bound ``ks[i]``, the digest of the ``ks[i]``-byte region of ``state`` over the bytes
    of ``runs`` (see the module docstring), or None when it has more than ``caps[i]`` states (or
    more words of encoding than the scratch holds).  ``runs`` is :func:`byte_runs` of the
    automaton's byte classes and a byte set that ``name`` stands for in every grammar; ``ks`` and
    ``caps`` are int64 arrays."""
    if not 0 < ks.shape[0] <= _MAX_BOUNDS or caps.shape != ks.shape:
        raise ValueError(f"lookahead_keys takes 1 to {_MAX_BOUNDS} bounds, each with a cap")
    spans = scratch.spans[:ks.shape[0]]
    _region_codes(A.trans, A.is_end, A.call_ptr, A.call_rule, A.call_return, A.rule_start, A.state_rule, A.ret_ptr,
                  A.ret_state, A.rule_escape, minlen, runs[0], runs[1], state, ks, caps, scratch.ids, scratch.order,
                  scratch.depth, scratch.code, spans, scratch.pend)
    out: list[bytes | None] = []
    for (a, b), k in zip(spans.tolist(), ks.tolist()):
        if b < 0:
            out.append(None)
            continue
        h = xxhash.xxh3_128(f"pda-lookahead-v1|{name}|{k}|".encode())
        h.update(scratch.code[a:b].tobytes())
        out.append(h.digest())
    return out


def lookahead_key(A: KernelAutomaton, minlen: np.ndarray, runs: tuple[np.ndarray, np.ndarray], name: str, state: int,
                  k: int, cap: int, scratch: LookaheadScratch) -> bytes | None:
    """The digest of the ``k``-byte region of ``state`` (:func:`lookahead_keys` of one bound)."""
    return lookahead_keys(A, minlen, runs, name, state, np.array([k], np.int64), np.array([cap], np.int64), scratch)[0]


@njit(cache=True, nogil=True)
def _frame_code(trans, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr, ret_state,
                rule_escape, minlen, run_start, run_class, state, ret, k, cap, ids, order, depth, code, pend):
    """The encoding of the ``k``-byte region met from ``state`` and ``ret`` (both layer 0), after a
    header word naming ``ret``'s number; its length in words, or -1 past ``cap`` states or when it
    does not fit.  ``ids`` is all -1 on entry and on return."""
    n, last = _region(trans, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr, ret_state,
                      rule_escape, minlen, run_class, state, ret, k, cap, ids, order, depth, pend)
    w = -1
    if last >= k:
        code[0] = ids[ret]
        w = _encode(trans, is_end, call_ptr, call_rule, call_return, rule_start, state_rule, ret_ptr, ret_state,
                    rule_escape, run_start, run_class, k, n, ids, order, depth, code[1:])
        if w >= 0:
            w += 1
    for j in range(n):
        ids[order[j]] = -1
    return w


def frame_key(A: KernelAutomaton, minlen: np.ndarray, runs: tuple[np.ndarray, np.ndarray], name: str, state: int,
              ret: int, k: int, cap: int, scratch: LookaheadScratch) -> bytes | None:
    """The digest of what a walk of at most ``k`` bytes of ``runs`` sees from ``state`` with the
    return state ``ret`` below its frame: the region met from both (layer 0), with ``ret``'s number.

    Equal digests mean equal walks from ``(state, [ret])`` with context expansion at ``ret``'s
    frame (:func:`pda.token_walk.walk_tokens` with a one-frame stack): the walk meets only states
    within ``k`` bytes of ``state`` or of ``ret`` (a pop from ``state``'s frame reaches ``ret``
    after some bytes), and the encoding names both.  Every block of a long counted repeat returns
    to its own place in the caller, yet far from the repeat's end these regions are alike: one key
    serves the tokens that cross a block's end at every block.  None past ``cap`` states."""
    n = _frame_code(A.trans, A.is_end, A.call_ptr, A.call_rule, A.call_return, A.rule_start, A.state_rule, A.ret_ptr,
                    A.ret_state, A.rule_escape, minlen, runs[0], runs[1], state, ret, k, cap, scratch.ids,
                    scratch.order, scratch.depth, scratch.code, scratch.pend)
    if n < 0:
        return None
    h = xxhash.xxh3_128(f"pda-lookahead-frame-v1|{name}|{k}|".encode())
    h.update(scratch.code[:n].tobytes())
    return h.digest()


@njit(cache=True, nogil=True)
def _min_lengths(rev_ptr, rev_src, is_end, call_src, call_rule, call_return, by_ret_ptr, by_ret, by_rule_ptr, by_rule,
                 start_ptr, start_rule):
    """Knuth's generalisation of Dijkstra's algorithm to grammars: ``dist[q]``, the fewest bytes
    from ``q`` to an end of its rule (a call ``q -R-> t`` costs ``minlen[R] + dist[t]``), settled
    in increasing order; a rule's ``minlen`` is ``dist`` of its start."""
    n = is_end.shape[0]
    dist = np.full(n, NO_STRING, np.int64)
    done = np.zeros(n, np.bool_)
    minlen = np.full(by_rule_ptr.shape[0] - 1, NO_STRING, np.int64)
    heap = [(np.int64(0), np.int64(0))]
    heap.pop()
    for q in range(n):
        if is_end[q]:
            dist[q] = 0
            heapq.heappush(heap, (np.int64(0), np.int64(q)))
    while len(heap):
        d, q = heapq.heappop(heap)
        if done[q]:
            continue
        done[q] = True
        for j in range(rev_ptr[q], rev_ptr[q + 1]):
            p = rev_src[j]
            if not done[p] and d + 1 < dist[p]:
                dist[p] = d + 1
                heapq.heappush(heap, (d + 1, np.int64(p)))
        for j in range(by_ret_ptr[q], by_ret_ptr[q + 1]):
            e = by_ret[j]
            p = call_src[e]
            w = minlen[call_rule[e]]
            if w < NO_STRING and not done[p] and d + w < dist[p]:
                dist[p] = d + w
                heapq.heappush(heap, (d + w, np.int64(p)))
        for j in range(start_ptr[q], start_ptr[q + 1]):
            r = start_rule[j]
            minlen[r] = d
            for i in range(by_rule_ptr[r], by_rule_ptr[r + 1]):
                e = by_rule[i]
                p = call_src[e]
                t = call_return[e]
                if done[t] and not done[p] and d + dist[t] < dist[p]:
                    dist[p] = d + dist[t]
                    heapq.heappush(heap, (d + dist[t], np.int64(p)))
    return minlen


@njit(cache=True, nogil=True)
def _reverse_bytes(trans):
    """CSR (ptr[S+1], sources) of the byte moves into each state, each source once."""
    n, c = trans.shape
    last = np.full(n, -1, np.int64)  # the last source counted for each target
    ptr = np.zeros(n + 1, np.int64)
    for q in range(n):
        for k in range(c):
            t = trans[q, k]
            if t >= 0 and last[t] != q:
                last[t] = q
                ptr[t + 1] += 1
    for t in range(n):
        ptr[t + 1] += ptr[t]
    fill = ptr[:-1].copy()
    src = np.empty(ptr[n], np.int64)
    last[:] = -1
    for q in range(n):
        for k in range(c):
            t = trans[q, k]
            if t >= 0 and last[t] != q:
                last[t] = q
                src[fill[t]] = q
                fill[t] += 1
    return ptr, src


def _csr(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(ptr[size + 1], positions of ``keys`` grouped by key)."""
    order = np.argsort(keys, kind="stable").astype(np.int64)
    ptr = np.zeros(size + 1, np.int64)
    ptr[1:] = np.cumsum(np.bincount(keys, minlength=size))
    return ptr, order


def rule_min_lengths(A: KernelAutomaton) -> np.ndarray:
    """int32 per rule: the fewest bytes a string it derives has (:data:`NO_STRING` when it derives
    none).  A call's return state is that many bytes past the call, which is what lets a region
    leave out the places a long callee returns to (:func:`_close`)."""
    n = A.trans.shape[0]
    rev_ptr, rev_src = _reverse_bytes(A.trans)
    call_src = np.repeat(np.arange(n, dtype=np.int64), np.diff(A.call_ptr))
    by_ret_ptr, by_ret = _csr(A.call_return.astype(np.int64), n)
    nrules = A.rule_start.shape[0]
    by_rule_ptr, by_rule = _csr(A.call_rule.astype(np.int64), nrules)
    start_ptr, start_rule = _csr(A.rule_start.astype(np.int64), n)
    got = _min_lengths(rev_ptr, rev_src, A.is_end, call_src, A.call_rule, A.call_return, by_ret_ptr, by_ret,
                       by_rule_ptr, by_rule, start_ptr, start_rule)
    return np.minimum(got, NO_STRING).astype(np.int32)


def pair_counts(second_starts: np.ndarray) -> np.ndarray:
    """int64[256, 256]: how many tokens start with each pair of bytes, from a sorted trie's
    ``second_starts`` (:class:`~pda.token_trie.TokenTrie`)."""
    starts = second_starts.reshape(256, 257).astype(np.int64)
    return starts[:, 1:] - starts[:, :-1]


@njit(cache=True, nogil=True)
def two_byte_weight(trans, byte_class, call_ptr, is_end, pairs, state):  # pragma: no cover - numba
    """How many tokens' first two bytes ``state`` reads by byte moves (``pairs`` from
    :func:`pair_counts`); the second bytes of a next state that calls a rule or may end all count.
    -1 when ``state`` itself calls or may end.  Tells a restricted alphabet, whose tokens go on
    past their first byte (``[0-9a-zA-Z_-]{1,255}``: 25,400 of DeepSeek's tokens), from a state
    where many tokens start but die at their second byte (a space, then a letter, after a comma:
    310-2,200).  The next state's bytes are looked up once per run of first bytes leading to it."""
    if call_ptr[state + 1] > call_ptr[state] or is_end[state]:
        return -1
    ok = np.zeros(256, np.bool_)
    last = -1
    total = 0
    for b1 in range(256):
        t = trans[state, byte_class[b1]]
        if t < 0:
            continue
        if t != last:
            last = t
            loose = call_ptr[t + 1] > call_ptr[t] or is_end[t]
            for b2 in range(256):
                ok[b2] = loose or trans[t, byte_class[b2]] >= 0
        for b2 in range(256):
            if ok[b2]:
                total += pairs[b1, b2]
    return total
