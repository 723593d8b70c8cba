"""Split tops: a top's uncertain tokens decided over its top frames, and the few deep ones below.

A top's uncertain tokens (:mod:`pda.precompute`) are decided by a walk on the real stack below it,
and the mask cache keys a row by every frame such a walk has ever read for that state
(:mod:`pda.matcher`).  A handful of tokens can read very deep: after a JSON value, ``}]}`` or a
closer followed by a newline and indentation pops one frame per byte, so the state's keys grow to
11 frames and every new nesting pattern of a document misses the cache (the built-in JSON
grammar's slowest fills, 100-270 µs each).  Most of the uncertain tokens read one or two frames.

So once a walk on a real stack has read more than :data:`SPLIT_DEPTH` frames for a state (the
matcher adds it to :attr:`SplitTops.states`), its tops over one linear stack with fewer uncertain
tokens than frame classes start at -- the matcher's *split* tops -- are decided in two parts:

* **Shallow**: one walk over only the top :data:`SPLIT_DEPTH` frames of the stack, where reaching
  below them makes a token *deep* instead of deciding it (the walk's escape at the frame bottom,
  :func:`pda.token_walk.walk_tokens` with every rule escaping).  Accepted and rejected tokens are
  so on every stack that has those top frames (a walk reads only the frames it pops).  The result
  -- the accepted ids and the deep tokens -- is kept per (state, top frames, whether the stack is
  deeper than that) in :class:`SplitTops`, shared by the matchers of a compiled grammar.
* **Deep**: the deep tokens (a few, often none) walked on the real stack
  (:func:`pda.token_walk.survivors_on_path`); their accepted ids are kept per (state, top frames,
  deeper) and the top frames *that* walk read, in a :class:`~pda.walk_results.WalkResults` (a new
  stack is looked up under each frame count a deep walk of that head has read).

The mask cache key of a split top is then its state, its top frames and its deep tokens' accepted
ids: a key of the *result*, which every nesting pattern with the same outcome shares.  A new deep
pattern costs a walk of its few deep tokens while the key is made, not a row: the row is a hit
when another stack had the same outcome.  The other states keep the cheaper key of every frame
read (most read none or one: a split key on every top made the 400-schema run 5% slower).

Exactness: a row is a function of its key -- the state's accepted tokens, the shallow part (a
function of the state and top frames) and the deep ids.  The matcher's tests compare the masks of
split tops with those of the one-call and Python paths at every step.
Measured (interleaved A/B, ``benchmarks/ab_trees.py --grammar``): the built-in JSON grammar's p99
106-151 -> 99-138 µs, ``c_like`` total fill time -11 to -23% (its p50 rose: more fills pay a deep
walk of 15-40 µs, fewer a row of milliseconds), 400 schemas within 1%.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .kernel_entry import forget_entry_points
from .token_walk import TOKEN_ACCEPTED, TOKEN_REJECTED, survivors_on_path, walk_tokens
from .walk_results import WalkResults
from .walk_workspace import thread_workspace

if TYPE_CHECKING:
    from .precompute import TokenClasses
    from .token_trie import TokenTrie

__all__ = ["SplitTops", "Shallow", "SPLIT_DEPTH", "top_frames"]

SPLIT_DEPTH = 2  # top frames a shallow walk reads (the built-in JSON grammar: 24 shallow misses at 2, 34 at 3)
# Each of the two tables starts afresh once its entries hold about this many bytes (a shallow entry
# holds up to a few thousand token ids; the built-in JSON grammar's 7 documents needed 34 entries).
MEMO_MAX_BYTES = 8 << 20


class Shallow(NamedTuple):
    """A split top's shallow part: the uncertain tokens the top frames accept (ids), and the deep
    ones (sorted-trie indices, ascending) that the real stack below decides."""

    accepted: np.ndarray
    deep: np.ndarray


class SplitTops:
    """The shallow and deep parts of split tops, per compiled grammar (shared by its matchers and
    threads: entries are computed outside any lock and stored whole; a race computes one twice)."""

    def __init__(self, classes: TokenClasses, trie: TokenTrie, max_token_length: int) -> None:
        self._classes = classes
        self._trie = trie
        self._max_len = max_token_length
        A = self._kernel = classes.kernel
        self._escaping = A._replace(rule_escape=np.ones_like(A.rule_escape))  # every frame bottom escapes
        weakref.finalize(self, forget_entry_points, id(self._escaping))
        # the shallow parts by (state, top frames, deeper), with about the bytes they hold (a race
        # may miscount a little); the deep ids by that head and the top frames their walk read
        self._shallow: dict[tuple[int, tuple[int, ...], bool], Shallow] = {}
        self._shallow_bytes = 0
        self._deep = WalkResults(MEMO_MAX_BYTES)
        # the states whose tops are split: those a walk on a real stack read more than SPLIT_DEPTH
        # frames for (the matcher adds them); the others' keys hold every frame read, which costs less
        self.states: set[int] = set()

    @staticmethod
    def top(path: np.ndarray) -> tuple[tuple[int, ...], bool]:
        """The top :data:`SPLIT_DEPTH` frames of a linear stack (top first) and whether it has more."""
        return tuple(path[-SPLIT_DEPTH:][::-1].tolist()), path.shape[0] > SPLIT_DEPTH

    def part(self, s: int, unc: np.ndarray, path: np.ndarray) -> tuple[int, tuple[int, ...], bool, tuple[int, ...]] | None:
        """The mask cache key part of split top ``s`` (uncertain tokens ``unc``) over the linear
        stack ``path`` (bottom first): its state, top frames, whether the stack is deeper, and the
        ids its deep tokens accept there; None when a deep walk overflowed (not cacheable)."""
        frames, deeper = self.top(path)
        ids = self.deep_ids(s, self.shallow(s, unc, path, frames, deeper), path, frames, deeper)
        return None if ids is None else (s, frames, deeper, ids)

    def shallow(self, s: int, unc: np.ndarray, path: np.ndarray, frames: tuple[int, ...], deeper: bool) -> Shallow:
        """The shallow part of top ``s`` (uncertain tokens ``unc``) over ``path`` (bottom first),
        whose :meth:`top` is ``frames, deeper``."""
        got = self._shallow.get((s, frames, deeper))
        if got is None:
            got = self._walk_shallow(s, unc, path, deeper)
            self._store_shallow((s, frames, deeper), got, got.accepted.nbytes + got.deep.nbytes + 8 * len(frames) + 300)
        return got

    @property
    def table_bytes(self) -> tuple[int, int]:
        """About how many bytes the shallow and the deep entries hold."""
        return self._shallow_bytes, self._deep.nbytes

    def _store_shallow(self, key: tuple[int, tuple[int, ...], bool], value: Shallow, size: int) -> None:
        """Keep a shallow part; the table starts afresh first when its entries would pass
        :data:`MEMO_MAX_BYTES` (a lookup reads the table once, so a reset by another thread never
        breaks it), and an entry larger than that is not kept."""
        if size > MEMO_MAX_BYTES:
            return
        if self._shallow_bytes + size > MEMO_MAX_BYTES:
            self._shallow = {}
            self._shallow_bytes = 0
        self._shallow[key] = value
        self._shallow_bytes += size

    def _walk_shallow(self, s: int, unc: np.ndarray, path: np.ndarray, deeper: bool) -> Shallow:
        out = np.empty(unc.shape[0], dtype=np.int8)
        ws = thread_workspace(self._max_len)
        if deeper:  # below the top frames every path escapes: the token is deep
            walk_tokens(self._escaping, self._trie, unc, s, np.ascontiguousarray(path[-SPLIT_DEPTH:]), True, out, ws)
        else:  # the whole stack: exact (an overflow is decided on the real stack, as a deep token)
            walk_tokens(self._kernel, self._trie, unc, s, path, False, out, ws)
        accepted = self._trie.order[unc[out == TOKEN_ACCEPTED]].astype(np.int32)
        deep = unc[(out != TOKEN_ACCEPTED) & (out != TOKEN_REJECTED)]
        return Shallow(accepted, np.ascontiguousarray(deep))

    def deep_ids(self, s: int, shallow: Shallow, path: np.ndarray, frames: tuple[int, ...],
                 deeper: bool) -> tuple[int, ...] | None:
        """The ids of ``shallow``'s deep tokens that the real stack ``path`` accepts (ascending);
        None when the walk overflowed (the caller decides them another way, uncached)."""
        if not shallow.deep.shape[0]:
            return ()
        head = (s, frames, deeper)
        known = self._deep.find(head, lambda read: top_frames(path, read))
        if known is not None:
            return known[0]  # type: ignore[no-any-return]
        classes = self._classes
        ok = np.zeros(shallow.deep.shape[0], dtype=np.bool_)
        ids, read, overflow = survivors_on_path(self._kernel, self._trie, shallow.deep, s, path,
                                                thread_workspace(self._max_len), classes.plain_runs,
                                                classes.plain_to_end, classes.plain_chars(), ok)
        got = None if overflow else tuple(sorted(ids.tolist()))
        top = top_frames(path, read)
        self._deep.store(head, top, read, got, 8 * (len(got or ()) + len(frames) + len(top)) + 300)
        return got


def top_frames(path: np.ndarray, depth: int) -> tuple[int, ...]:
    """The top ``depth`` frames of a linear stack (bottom first), top first; a stack with fewer
    ends in -1, the bottom."""
    top = path[::-1][:depth].tolist()
    return tuple(top) if len(top) == depth else (*top, -1)
