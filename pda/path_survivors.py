"""Uncertain tokens decided on one linear stack, in one kernel call: :func:`survivors_on_path`.

A state's uncertain tokens (those that leave its frame, :mod:`pda.precompute`) are decided at run
time on the matcher's real stack.  For the usual case, one linear stack and fewer tokens than frame
classes start at, this does what ``GrammarMatcher._survivors`` does in Python (its reference):
the plain run over the stack first (:func:`pda.plain_runs.stack_run`: tokens of plain string
characters that surely stay within the frames), then one token walk of the rest
(:func:`pda.token_walk.walk_tokens`' kernel) over the stack.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .kernel_entry import run_direct
from .kernel_refs import KernelAutomaton
from .plain_runs import RUN_CAP, mark_within, stack_run
from .token_walk import TOKEN_ACCEPTED, TOKEN_OVERFLOW, _walk_tokens
from .walk_workspace import Workspace

__all__ = ["survivors_on_path"]


def survivors_on_path(A: KernelAutomaton, T: Any, unc: np.ndarray, start_state: int, path: np.ndarray, ws: Workspace,
                      run: np.ndarray, to_end: np.ndarray, chars: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """The tokens ``unc`` (sorted-trie indices, ascending) that a top ``start_state`` accepts over
    one linear stack ``path`` (return states, bottom first), in one kernel call
    (:func:`_survivors_on_path`): the plain run over the stack first (:func:`pda.plain_runs.stack_run`,
    with ``run``, ``to_end`` and the tokens' plain characters ``chars``), then a walk of the rest.
    Returns their ids (``T.order``), how many frames were read, and whether a walk overflowed: then
    ``ok`` (zeros, one per token) holds what was decided, and the caller decides the others."""
    if not ok.flags.c_contiguous:  # the entry point reads arrays as compiled for them: C-contiguous
        raise ValueError("survivors_on_path: ok must be C-contiguous (it is written in place)")
    unc, path = np.ascontiguousarray(unc), np.ascontiguousarray(path)
    ids, read, overflow = run_direct(_survivors_on_path, "survivors", A, T, ws,
                                      (A, T, unc, start_state, path, ws, run, to_end, chars, ok))
    return ids, int(read), bool(overflow)


@njit(cache=True, nogil=True)
def _survivors_on_path(A, T, unc, start_state, path, ws, run, to_end, chars, ok):
    """:func:`survivors_on_path`: ``GrammarMatcher._survivors`` for one linear stack and fewer
    uncertain tokens than frame classes start at, in one call (that method, in Python, is its
    reference: it took about 40 µs of bookkeeping around a walk of 10-20 µs)."""
    n = unc.shape[0]
    within, frames = stack_run(run, to_end, start_state, path, RUN_CAP)  # plain characters surely consumed
    if frames > 0:
        mark_within(chars, unc, within, ok)
    m = 0
    for j in range(n):
        if not ok[j]:
            m += 1
    read = frames
    overflow = False
    if m > 0:
        cand = np.empty(m, np.int32)
        pos = np.empty(m, np.int64)
        k = 0
        for j in range(n):
            if not ok[j]:
                cand[k] = unc[j]
                pos[k] = j
                k += 1
        codes = np.empty(m, np.int8)
        r, _ = _walk_tokens(A, T, cand, start_state, path, False, codes, ws, np.zeros(0, np.int32))
        read = max(read, r)
        for k in range(m):
            if codes[k] == TOKEN_ACCEPTED:
                ok[pos[k]] = True
            elif codes[k] == TOKEN_OVERFLOW:
                overflow = True
    count = 0
    for j in range(n):
        if ok[j]:
            count += 1
    ids = np.empty(count, np.int32)
    k = 0
    order = T.order
    for j in range(n):
        if ok[j]:
            ids[k] = order[unc[j]]
            k += 1
    return ids, read, overflow
