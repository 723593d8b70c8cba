"""Loop bytes: the bytes that keep a thread of the token walk on its state.

:func:`pda.token_walk.walk_tokens` accepts a token without walking it when every byte of it leads
from a thread's state back to that state (a thread inside the frame on a "loop" state: a string
body, a comment, white space).  These kernels find those bytes, and whether every multi-byte UTF-8
character loops too (so a token made of whole characters stays on the state).
"""

from __future__ import annotations

from numba import njit

__all__ = ["loop_bytes", "utf8_loops", "utf8_loops_memo", "conts_reach"]


@njit(cache=True, nogil=True)
def loop_bytes(trans, class_bytes, s, loops):
    """Into ``loops``, the bytes that keep a thread on state ``s``; returns how many byte classes."""
    for k in range(4):
        loops[k] = 0
    n = 0
    for c in range(trans.shape[1]):
        if trans[s, c] == s:
            for k in range(4):
                loops[k] |= class_bytes[c, k]
            n += 1
    return n


@njit(cache=True, nogil=True)
def utf8_loops(trans, byte_class, s):
    """True when every multi-byte UTF-8 character leads from state ``s`` back to ``s``: then a
    whole-UTF-8 token whose ASCII bytes loop on ``s`` stays on ``s``."""
    for lead in range(0xC2, 0xF5):
        t = trans[s, byte_class[lead]]
        if t < 0:
            return False
        lo, hi = 0x80, 0xBF
        if lead == 0xE0:
            lo = 0xA0
        elif lead == 0xED:
            hi = 0x9F
        elif lead == 0xF0:
            lo = 0x90
        elif lead == 0xF4:
            hi = 0x8F
        ncont = 1 if lead < 0xE0 else 2 if lead < 0xF0 else 3
        if not conts_reach(trans, byte_class, t, ncont, s, lo, hi):
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def utf8_loops_memo(memo, trans, byte_class, s):
    """:func:`utf8_loops` of state ``s``, computed once per automaton into ``memo`` (int8, -1: not
    yet): about 5 us for a string body's state, which a walk of tokens that go in and out of a
    string (closing quotes) met once per token."""
    v = memo[s]
    if v < 0:
        v = 1 if utf8_loops(trans, byte_class, s) else 0
        memo[s] = v
    return v == 1


@njit(cache=True, nogil=True)
def conts_reach(trans, byte_class, t, k, s, lo, hi):
    """Every sequence of ``k`` (1 to 3) continuation bytes, the first in ``lo..hi``, leads from ``t``
    to ``s`` (each distinct state after a byte is followed once).  Written as loops, not recursion:
    numba's on-disk cache does not reload a self-recursive kernel safely."""
    prev1 = -1
    for b1 in range(lo, hi + 1):
        t1 = trans[t, byte_class[b1]]
        if t1 < 0:
            return False
        if t1 == prev1:
            continue
        prev1 = t1
        if k == 1:
            if t1 != s:
                return False
            continue
        prev2 = -1
        for b2 in range(0x80, 0xC0):
            t2 = trans[t1, byte_class[b2]]
            if t2 < 0:
                return False
            if t2 == prev2:
                continue
            prev2 = t2
            if k == 2:
                if t2 != s:
                    return False
                continue
            for b3 in range(0x80, 0xC0):
                if trans[t2, byte_class[b3]] != s:
                    return False
    return True
