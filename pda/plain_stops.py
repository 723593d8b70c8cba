"""The bytes that may follow plain characters from a state: a token that stops on another is rejected.

Inside a JSON string, about 1,300 of the 2,171 DeepSeek tokens that a state walks beyond its plain
run (:mod:`pda.plain_runs`, :func:`pda.token_groups.plain_split`) are plain characters followed by
a byte no string takes there: a control character (``"abc\\n"``), a continuation byte where a
character should start.  A walk reads each such token up to that byte, 20-40% of a string state's
first visit.  Whether it dies there depends only on that byte and on the states the plain
characters before it can reach:

* :func:`stop_bytes` gives, per token, the first byte of its first character that is not plain
  (-1 when it has none: every character plain, the last one maybe cut short); built once per
  tokenizer.
* :func:`stop_reads` gives, per state ``s``, a 256-bit set ``R[s]`` of the bytes that may be read
  after any number of plain characters from a frame holding ``s``, or every byte when it cannot
  tell.  It is the least solution of::

      R[s] = every byte                                   when s is an end state, has calls, or a
                                                          plain character from s passes one inside it
      R[s] = reads(s) | union of R[t] for t in after_one(s)   when every plain character has a path from s
      R[s] = reads(s)                                     when s reads no plain character's first byte
      R[s] = every byte                                   otherwise

  where ``reads(s)`` are the bytes with a move from ``s`` and ``after_one(s)`` the states one plain
  character leads to (:func:`pda.plain_runs.plain_moves`).

A token whose stop byte is outside ``R[s]`` is rejected from ``s`` on any stack: its plain
characters move along byte moves only, inside the frame (no end, no call on the way), to states
that none read the stop byte.  :func:`pda.group_kernels.split_group` rejects those without a walk.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .plain_runs import plain_moves, plain_shapes, plain_width, shape_ranges
from .token_trie import TokenTrie

__all__ = ["stop_bytes", "stop_reads"]


def stop_bytes(trie: TokenTrie) -> np.ndarray:
    """int16 per token of ``trie``: the first byte of its first character that is not plain, or -1
    when every character is plain (a token may end inside its last one)."""
    return _stop_bytes(trie.data, trie.offsets, *shape_ranges())  # type: ignore[no-any-return]


@njit(cache=True, nogil=True)
def _stop_bytes(data, offsets, lo, hi):  # pragma: no cover - numba
    n = offsets.shape[0] - 1
    out = np.full(n, -1, np.int16)
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        while a < b:
            width = plain_width(data, a, b, lo, hi, True)  # a token may end inside its last character
            if width == 0:
                out[i] = data[a]
                break
            a += width
    return out


def stop_reads(trans: np.ndarray, byte_class: np.ndarray, call_ptr: np.ndarray, is_end: np.ndarray, *,
               moves: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """uint64[S, 4]: ``R[s]`` of the module docstring, per state.  ``moves``:
    :func:`pda.plain_runs.plain_moves` of the automaton, when the caller has them already."""
    ptr, after, ok = plain_moves(trans, byte_class) if moves is None else moves
    class_bytes = np.zeros((trans.shape[1], 4), np.uint64)
    for b in range(256):
        class_bytes[byte_class[b], b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    lead = np.zeros(4, np.uint64)  # the first bytes of plain characters
    lo, hi = shape_ranges()
    for k in range(lo.shape[0]):
        for b in range(lo[k, 0], hi[k, 0] + 1):
            lead[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return _stop_reads(trans, call_ptr, is_end.astype(np.bool_), *plain_shapes(byte_class), class_bytes, lead,  # type: ignore[no-any-return]
                       ptr, after, ok)


@njit(cache=True, nogil=True)
def _stop_reads(trans, call_ptr, is_end, shape_ptr, pos_ptr, classes, class_bytes, lead, ptr, after,
                ok):  # pragma: no cover - numba
    S, C = trans.shape
    every = np.uint64(0xFFFFFFFFFFFFFFFF)
    out = np.zeros((S, 4), np.uint64)
    fixed = np.zeros(S, np.bool_)  # every byte, or reads(s) alone: no successor to take in
    stack_q = np.empty(64, np.int32)
    stack_p = np.empty(64, np.int32)
    for s in range(S):
        for c in range(C):
            if trans[s, c] >= 0:
                for w in range(4):
                    out[s, w] |= class_bytes[c, w]
        unknown = is_end[s] or call_ptr[s + 1] > call_ptr[s]
        if not unknown and not ok[s]:
            reads_lead = False
            for w in range(4):
                if out[s, w] & lead[w]:
                    reads_lead = True
            unknown = reads_lead
            fixed[s] = True
        if not unknown and ok[s]:  # a state inside a plain character: an end or a call there
            for k in range(shape_ptr.shape[0] - 1):
                last = shape_ptr[k + 1]
                stack_q[0] = s
                stack_p[0] = shape_ptr[k]
                top = 1
                while top > 0 and not unknown:
                    top -= 1
                    q, p = stack_q[top], stack_p[top]
                    if p == last:
                        continue
                    if p > shape_ptr[k] and (is_end[q] or call_ptr[q + 1] > call_ptr[q]):
                        unknown = True
                        break
                    for x in range(pos_ptr[p], pos_ptr[p + 1]):
                        t = trans[q, classes[x]]
                        if t >= 0:
                            if top == stack_q.shape[0]:
                                unknown = True
                                break
                            stack_q[top] = t
                            stack_p[top] = p + 1
                            top += 1
                if unknown:
                    break
        if unknown:
            for w in range(4):
                out[s, w] = every
            fixed[s] = True
    changed = True
    while changed:  # least fixed point, from reads(s) up
        changed = False
        for s in range(S - 1, -1, -1):  # chains are numbered forward: one sweep settles most
            if fixed[s]:
                continue
            for j in range(ptr[s], ptr[s + 1]):
                t = after[j]
                for w in range(4):
                    v = out[s, w] | out[t, w]
                    if v != out[s, w]:
                        out[s, w] = v
                        changed = True
    return out
