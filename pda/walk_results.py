"""Walk results: what a walk on a real stack decided, kept per (head, the frames it read).

A walk from a top reads only the stack frames it pops (:func:`pda.token_walk.walk_tokens` returns
how many), so its result holds on every stack that agrees with the walked one on those frames: the
mask cache's exactness argument, applied to one part of a mask.  :class:`WalkResults` keeps a
result under its *head* (what else the walk depended on: a state, say) and a key of the frames it
read, and looks a new stack up under each frame count a walk of that head has read, the shallowest
first.  A walk that read 3 frames then answers for every stack that agrees on those 3, however
deep other walks from the same head read (keyed by the deepest read, as the mask cache is, 43 of
the built-in JSON grammar's 104 deep walks were repeats).

Two users, one per compiled grammar each:

* **Top survivors** (``CompiledGrammar.top_survivors``, :meth:`pda.GrammarMatcher._top_survivors`).
  A configuration's mask is the union of its tops' parts, and the mask cache keys a row by every
  top's part at once (:mod:`pda.matcher`): a new combination of tops misses even when each top was
  met before, and each of its tops with uncertain tokens walks them on its stack again.  On a C
  grammar's expression states that walk takes about a millisecond, and a third of the walks on
  ``c_like`` repeated one done before.  Here the head is the state and the frames' key the return-
  state paths of that many top frames (:meth:`pda.stack_paths.StackPaths.signature`, bottoms marked -1), so a top
  over several stacks is keyed by all of their paths and its union is the same.
* **Deep parts** of split tops (:class:`pda.split_tops.SplitTops`): the head is the state, its top
  frames and whether the stack is deeper; the frames' key is the top frames the deep walk read.

Walks the byte walker had to finish (an overflow: no frame count) are not kept by the matcher.
Shared by matchers and threads: entries are stored whole (a race computes one twice), and the
table starts afresh before it would pass its byte bound (an entry larger than that is not kept).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["WalkResults", "MEMO_MAX_BYTES"]

MEMO_MAX_BYTES = 8 << 20  # default bound: the table starts afresh once its entries hold about this many bytes


class WalkResults:
    """(head, key of the frames read) -> a walk's result; the frame counts read per head."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = MEMO_MAX_BYTES if max_bytes is None else max_bytes
        self._table: dict[tuple[Hashable, Hashable], object] = {}
        self._reads: dict[Hashable, tuple[int, ...]] = {}  # head -> the frame counts its walks read, ascending
        self._bytes = 0
        self.hits = 0  # a race may lose a count

    @property
    def nbytes(self) -> int:
        """About how many bytes the entries hold."""
        return self._bytes

    def find(self, head: Hashable, frames: Callable[[int], Hashable | None]) -> tuple[Any, int] | None:
        """(result, frames read) of a kept walk from ``head`` on a stack whose key of its top ``d``
        frames is ``frames(d)`` (None: no key), or None when no such walk is kept."""
        table = self._table
        for read in self._reads.get(head, ()):
            key = frames(read)
            if key is None:
                continue
            got = table.get((head, key), _MISSING)
            if got is not _MISSING:
                self.hits += 1
                return got, read
        return None

    def store(self, head: Hashable, frames_key: Hashable, read: int, result: object, size: int) -> None:
        """Keep ``result`` (about ``size`` bytes) of a walk from ``head`` that read ``read`` frames,
        whose key is ``frames_key``."""
        if size > self.max_bytes:  # larger than the whole table: not kept
            return
        if self._bytes + size > self.max_bytes:
            self._table = {}
            self._reads = {}
            self._bytes = 0
        reads = self._reads.get(head, ())
        if read not in reads:  # replaced whole: a reader on another thread sees the old or the new tuple
            self._reads[head] = tuple(sorted((*reads, read)))
        self._table[(head, frames_key)] = result
        self._bytes += size


_MISSING = object()
