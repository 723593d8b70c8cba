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
* **Deep**: the deep tokens (a few, often none), decided on the real stack one of two ways.
  *By levels*, for a state whose levels were all walked when it was split (below): level ``k``
  walks the tokens still deep at level ``k - 1`` over the top ``k`` frames, with the same escape
  below them (or over the whole stack, exactly, once it has no more frames), kept per (state, top
  ``k`` frames, deeper), which also determine its tokens.  Most deep tokens die within a frame or
  two of their first closer that does not match, so the levels a stack needs stop well above its
  bottom.  *By one walk* for the other states: the deep tokens walked on the real stack
  (:func:`pda.path_survivors.survivors_on_path`), kept per (state, top frames, deeper) and the top
  frames that walk read (:class:`~pda.walk_results.WalkResults`).  Such a walk reads as deep as
  the longest run of matching closers, so every new nesting pattern walks again (60-260 µs in a
  fill with cold caches, the built-in JSON grammar's slowest fills); levels walked lazily instead
  made C-like and SQL fills 7-10% slower in all (a walk per level, not per pattern).

The mask cache key of a split top is then its state, its top frames and its deep tokens' accepted
ids: a key of the *result*, which every nesting pattern with the same outcome shares: the row is
a hit when another stack had the same outcome.  The other states keep the cheaper key of every
frame read (most read none or one: a split key on every top made the 400-schema run 5% slower).

**Parts ahead.**  The heads a state can meet are few where its rule is called from few places:
the top frame is a return site of the state's rule, the next one a return site of that frame's
rule (``ret_ptr``/``ret_state``), and a stack can end only below a frame of the start rule
(:meth:`SplitTops.possible_heads`).  So when a state of a recursive rule is split
(:meth:`SplitTops.mark_split`; a grammar whose nesting is bounded, as most JSON Schemas, meets few
stack patterns, and its 400-schema run spent 241 ms walking ahead for 1.1% more fill time) and it
has few heads (:data:`AHEAD_HEADS`, :data:`AHEAD_TOKENS`), the fill that splits it walks their
shallow parts (each new head met in a later fill walked there, 120-220 µs with cold caches), then
the deeper levels below every frame the rules allow; when they all fit in
:data:`AHEAD_LEVEL_WALKS` walks (the built-in JSON grammar's split states need 4-31, 0.2-2 ms
in that fill), the state is *levelled* and no later fill walks a deep token of it.  A tree that
branches wider than :data:`AHEAD_HEADS` or whose tokens two frames in a row leave undecided is
given up early (SQL's: 0.1-0.5 ms in its fill), and its state keeps the walk on the real stack.
On the background thread instead, the walks competed with the fills for the GIL and the cores: a
CPU-bound loop of fills got 20-46% slower in all.

Exactness: a row is a function of its key -- the state's accepted tokens, the shallow part (a
function of the state and top frames) and the deep ids.  The matcher's tests compare the masks of
split tops with those of the one-call and Python paths at every step.
Measured (interleaved A/B, ``benchmarks/ab_trees.py --grammar``): the built-in JSON grammar's p99
106-151 -> 99-138 µs, ``c_like`` total fill time -11 to -23% (its p50 rose: more fills pay a deep
walk of 15-40 µs, fewer a row of milliseconds), 400 schemas within 1%.  The parts ahead and the
levels: the built-in JSON grammar's p99 over llguidance's 1.11-1.30x -> 0.79-0.89x
(``bench_masks.py --only json-builtin``, three runs each).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .kernel_entry import forget_entry_points
from .path_survivors import survivors_on_path
from .token_walk import TOKEN_ACCEPTED, TOKEN_REJECTED, walk_tokens
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
# A split state's shallow parts are walked ahead when it can meet at most AHEAD_HEADS heads and they
# walk at most AHEAD_TOKENS tokens in all (the built-in JSON grammar: 1-3 heads of up to 192 tokens;
# C-like states with 5-7 heads took 350-480 us each and made its fills 4-6% slower in all).
AHEAD_HEADS = 3
AHEAD_TOKENS = 1024
AHEAD_LEVEL_WALKS = 40  # walks of the deeper levels' parts when a state is split, at most


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
        # the shallow parts by (state, top frames, deeper); the deeper levels' parts by (state,
        # their top frames, deeper)
        self._shallow = _Parts()
        self._levels = _Parts()
        # the deep ids of the states not levelled, by that head and the top frames their walk read
        self._deep = WalkResults(MEMO_MAX_BYTES)
        # the states whose tops are split: those a walk on a real stack read more than SPLIT_DEPTH
        # frames for (the matcher adds them); the others' keys hold every frame read, which costs less
        self.states: set[int] = set()
        # the split states whose deeper levels were all walked when they were split: their deep
        # tokens are decided a frame at a time (the others' by one walk on the real stack)
        self.levelled: set[int] = set()
        self._recursion: dict[int, bool] = {}  # rule -> whether it can be below itself (_recursive)

    def mark_split(self, s: int) -> None:
        """Split state ``s`` from now on (a walk on a real stack read more than :data:`SPLIT_DEPTH`
        frames for it).  When its rule is recursive (:meth:`_recursive`: a grammar whose nesting is
        bounded meets few stack patterns, which the walks' memo holds) and the heads it can meet are
        at most :data:`AHEAD_HEADS` and walk at most
        :data:`AHEAD_TOKENS` tokens, walk their shallow parts now, then their deeper levels; when
        those are all walked within :data:`AHEAD_LEVEL_WALKS` walks, the state's deep tokens are
        decided by levels from now on (:attr:`levelled`)."""
        if s in self.states:
            return
        heads = self.possible_heads(s) if self._recursive(int(self._kernel.state_rule[s])) else None
        unc = self._classes.get(s).uncertain
        if heads and len(heads) * unc.shape[0] <= AHEAD_TOKENS:
            # (stack of k frames, the tokens deep below them, how many frames in a row decided none)
            below: list[tuple[np.ndarray, np.ndarray, int]] = []
            for path, deeper in heads:
                part = self.shallow(s, unc, path, self.top(path)[0], deeper)
                if deeper and part.deep.shape[0]:
                    below.append((path, part.deep, 0))
            if self._walk_levels_ahead(s, below):
                self.levelled.add(s)
        self.states.add(s)

    def _walk_levels_ahead(self, s: int, below: list[tuple[np.ndarray, np.ndarray, int]]) -> bool:
        """Walk the deeper levels' parts of split state ``s`` a frame at a time, for every frame the
        rules allow below each stack of ``below`` whose deep tokens are not all decided; True when
        they were all walked within :data:`AHEAD_LEVEL_WALKS` walks.  False as soon as a frame has
        more than :data:`AHEAD_HEADS` possible frames below it, or two frames in a row decide none
        of the tokens deep above them (tokens that read on whatever the frames: SQL's trees were
        deep; the built-in JSON grammar has two frames a nesting)."""
        state_rule = self._kernel.state_rule
        walks = 0
        while below:
            if walks >= AHEAD_LEVEL_WALKS:
                return False
            path, deep, stale = below.pop(0)
            rule = int(state_rule[path[0]])
            callers = self._return_sites(rule)
            if len(callers) > AHEAD_HEADS:  # a tree this wide will not fit
                return False
            for f in callers:
                longer = np.concatenate((np.array([f], dtype=np.int32), path))
                r = int(state_rule[f])
                for deeper in (True, False):
                    if deeper and not self._return_sites(r) or not deeper and r != 0:
                        continue  # no frame can be below f / the stack cannot end at f
                    part = self._level_part(s, deep, longer, longer.shape[0], deeper)
                    walks += 1
                    if deeper and part.deep.shape[0]:
                        idle = stale + 1 if part.deep.shape[0] == deep.shape[0] else 0
                        if idle > 1:
                            return False  # two frames decided none of them: tokens that read on, a tree too deep
                        below.append((longer, part.deep, idle))
        return True

    def _return_sites(self, rule: int) -> list[int]:
        """The states ``rule``'s callers continue at: the frames a stack can hold below its states."""
        A = self._kernel
        return A.ret_state[A.ret_ptr[rule]:A.ret_ptr[rule + 1]].tolist()  # type: ignore[no-any-return]

    def _recursive(self, rule: int) -> bool:
        """Whether ``rule`` can be below itself on a stack (its callers' rules, and theirs, reach
        it): then its stacks nest without bound and bring new patterns to the end of a document."""
        got = self._recursion.get(rule)
        if got is None:
            state_rule = self._kernel.state_rule
            seen: set[int] = set()
            todo = [rule]
            got = False
            while todo and not got:
                r = todo.pop()
                for f in self._return_sites(r):
                    caller = int(state_rule[f])
                    got = got or caller == rule
                    if caller not in seen:
                        seen.add(caller)
                        todo.append(caller)
            self._recursion[rule] = got
        return got

    def possible_heads(self, s: int) -> list[tuple[np.ndarray, bool]] | None:
        """The (stack, deeper) pairs whose shallow part a split top ``s`` can need: its top
        :data:`SPLIT_DEPTH` frames as the return sites of the rules allow (``deeper``: more frames
        below), and the shorter whole stacks, whose bottom frame is one of the start rule's (rule
        0).  Stacks are bottom first, as :meth:`shallow` takes them.  None: more than
        :data:`AHEAD_HEADS`."""
        state_rule = self._kernel.state_rule
        out: list[tuple[np.ndarray, bool]] = []
        todo: list[tuple[tuple[int, ...], int]] = [((), int(state_rule[s]))]  # (frames top first, their last rule)
        while todo:
            frames, rule = todo.pop()
            callers = self._return_sites(rule)
            if rule == 0:  # the stack can end here
                out.append((np.array(frames[::-1], dtype=np.int32), False))
            if len(frames) == SPLIT_DEPTH:
                if callers:
                    out.append((np.array(frames[::-1], dtype=np.int32), True))
            else:
                todo.extend(((*frames, f), int(state_rule[f])) for f in callers)
            if len(out) + len(todo) > AHEAD_HEADS:
                return None
        return out

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
            got = self._walk_part(s, unc, path, SPLIT_DEPTH, deeper)
            self._shallow.store((s, frames, deeper), got)
        return got

    @property
    def table_bytes(self) -> tuple[int, int]:
        """About how many bytes the shallow and the deep parts (levels and walks) hold."""
        return self._shallow.nbytes, self._levels.nbytes + self._deep.nbytes

    def _walk_part(self, s: int, tokens: np.ndarray, path: np.ndarray, depth: int, deeper: bool) -> Shallow:
        """Decide ``tokens`` (sorted-trie indices, ascending) from top ``s`` over the top ``depth``
        frames of ``path``: with ``deeper``, a token that reaches below them is deep; without, the
        walk reads the whole stack, exactly (a token that overflows the walk is deep)."""
        out = np.empty(tokens.shape[0], dtype=np.int8)
        ws = thread_workspace(self._max_len)
        if deeper:  # below the top frames every path escapes: the token is deep
            walk_tokens(self._escaping, self._trie, tokens, s, np.ascontiguousarray(path[-depth:]), True, out, ws)
        else:
            walk_tokens(self._kernel, self._trie, tokens, s, path, False, out, ws)
        accepted = self._trie.order[tokens[out == TOKEN_ACCEPTED]].astype(np.int32)
        deep = tokens[(out != TOKEN_ACCEPTED) & (out != TOKEN_REJECTED)]
        return Shallow(accepted, np.ascontiguousarray(deep))

    def _level_part(self, s: int, tokens: np.ndarray, path: np.ndarray, k: int, deeper: bool,
                    top: list[int] | None = None) -> Shallow:
        """Level ``k`` (> :data:`SPLIT_DEPTH`) of split top ``s`` over ``path``: ``tokens``, the ones
        deep at level ``k - 1``, decided over the top ``k`` frames (``deeper``: the stack has more;
        else ``path`` is the whole stack).  Kept per (state, top ``k`` frames, deeper), which
        determine ``tokens``.  ``top``: ``path``'s frames top first, as a list (a caller going
        down the levels makes it once)."""
        key = (s, tuple(path[-k:][::-1].tolist() if top is None else top[:k]), deeper)
        got = self._levels.get(key)
        if got is None:
            got = self._walk_part(s, tokens, path, k, deeper)
            self._levels.store(key, got)
        return got

    def deep_ids(self, s: int, shallow: Shallow, path: np.ndarray, frames: tuple[int, ...],
                 deeper: bool) -> tuple[int, ...] | None:
        """The ids of ``shallow``'s deep tokens that the real stack ``path`` accepts (ascending);
        None when a walk overflowed (the caller decides them another way, uncached)."""
        if not shallow.deep.shape[0]:
            return ()
        if s in self.levelled:
            return self._deep_by_levels(s, shallow, path, deeper)
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

    def _deep_by_levels(self, s: int, shallow: Shallow, path: np.ndarray, deeper: bool) -> tuple[int, ...] | None:
        """:meth:`deep_ids` a frame at a time: level ``k`` decides the tokens still deep over the
        top ``k`` frames (:meth:`_level_part`, kept), until none is left or the whole stack was read."""
        deep = shallow.deep
        ids: list[int] = []
        k = SPLIT_DEPTH
        top = path[::-1].tolist()
        while deep.shape[0]:
            if not deeper:  # the last level read the whole stack: what is left overflowed
                return None
            k += 1
            deeper = len(top) > k
            part = self._level_part(s, deep, path, k, deeper, top)
            if part.accepted.shape[0]:
                ids.extend(part.accepted.tolist())
            deep = part.deep
        return tuple(sorted(ids))


class _Parts:
    """Shallow or level parts by (state, top frames, deeper), with about the bytes they hold (a race
    may miscount a little).  Starts afresh when the next entry would pass :data:`MEMO_MAX_BYTES`
    (a lookup reads the table once, so a reset by another thread never breaks it); an entry larger
    than that is not kept."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, tuple[int, ...], bool], Shallow] = {}
        self.nbytes = 0

    def get(self, key: tuple[int, tuple[int, ...], bool]) -> Shallow | None:
        return self.entries.get(key)

    def store(self, key: tuple[int, tuple[int, ...], bool], value: Shallow) -> None:
        size = value.accepted.nbytes + value.deep.nbytes + 8 * len(key[1]) + 300
        if size > MEMO_MAX_BYTES:
            return
        if self.nbytes + size > MEMO_MAX_BYTES:
            self.entries = {}
            self.nbytes = 0
        self.entries[key] = value
        self.nbytes += size


def top_frames(path: np.ndarray, depth: int) -> tuple[int, ...]:
    """The top ``depth`` frames of a linear stack (bottom first), top first; a stack with fewer
    ends in -1, the bottom."""
    top = path[::-1][:depth].tolist()
    return tuple(top) if len(top) == depth else (*top, -1)
