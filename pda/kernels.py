"""Small numba kernels: the byte walk through simple states, bitmask bits, token byte sets (the
token walk itself is :mod:`pda.token_walk`; the kernels around a group's walk are
:mod:`pda.group_kernels`).

Every kernel is ``@njit(cache=True, nogil=True)``; its ``py_func`` stays runnable, so the tests can
compare it with the reference and the package works under ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .bitmask import WORD_BITS

__all__ = ["run_simple", "run_simple_reference", "RUN_FAILED", "RUN_NEEDS_STACK", "RUN_END_OF_INPUT", "set_bits", "bits_at",
           "token_bytesets", "WORD_BITS"]

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


@njit(cache=True, nogil=True)
def set_bits(words, ids):
    """``words[id >> 5] |= 1 << (id & 31)`` for every id (an int32 bitmask row)."""
    for k in range(ids.shape[0]):
        t = ids[k]
        words[t >> 5] |= WORD_BITS[t & 31]


@njit(cache=True, nogil=True)
def bits_at(words, ids):
    """bool per id: is its bit set in the int32 bitmask row ``words``?"""
    out = np.empty(ids.shape[0], np.bool_)
    for k in range(ids.shape[0]):
        t = ids[k]
        out[k] = (words[t >> 5] & WORD_BITS[t & 31]) != 0
    return out


@njit(cache=True, nogil=True)
def token_bytesets(data, offsets, skip):  # type: ignore[no-untyped-def]
    """The set of byte values in each token ``data[offsets[i]:offsets[i+1]]`` past its first
    ``skip`` bytes, as 4 uint64 words."""
    n = offsets.shape[0] - 1
    out = np.zeros((n, 4), dtype=np.uint64)
    for i in range(n):
        for k in range(offsets[i] + skip, offsets[i + 1]):
            b = data[k]
            out[i, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return out
