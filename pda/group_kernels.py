"""The kernels around one token group's walk, so a group's classes take three kernel calls.

:meth:`pda.precompute.TokenClasses._walk` classifies the tokens of one group
(:mod:`pda.token_groups`) from a bare frame, when a plain run (or an escape start) decides some
of them before the walk (otherwise one listing walk does it all):

1. :func:`split_group` sorts the group's tokens before any walk (:mod:`pda.plain_runs`): a token of
   at most ``run`` plain characters, or of fewer and the first bytes of one more (or one the
   caller already knows is accepted) is *accepted* and
   its bit is set in a bitmask row of token ids; a longer plain token is *uncertain* or *rejected*
   as ``longer`` says (:data:`LONGER_UNCERTAIN`, :data:`LONGER_REJECTED`), or walked; a token
   whose plain characters stop on a byte the state cannot read after them is *rejected*
   (:mod:`pda.plain_stops`); the rest are the tokens to walk.
2. :func:`pda.token_walk.walk_tokens` walks those.
3. :func:`finish_group` adds the walk's ACCEPTED tokens to the row and merges its UNCERTAIN (and
   OVERFLOW) tokens with the split's, mapped to the whole trie's indices.

The row holds the accepted tokens however many there are: a group of 90k word-like tokens inside a
string accepts nearly all of them, and ids gathered, sorted and set one by one in Python cost
several times the bits set here.  :func:`bits_to_ids` lists a row's ids when they are few enough to
be kept as a list.

When nothing is decided before the walk, :func:`pda.token_walk.walk_listing` lists only the tokens it
does not reject, and :func:`listing_classes` turns that listing into the classes in one call.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .bitmask import WORD_BITS
from .token_walk import TOKEN_ACCEPTED, TOKEN_REJECTED

__all__ = ["split_group", "finish_group", "bits_to_ids", "listing_classes", "NO_TOKENS", "LONGER_WALKED", "LONGER_UNCERTAIN",
           "LONGER_REJECTED"]

NO_TOKENS = np.zeros(0, dtype=np.int32)  # an empty index array (no uncertain tokens, no mapping)
# split_group's ``longer``: what becomes of a plain token longer than the run
LONGER_WALKED, LONGER_UNCERTAIN, LONGER_REJECTED = 0, 1, 2
# bit b of a word holding only that bit, times this de Bruijn constant, has b's index in its top 5 bits
_DE_BRUIJN = np.array([0, 1, 28, 2, 29, 14, 24, 3, 30, 22, 20, 15, 25, 17, 4, 8, 31, 27, 13, 23, 21, 19, 16, 7, 26,
                       12, 18, 6, 11, 5, 10, 9], dtype=np.int32)
# listing_classes sorts at most this many accepted ids; more are set as bits and read back in order
# (numba's sort took 25 us for 1,700 ids, a row's bits 4 us)
_SORT_IDS = 64


@njit(cache=True, nogil=True)
def split_group(chars, prefixes, stops, reads, run, longer, pre, cand, order, words):  # pragma: no cover - numba
    """Sort the tokens ``0..n-1`` of a group before its walk.

    ``chars`` are their :func:`pda.plain_runs.plain_char_counts` and ``prefixes`` their
    :func:`pda.plain_runs.plain_prefix_counts` (a token of at most ``run`` is accepted: one that
    ends inside a character is a prefix of a sequence the run consumes); a token whose
    :func:`pda.plain_stops.stop_bytes` (``stops``) is not in the 256-bit set ``reads``
    (:func:`pda.plain_stops.stop_reads` of the state) is *rejected*.  ``pre`` (``n`` entries, or none)
    marks tokens known to be accepted, ``cand`` is ``0..n-1`` and ``order`` the group trie's token
    ids; ``longer`` says what a plain token of more than ``run`` characters is.  Returns
    ``(walk, row, accepted, uncertain)``: the tokens to walk (ascending), an int32
    bitmask row of ``words`` words with the accepted tokens' ids, how many those are, and the
    uncertain tokens (ascending).  When fewer than half of the tokens are decided here the split is
    dropped: a walk over the whole group is faster than over most of it (it skips dead prefixes
    through the trie's tables and takes the looping-thread shortcut), so every token is walked."""
    n = chars.shape[0]
    row = np.zeros(words, np.int32)
    has_pre = pre.shape[0] == n
    if run <= 0 and not has_pre:
        return cand, row, 0, np.empty(0, np.int32)
    walk = np.empty(n, np.int32)
    unc = np.empty(n, np.int32)
    na = nu = nw = nr = 0
    for i in range(n):
        c = chars[i]
        if (has_pre and pre[i]) or (0 <= prefixes[i] <= run):
            t = order[i]
            row[t >> 5] |= WORD_BITS[t & 31]
            na += 1
        elif longer == LONGER_UNCERTAIN and c > run:
            unc[nu] = i
            nu += 1
        elif longer == LONGER_REJECTED and c > run:
            nr += 1
        elif stops[i] >= 0 and (reads[stops[i] >> 6] & (np.uint64(1) << np.uint64(stops[i] & 63))) == 0:
            nr += 1
        else:
            walk[nw] = i
            nw += 1
    if (na + nu + nr) * 2 < n:
        row[:] = 0
        return cand, row, 0, np.empty(0, np.int32)
    return walk[:nw].copy(), row, na, unc[:nu].copy()


@njit(cache=True, nogil=True, inline="always")
def _block_is_rejected(words, block):
    w = 8 * block
    return (words[w] | words[w + 1] | words[w + 2] | words[w + 3] | words[w + 4] | words[w + 5] | words[w + 6]
            | words[w + 7]) == 0


@njit(cache=True, nogil=True, inline="always")
def _take(out, cand, order, lo, hi, row, na, unc, nu):
    # the codes out[lo:hi]: accepted ids into row, the other non-rejected trie indices into unc
    for j in range(lo, hi):
        code = out[j]
        if code == TOKEN_ACCEPTED:
            t = order[cand[j]]
            row[t >> 5] |= WORD_BITS[t & 31]
            na += 1
        elif code != TOKEN_REJECTED:
            unc[nu] = cand[j]
            nu += 1
    return na, nu


@njit(cache=True, nogil=True)
def finish_group(out, cand, order, row, accepted, split_unc, to_main):  # pragma: no cover - numba
    """Add a walk's result ``out`` (TOKEN_* codes of the tokens ``cand`` of a group whose trie's ids
    are ``order``) to the split's ``row`` (``accepted`` ids set in it) and ``split_unc``.

    Returns ``(accepted, uncertain)``: the number of ids now in ``row`` (which it updates), and every
    uncertain or overflowing token, ascending, as an index of the whole trie (``to_main[i]`` for
    group index ``i``; ``to_main`` empty: the group is the whole trie).

    REJECTED is 0 and a walk over a whole group rejects nearly all of it, so the codes are read 64
    at a time (eight words OR-ed together) and only a block with some other code is read code by
    code: about 5 µs for 128k codes, where a test per code took 25 µs."""
    n = out.shape[0]
    unc = np.empty(n, np.int32)
    nu = 0
    full = n - n % 64
    words = out[:full].view(np.uint64)
    for block in range(full // 64):
        if not _block_is_rejected(words, block):
            accepted, nu = _take(out, cand, order, 64 * block, 64 * block + 64, row, accepted, unc, nu)
    accepted, nu = _take(out, cand, order, full, n, row, accepted, unc, nu)  # the last, partial block
    # merge two ascending lists of distinct tokens (a token is in one of them)
    merged = np.empty(nu + split_unc.shape[0], np.int32)
    i = j = 0
    for k in range(merged.shape[0]):
        if j >= split_unc.shape[0] or (i < nu and unc[i] < split_unc[j]):
            merged[k] = unc[i]
            i += 1
        else:
            merged[k] = split_unc[j]
            j += 1
    if to_main.shape[0]:
        for k in range(merged.shape[0]):
            merged[k] = to_main[merged[k]]
    return accepted, merged


@njit(cache=True, nogil=True)
def bits_to_ids(row, count):  # pragma: no cover - numba
    """The ``count`` ids whose bits are set in the int32 bitmask ``row``, ascending (a set bit at a
    time: its index from a de Bruijn multiply, not a test of all 32)."""
    ids = np.empty(count, np.int32)
    k = 0
    for w in range(row.shape[0]):
        x = np.int64(row[w]) & 0xFFFFFFFF
        while x != 0 and k < count:
            low = x & -x
            ids[k] = w * 32 + _DE_BRUIJN[((low * 0x077CB531) & 0xFFFFFFFF) >> 27]
            k += 1
            x ^= low
    return ids[:k]


@njit(cache=True, nogil=True)
def listing_classes(out, found, n, order, to_main, words):  # pragma: no cover - numba
    """The classes of a listing walk (:func:`pda.token_walk.walk_listing`): ``out[:n]`` are the
    codes of the listed tokens, ``found[:n]`` their ascending positions in the group's trie, whose
    token ids are ``order`` (``to_main`` maps positions to the whole trie's; empty: the same trie).

    Returns ``(bits, accepted, uncertain)``: the accepted tokens as an int32 bitmask row of
    ``words`` words when there are more of them than words (``bits`` True), else as ascending ids
    (the smaller of the two, as :class:`pda.state_classes.StateClasses` keeps them); every other listed
    token (UNCERTAIN or OVERFLOW, decided on the real stack) as ascending whole-trie indices."""
    nacc = 0
    for i in range(n):
        if out[i] == TOKEN_ACCEPTED:
            nacc += 1
    unc = np.empty(n - nacc, np.int32)
    k = 0
    for i in range(n):
        if out[i] != TOKEN_ACCEPTED:
            unc[k] = to_main[found[i]] if to_main.shape[0] else found[i]
            k += 1
    bits = nacc > words
    if not bits and nacc <= _SORT_IDS:  # a few ids: sorted in place
        acc = np.empty(nacc, np.int32)
        k = 0
        for i in range(n):
            if out[i] == TOKEN_ACCEPTED:
                acc[k] = order[found[i]]
                k += 1
        acc.sort()
        return bits, acc, unc
    row = np.zeros(words, np.int32)  # more: set as bits, then read back in order if kept as ids
    for i in range(n):
        if out[i] == TOKEN_ACCEPTED:
            t = order[found[i]]
            row[t >> 5] |= WORD_BITS[t & 31]
    return bits, row if bits else bits_to_ids(row, nacc), unc
