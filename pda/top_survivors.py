"""Top survivors: the uncertain tokens a top's real stack accepts, kept per (state, frames read).

A configuration's mask is the union of its tops' parts, and the mask cache keys a row by every
top's part at once (:mod:`pda.matcher`): a new combination of tops misses even when each top was
met before, and each of its tops with uncertain tokens walks them on its stack again
(``GrammarMatcher._survivors``).  On a C grammar's expression states that walk takes about a
millisecond, and a third of the walks on ``c_like`` repeated one done before.

A walk's result holds on every stack that agrees with the walked one on the frames it read (the
mask cache's exactness argument, per top): so the ids are stored under the state and the paths
of that many top frames (``GrammarMatcher._signature``, bottoms marked -1), and a new top is looked
up under each frame count a walk from its state has read -- the shallowest first, as
:class:`pda.split_tops.SplitTops` does for its deep parts.  A top over several stacks is keyed by
all of their paths, so its union is the same.  Walks the byte walker had to finish (an overflow:
no frame count) are not kept.

Shared by the matchers of a compiled grammar and their threads: entries are stored whole (a race
computes one twice), and the table starts afresh before it would pass :data:`MEMO_MAX_BYTES`
(an entry larger than that is not kept).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["TopSurvivors", "MEMO_MAX_BYTES"]

MEMO_MAX_BYTES = 8 << 20  # the table starts afresh once its entries hold about this many bytes


class TopSurvivors:
    """(state, top-frame paths) -> the ids its uncertain tokens' walk accepted, for one grammar."""

    def __init__(self) -> None:
        self._table: dict[tuple[int, Any], np.ndarray] = {}
        self._reads: dict[int, tuple[int, ...]] = {}  # state -> the frame counts its walks read, ascending
        self._bytes = 0
        self.hits = 0  # a race may lose a count

    def find(self, s: int, signature: Callable[[int], Any]) -> tuple[np.ndarray, int] | None:
        """The ids and frames read of a walk from ``s`` on a stack whose top paths of each depth
        ``d`` are ``signature(d)`` (None: too many paths), or None when no such walk is kept."""
        table = self._table
        for read in self._reads.get(s, ()):
            sig = signature(read)
            if sig is None:
                continue
            ids = table.get((s, sig))
            if ids is not None:
                self.hits += 1
                return ids, read
        return None

    def store(self, s: int, sig: Any, read: int, ids: np.ndarray) -> None:
        """Keep the ids a walk from ``s`` accepted on a stack whose top ``read`` frames' paths are ``sig``."""
        size = ids.nbytes + 16 * read * max(1, len(sig)) + 200
        if size > MEMO_MAX_BYTES:  # larger than the whole table: not kept
            return
        if self._bytes + size > MEMO_MAX_BYTES:
            self._table = {}
            self._reads = {}
            self._bytes = 0
        reads = self._reads.get(s, ())
        if read not in reads:  # replaced whole: a reader on another thread sees the old or the new tuple
            self._reads[s] = tuple(sorted((*reads, read)))
        self._table[(s, sig)] = ids
        self._bytes += size
