"""Token classes per automaton state, and the masks of configurations built from them.

For every state ``s`` that can be a top, :func:`precompute_classes` walks the sorted token trie
from a bare frame holding only ``s`` (:func:`pda.token_walk.walk_tokens`) and sorts the tokens:

* **accepted** — some path consumes all the token's bytes without leaving ``s``'s frame;
* **uncertain** — only paths that leave the frame consume it, through some place the rule can
  return to (*context expansion*: return sites are tried, so most tokens that leave the frame are
  rejected here already);
* **rejected** — everything else.

Accepted tokens are stored as a sorted id list or as a bitmask row, whichever is smaller;
uncertain tokens as sorted-trie indices, checked at run time against the real stack.

**Escaping rules.**  Context expansion is exact but ties a state's classes to the places its rule
is called from.  A rule that normalisation made out of a repeated piece
(:data:`pda.share.SHARED_PREFIX`), a block of a long counted repeat
(:data:`pda.counted_repeats.REPEAT_PREFIX`), or any rule called from more than
:data:`ESCAPE_RETURN_SITES` places, is walked without it: a token that can leave such a rule's
frame is *uncertain* (``rule_escape``), whatever follows, and the matcher decides it against the
real stack.

**Shared classes (bounded lookahead).**  A token of at most ``k`` bytes made only of the bytes of a
set ``X`` reads only the part of the automaton that ``k`` moves on ``X`` bytes (and the moves that
read no byte) reach from ``s``.  So the vocabulary is split into groups by byte set and length
(:mod:`pda.token_groups`: word-like tokens of at most 8, 16 and more bytes, tokens without a quote
or backslash, the rest), and each group's classes from ``s`` are kept under a canonical digest of
that bounded region (:func:`pda.lookahead.lookahead_key`) in a cache of the tokenizer
(:attr:`pda.TokenizerInfo.class_cache`), shared by every state and every grammar compiled for it.
Every position of a counted string far from its limit, in every schema, has the same region for
the word-like tokens; so do the positions inside the blocks of long repeats.  A state whose
first bytes start fewer than :data:`LOOKAHEAD_MIN_SHARE` of the tokens (a key, a number) is walked
over the whole vocabulary at once, which costs less than the keys (bar :data:`LOOKAHEAD_MIN_LIVE`).  A
group's walk is three kernel calls (:mod:`pda.group_kernels`) when plain runs decide tokens before
it, else one walk that lists only the tokens it keeps (:func:`pda.token_walk.walk_listing`: after a
value, a few hundred entries, not a code per token).  A group whose region has more states than
the group's cap is walked from the state.  The classes are the same as without sharing, state by
state (``tests/test_batch_and_mask_cache.py`` compares them).  A grammar uses the keys while they
pay (:data:`GROUP_KEY_TRIAL`): JSON Schemas' lexical pieces recur across schemas, but a hand-written
EBNF grammar's expression states rarely meet a region the cache has, and then one walk of the whole
vocabulary costs less than the keys and six group walks.

**Frame classes.**  Near the end of a block of a long counted repeat nearly every token leaves the
block's frame, so nearly the whole vocabulary is uncertain, and the matcher would walk it on the
real stack at every such position of every block (each block returns to its own place in the
caller, so the mask cache never sees the same stack twice).  :meth:`TokenClasses.frame_codes`
classifies those tokens once more, from the state with one return state below it (context
expansion below that), under a digest of what a walk on that one-frame stack can see
(:func:`pda.lookahead.frame_key`): alike at every block far from the repeat's end, so the walk is
done once per position in a block, not once per block.  A rule that escapes for its many callers
returns to a different text at each, so there the walk is kept per (state, return state), keyless.

**Plain runs.**  A counted string has no loop, so a walk cannot take the looping-thread shortcut
and walks every byte of every token.  :mod:`pda.plain_runs` gives each state the number of plain
characters (no quote, backslash or control character) it surely consumes in its frame; a token
made only of plain characters and no longer than that is accepted without a walk (in
:meth:`TokenClasses._walk`, before any group walk), and so is one that ends inside a plain character
within that many (:func:`pda.token_groups.plain_prefixes`: a prefix of a run the state consumes is
consumed; DeepSeek cuts many CJK characters so).  The matcher accepts uncertain tokens of whole
plain characters the same way over the real stack (:func:`pda.plain_runs.stack_run`), reading the
frames it needs.  Where the run is exact and no end state is on the way (a counted string's
position, a few characters from its limit), a longer plain token is rejected without a walk
(:func:`pda.plain_runs.beyond_run`); so is a token whose plain characters stop on a byte that no
state they reach reads (a control character inside a string, :mod:`pda.plain_stops`).

**Plain split.**  A state that surely consumes :data:`PLAIN_SPLIT_CHARS` plain characters (inside
an unbounded JSON string, an extra property's key, a counted string 16 or more characters from its
limit) accepts every token that a run of that many consumes: 125,879 of DeepSeek's 128,050,
including those that end inside a multi-byte character (:func:`pda.plain_runs.plain_prefix_counts`).
Their ids are one bitmask row per tokenizer (:func:`pda.token_groups.plain_split`), so such a state
skips the keys and walks only the other 2,171 tokens (:meth:`TokenClasses._walk_beyond_plain`):
about 75 µs, where the keys and the group walks took 180 µs when the tokenizer's cache had the
groups and 800 µs when it did not (each extra key's prefix of a schema's property names is a new
region).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property

import numpy as np

from .automaton import Automaton
from .group_kernels import (
    LONGER_REJECTED, LONGER_UNCERTAIN, LONGER_WALKED, NO_TOKENS, bits_to_ids, finish_group, listing_classes, split_group,
)
from .lookahead import (
    LookaheadScratch, byte_runs, class_bits, first_byte_weight, frame_key, lookahead_keys, make_scratch, pair_counts,
    rule_min_lengths, two_byte_weight,
)
from .kernel_entry import forget_entry_points
from .token_walk import TOKEN_OVERFLOW, TOKEN_UNCERTAIN, KernelAutomaton, walk_listing, walk_tokens
from .walk_workspace import Workspace, listing_buffers, thread_workspace
from .counted_repeats import REPEAT_PREFIX
from .plain_stops import stop_reads
from .plain_runs import (
    BEYOND_LEAVES, BEYOND_NOWHERE, RUN_CAP, beyond_run, plain_moves, plain_runs, plain_shapes, plain_to_end, stack_most,
)
from .share import SHARED_PREFIX
from .state_classes import StateClasses, cache_fields, cache_fields_nbytes, union
from .token_groups import (
    ALL_BYTES, GROUPS, GroupSpec, PlainSplit, TokenGroup, plain_chars, plain_split, token_groups,
)
from .token_trie import TokenTrie
from .tokenizer import TokenizerInfo

__all__ = [
    "StateClasses", "TokenClasses", "precompute_classes", "prepare_tokenizer", "return_sites", "kernel_automaton", "max_token_length",
    "ESCAPE_RETURN_SITES", "LOOKAHEAD_GROUPS", "LOOKAHEAD_MIN_SHARE", "LOOKAHEAD_MIN_LIVE", "GROUP_KEY_TRIAL", "LIVE_KEY_TRIAL",
    "PLAIN_SPLIT_CHARS", "FRAME_BYTES", "FRAME_CAP", "ACCEPTED_BEFORE_SHARE",
]

# The group keys of a grammar are used while they pay: after this many states classified through
# them, only when at least half of those took a group from the tokenizer's cache.  On JSON Schemas
# most do (strings, numbers and keys of one shape recur across schemas); on llama.cpp's C and SQL
# grammars 1-6 of 19-40 did, and the keys and six group walks cost more than one walk of the whole
# vocabulary: without them c.gbnf's fills took 41-43 ms in all instead of 46-52, its p99 2.2 ms
# instead of 2.6-2.9.
GROUP_KEY_TRIAL = 2
# A rule called from more places than this is walked with escapes rather than context expansion.
ESCAPE_RETURN_SITES = 16
# Set at interpreter exit: background warm-ups stop between two states, so no thread is still
# inside numba (compiling, say) while the process tears down (that aborted the process).
STOP_WARMING = threading.Event()
# The groups the vocabulary is split into; each group's tokens are classified under a key of the
# state's automaton bounded by the group's bytes and longest token.  None: one group, walked from
# every state on its own (no sharing).
LOOKAHEAD_GROUPS: tuple[GroupSpec, ...] | None = GROUPS
# A state whose first bytes start fewer than this share of the vocabulary's tokens is walked over
# the whole vocabulary at once, without keys: its walk costs less than the keys (on 400 JSON
# Schemas, a share of 0.5 gave an 18% lower mean fill than 0.3, and 0.3 an 11% lower one than
# 0.125; inside a string nearly every token's first byte is allowed, and those states are keyed).
LOOKAHEAD_MIN_SHARE = 0.5
# ... unless half this many go on past their first byte (pda.lookahead.two_byte_weight) from a state
# with no plain run and no loop (spaces after a comma): ``[0-9a-zA-Z_-]{1,255}`` is a state per position,
# a 1.5 ms walk of 25,800 live tokens each, the same keys far from the bound (its first two share none).
LOOKAHEAD_MIN_LIVE = 16384
LIVE_KEY_TRIAL = 8
_FRAME_KEY_MEMO = 1 << 16  # (state, return state) pairs whose frame_key a TokenClasses remembers
_FRAME_CODES_MEMO = 64  # (state, return state) pairs whose unkeyed frame codes it remembers
_NO_KEY = object()
# A state that surely consumes this many plain characters (pda.plain_runs) accepts every token of
# at most that many plain characters: only the others are walked (:meth:`TokenClasses._walk_beyond_plain`),
# without keys.
PLAIN_SPLIT_CHARS = 16
# Frame classes (:meth:`TokenClasses.frame_codes`): for the uncertain tokens of at most
# FRAME_BYTES bytes, under a key of a region of at most FRAME_CAP states.
FRAME_BYTES = 32
FRAME_CAP = 4096
# The tokens the escaping rules a state calls accept are taken as accepted before its walk only when
# they are at least this share of the vocabulary (TokenClasses._accepted_before).
ACCEPTED_BEFORE_SHARE = 0.5
_NO_PRE = np.zeros(0, dtype=np.bool_)  # split_group without tokens accepted beforehand
_NO_STACK = np.zeros(0, dtype=np.int32)  # a bare frame


def first_byte_counts(trie: TokenTrie) -> np.ndarray:
    """How many tokens start with each byte value (int64[256]; kept per tokenizer, 0.45 ms to count)."""
    return np.bincount(trie.data[trie.offsets[:-1]], minlength=256)


def max_token_length(trie) -> int:  # type: ignore[no-untyped-def]
    """The longest token of the trie, in bytes (at least 1)."""
    return max(1, int(np.diff(trie.offsets).max())) if trie.offsets.shape[0] > 1 else 1


class TokenClasses:
    """The token classes of every state that can be a top, computed eagerly or on first use.

    ``get(state)`` returns a state's classes, computing them the first time (thread-safe; the
    kernel releases the GIL).  ``by_state`` holds the states computed so far.
    """

    def __init__(self, aut: Automaton, tok: TokenizerInfo) -> None:
        self.words = (tok.vocab_size + 31) // 32
        self.by_state: dict[int, StateClasses] = {}
        # tuples of ints, which the collector stops tracking: a list of a large schema's 60,000
        # states was walked by every full collection while its grammar lived
        self.states: tuple[int, ...] = tuple(np.flatnonzero(aut.has_bytes).tolist())
        self.kernel = kernel_automaton(aut)
        weakref.finalize(self, forget_entry_points, id(self.kernel))
        self.shared_hits = 0  # states whose classes came from the tokenizer's cache
        self._aut = aut
        self._tok = tok
        self._trie = tok.trie
        self._maxlen = max_token_length(self._trie)
        self._groups = token_groups(tok, LOOKAHEAD_GROUPS or ())
        self._whole = token_groups(tok, ())[0]
        self._keyed = LOOKAHEAD_GROUPS is not None
        # states classified through the group keys and those that shared, for wide and for live states
        self._keyed_tries = self._keyed_shared = self._live_tries = self._live_shared = 0
        self._pairs = tok.class_cache.get("pda-pair-counts", lambda: pair_counts(self._trie.second_starts), lambda v: v.nbytes)
        self._cap = max((g.spec.cap for g in self._groups), default=0)
        self._all_runs = byte_runs(aut.byte_class, ALL_BYTES)
        # the fewest bytes each rule reads, for the keys (at compile time: made in the first fill
        # that keys a state instead, a large schema's took 20-30 ms there)
        self._minlen = rule_min_lengths(self.kernel) if self._keyed else np.zeros(0, np.int32)
        self._lengths = np.diff(self._trie.offsets)
        self._short: dict[int, np.ndarray] = {}  # state -> short_tokens
        self._frame_keys: dict[tuple[int, int], bytes | None] = {}  # (state, return state) -> frame_key
        self._frame_memo: dict[tuple[int, int], np.ndarray] = {}  # (state, return state) -> unkeyed frame codes
        # per rule: are its frame codes kept under a frame_key (frame_codes)
        self._frame_keyed = np.array([n.startswith((REPEAT_PREFIX, SHARED_PREFIX)) for n in aut.rule_names], dtype=np.bool_)
        self._longer: dict[int, int] = {}  # state -> _longer_than_run
        self._before: dict[int, tuple[int, ...]] = {}  # state -> _accepted_before
        self._runs = {g.spec.name: byte_runs(aut.byte_class, g.spec.allowed) for g in self._groups}
        # byte set -> (its keyed groups, their bounds, their caps): one lookahead search each
        by_name: dict[str, list[int]] = {}
        for i, g in enumerate(self._groups):
            if g.spec.cap > 0:
                by_name.setdefault(g.spec.name, []).append(i)
        self._bounds = {name: (members, np.array([self._groups[i].k for i in members], np.int64),
                               np.array([self._groups[i].spec.cap for i in members], np.int64))
                        for name, members in by_name.items()}
        first = tok.class_cache.get("pda-first-byte-counts", lambda: first_byte_counts(self._trie), lambda v: v.nbytes)
        self._class_bits = class_bits(aut.trans) if self._keyed else np.zeros((0, 4), np.uint64)
        self._class_weight = np.bincount(aut.byte_class, weights=first, minlength=aut.num_classes).astype(np.int64)
        self._lock = threading.Lock()
        self._local = threading.local()
        # state -> the start states of the escaping rules it calls (other than itself), for _walk
        src = np.repeat(np.arange(aut.num_states), np.diff(aut.call_ptr))
        start = aut.rule_start[aut.call_rule]
        keep = self.kernel.rule_escape[aut.call_rule] & (start != src)
        escape_starts: dict[int, list[int]] = {}
        for q, t in zip(src[keep].tolist(), start[keep].tolist()):
            escape_starts.setdefault(q, []).append(t)
        self._escape_starts = {q: tuple(ts) for q, ts in escape_starts.items()}

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.by_state.values())

    @property
    def complete(self) -> bool:
        return len(self.by_state) == len(self.states)

    def get(self, state: int) -> StateClasses:
        got = self.by_state.get(state)
        if got is None:
            got = self._compute([state], thread_workspace(self._maxlen))[0]
        return got

    def _scratch(self) -> LookaheadScratch:
        sc = getattr(self._local, "scratch", None)
        if sc is None:
            sc = self._local.scratch = make_scratch(self._aut.num_states, max(self._cap, FRAME_CAP))
        return sc

    def frame_codes(self, s: int, ret: int, unc: np.ndarray) -> np.ndarray | None:
        """A TOKEN_* code for each token of at most :data:`FRAME_BYTES` bytes among ``s``'s
        uncertain tokens ``unc`` (all of them, sorted-trie indices, ascending), in order: walked
        from ``s`` with the return state ``ret`` below its frame and context expansion below that,
        ACCEPTED and REJECTED hold on every stack whose top frame below ``s`` is ``ret``;
        UNCERTAIN ones need the real stack.  Kept in the tokenizer's class cache under
        :func:`~pda.lookahead.frame_key`: those tokens' bare-frame classes depend only on what lies
        within that many bytes, so they are a function of the key too.  None: no key (or no
        sharing: :data:`LOOKAHEAD_GROUPS` None).

        The key is made only in the rules it was made for, the blocks of a long repeat and shared
        pieces, which return alike from many places.  A rule that escapes because it is called from
        many places (the rule of any JSON value) returns to each place with what follows it there,
        so its keys differ: on two samples of 400 schemas 64 of its 69 were new, at 1.2 ms each, more
        than the walk.  There the codes are walked with no key, and kept for the (state, return state)
        in the grammar's :attr:`_frame_memo`."""
        if not self._keyed:
            return None
        if not self._frame_keyed[self.kernel.state_rule[s]]:
            got = self._frame_memo.get((s, ret))
            if got is None:
                if len(self._frame_memo) >= _FRAME_CODES_MEMO:
                    self._frame_memo.clear()
                got = self._frame_memo[(s, ret)] = self._frame_walk(s, ret, unc)
            return got
        key = self._frame_keys.get((s, ret), _NO_KEY)  # a digest costs ~100 us: once per (s, ret)
        if key is _NO_KEY:
            key = frame_key(self.kernel, self._minlen, self._all_runs, "all", s, ret, FRAME_BYTES, FRAME_CAP,
                            self._scratch())
            if len(self._frame_keys) >= _FRAME_KEY_MEMO:
                self._frame_keys.clear()
            self._frame_keys[(s, ret)] = key
        if key is None:
            return None
        return self._tok.class_cache.get(key, lambda: self._frame_walk(s, ret, unc),  # type: ignore[no-any-return]
                                         lambda v: v.nbytes)

    def _frame_walk(self, s: int, ret: int, unc: np.ndarray) -> np.ndarray:
        """The walk of :meth:`frame_codes`.  When its tokens are most of the vocabulary (after a
        value, every token that leaves it), the whole vocabulary is walked and theirs picked out:
        its walk skips the subtree of a dead prefix (0.2 ms on a JSON Schema where their walk took
        5-21 ms)."""
        cand = unc[self.short_tokens(s)]
        n = self._trie.order.shape[0]
        whole = 4 * cand.shape[0] >= 3 * n
        out = np.empty(n if whole else cand.shape[0], dtype=np.int8)
        walk_tokens(self.kernel, self._trie, self._every_token if whole else cand, s,
                    np.array([ret], dtype=np.int32), True, out, thread_workspace(self._maxlen))
        if whole:
            out = out[cand]
        out[out == TOKEN_OVERFLOW] = TOKEN_UNCERTAIN
        return out

    def short_tokens(self, s: int) -> np.ndarray:
        """bool per uncertain token of state ``s``: at most :data:`FRAME_BYTES` bytes (kept)."""
        got = self._short.get(s)
        if got is None:
            got = self._short[s] = self._lengths[self.get(s).uncertain] <= FRAME_BYTES
        return got

    @cached_property
    def _every_token(self) -> np.ndarray:
        """``0 .. n-1`` (sorted-trie indices of the whole vocabulary), made once: 0.05-0.25 ms a walk."""
        return np.arange(self._trie.order.shape[0], dtype=np.int32)

    @cached_property
    def _plain_moves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`pda.plain_runs.plain_moves` of the automaton (runs and ends share them)."""
        return plain_moves(self._aut.trans, self._aut.byte_class)

    @cached_property
    def plain_runs(self) -> np.ndarray:
        """:func:`pda.plain_runs.plain_runs` of the automaton, made on first use."""
        a = self._aut
        return plain_runs(a.trans, a.byte_class, a.call_ptr, a.call_rule, a.rule_start, moves=self._plain_moves)

    @cached_property
    def plain_to_end(self) -> np.ndarray:
        """:func:`pda.plain_runs.plain_to_end` of the automaton, made on first use."""
        a = self._aut
        return plain_to_end(a.trans, a.byte_class, a.is_end, moves=self._plain_moves)

    def prepare_fills(self) -> None:
        """Make now the tables of the automaton that fills read through plain runs (the runs, the
        runs to an end state, the characters' byte shapes), each otherwise made in the first fill
        that needs it: 0.1-0.5 ms inside a fill that is already a first visit (203 of 394 schemas'
        fills, MaskBench sample), against 0.05-0.3 ms of a compile."""
        self.plain_runs, self.plain_to_end, self._plain_shapes, self.stop_reads  # noqa: B018 - cached on first read

    @cached_property
    def _plain_shapes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`pda.plain_runs.plain_shapes` of the automaton's byte classes (for beyond_run)."""
        return plain_shapes(self._aut.byte_class)

    def within_most(self, s: int, path: np.ndarray, unc: np.ndarray, todo: np.ndarray) -> tuple[np.ndarray, int]:
        """The positions ``todo`` (into ``unc``) that top ``s`` over the linear stack ``path`` may
        consume: a token of more plain characters than :func:`pda.plain_runs.stack_most` allows
        is rejected without a walk.  Returns them and the frames that read (0: none dropped)."""
        a = self._aut
        most, read = stack_most(a.trans, a.call_ptr, *self._plain_shapes, a.is_end, s, path, self._most_chars + 1)
        if most > self._most_chars:
            return todo, 0
        kept = todo[self.plain_chars()[unc[todo]] <= most]  # -1: not plain characters only
        return (todo, 0) if kept.shape[0] == todo.shape[0] else (kept, int(read))

    @cached_property
    def _most_chars(self) -> int:
        return int(self.plain_chars().max())

    def plain_chars(self) -> np.ndarray:
        """:func:`pda.plain_runs.plain_char_counts` of every token (sorted-trie order), per tokenizer."""
        return plain_chars(self._tok)

    @cached_property
    def _plain_split(self) -> PlainSplit:
        return plain_split(self._tok, PLAIN_SPLIT_CHARS)

    @cached_property
    def stop_reads(self) -> np.ndarray:
        """:func:`pda.plain_stops.stop_reads` of the automaton, made on first use."""
        a = self._aut
        return stop_reads(a.trans, a.byte_class, a.call_ptr, a.is_end, moves=self._plain_moves)

    def _walk(self, level: TokenGroup, s: int, ws: Workspace) -> StateClasses:
        """The classes of the tokens of group ``level`` from a bare frame holding only ``s``.

        A token the start of an escaping rule that ``s`` calls accepts is accepted from ``s`` too
        (consumed inside the callee's frame), so only the other tokens are walked: from a state
        that opens a JSON string, the few thousand tokens that close it, not all 129k (when the
        starts accept most of the vocabulary: :meth:`_accepted_before`)."""
        starts = self._accepted_before(s)
        run = int(self.plain_runs[s])  # plain characters the state surely consumes (pda.plain_runs)
        if run <= 0 and not starts:  # nothing to decide before the walk
            return self._walk_listing(level, s, ws)
        pre: np.ndarray | None = None
        for start in starts:
            mask = self.get(start).accepted_mask(level.trie.order, self.words)
            pre = mask if pre is None else pre | mask
        longer = self._longer_than_run(s, run) if 0 < run < min(PLAIN_SPLIT_CHARS, RUN_CAP) else LONGER_WALKED
        order = level.trie.order
        cand, row, accepted, split_unc = split_group(level.chars, level.prefixes, level.stops, self.stop_reads[s], run, longer,
                                                     _NO_PRE if pre is None else pre, level.cand, order, self.words)
        out = np.empty(cand.shape[0], dtype=np.int8)
        walk_tokens(self.kernel, level.trie, cand, s, _NO_STACK, True, out, ws)
        accepted, unc = finish_group(out, cand, order, row, accepted, split_unc,
                                     NO_TOKENS if level.trie is self._trie else level.to_main)
        if accepted > self.words:  # stored as bits exactly when that is smaller (StateClasses)
            return StateClasses(None, row, unc)
        return StateClasses(bits_to_ids(row, accepted), None, unc)

    def _accepted_before(self, s: int) -> tuple[int, ...]:
        """The start states of the escaping rules ``s`` calls whose accepted tokens :meth:`_walk`
        takes as accepted before its walk: none unless together they accept
        :data:`ACCEPTED_BEFORE_SHARE` of the vocabulary or more.  The walk then visits every other
        token one by one, which pays when the starts accept most (the plain characters of a
        string's content); when they accept few (the 1,122 first tokens of the shared rule of any
        JSON value), the listing walk, which skips the subtree of a dead prefix, costs far less
        (150 against 690 us a state, over the 2,023 states of Github_hard/o47195 that call it)."""
        got = self._before.get(s)
        if got is None:
            starts = self._escape_starts.get(s, ())
            accepted = sum(self.get(t).num_accepted for t in starts)
            got = self._before[s] = starts if accepted >= ACCEPTED_BEFORE_SHARE * self._trie.order.shape[0] else ()
        return got

    def _walk_listing(self, level: TokenGroup, s: int, ws: Workspace) -> StateClasses:
        """:meth:`_walk` of every token of ``level``, listing only those it does not reject
        (:func:`pda.token_walk.walk_listing`): from a state that allows a few first bytes (after a
        value, inside a key) a few hundred tokens are read back, not a code per token."""
        out, found = listing_buffers(self._trie.order.shape[0])
        n = walk_listing(self.kernel, level.trie, level.cand, s, _NO_STACK, True, out, ws, found)  # cand: 0..n-1
        bits, accepted, unc = listing_classes(out, found, n, level.trie.order,
                                              NO_TOKENS if level.trie is self._trie else level.to_main, self.words)
        return StateClasses(None, accepted, unc) if bits else StateClasses(accepted, None, unc)

    def _walk_beyond_plain(self, s: int, ws: Workspace) -> StateClasses:
        """The classes of every token from a state that surely consumes :data:`PLAIN_SPLIT_CHARS`
        plain characters: the tokens of that many or fewer are accepted (a row built once per
        tokenizer, :func:`pda.token_groups.plain_split`), and only the others are walked."""
        split = self._plain_split
        got = self._walk(split.rest, s, ws)
        row = split.plain_row.copy()
        got.or_accepted_into(row)
        return StateClasses(None, row, got.uncertain)

    def _longer_than_run(self, s: int, run: int) -> int:
        """What :func:`pda.group_kernels.split_group` makes of a plain token longer than ``run``
        from ``s`` (:func:`pda.plain_runs.beyond_run`): rejected when no longer plain sequence is
        consumed in the frame and none reaches an end state; uncertain when the rule escapes and
        its first ``to_end[s]`` characters reach an end state (where the thread escapes); else walked.
        One search per state, for all its groups, and only where it pays: :meth:`_walk` asks below
        a run of :data:`PLAIN_SPLIT_CHARS` (and of ``RUN_CAP``, a run that is not exact) only.  The
        search reads ``run`` layers, and from a run of that many only the group beyond the plain
        split is walked, whose plain tokens longer than that are 163 (57 of more than 32
        characters): walking them costs less than the search (200-340 µs at a run of 128-255, and
        half of the 500 µs of a position in a block of Github_hard/o9921's 32,767-character
        strings), in an escaping rule too."""
        got = self._longer.get(s)
        if got is None:
            A = self.kernel
            beyond = beyond_run(A.trans, A.call_ptr, *self._plain_shapes, A.is_end, s, run)
            got = LONGER_REJECTED if beyond == BEYOND_NOWHERE else LONGER_UNCERTAIN if (
                beyond == BEYOND_LEAVES and A.rule_escape[A.state_rule[s]] and self.plain_to_end[s] >= 0) else LONGER_WALKED
            self._longer[s] = got
        return got

    def _classify(self, s: int, ws: Workspace) -> tuple[StateClasses, bool]:
        """Walk the vocabulary from a bare frame holding only ``s``.  A state whose first bytes
        start at least :data:`LOOKAHEAD_MIN_SHARE` of the tokens (or :data:`LOOKAHEAD_MIN_LIVE`, with
        no plain run) is classified one token group at a time, and a group whose bounded region has a
        key takes its classes from the tokenizer's cache -- while that pays (:data:`GROUP_KEY_TRIAL`,
        :data:`LIVE_KEY_TRIAL`).  Returns the classes and whether some group came from the cache."""
        if self._keyed and self.plain_runs[s] >= PLAIN_SPLIT_CHARS:
            return self._walk_beyond_plain(s, ws), False
        A, sc = self.kernel, self._scratch()
        weight = -1
        tries = self._keyed_tries
        if self._keyed and (tries < GROUP_KEY_TRIAL or 2 * self._keyed_shared >= tries):
            weight = first_byte_weight(self._class_bits, A.is_end, A.call_ptr, A.call_rule, A.call_return, A.rule_start,
                                       A.state_rule, A.ret_ptr, A.ret_state, A.rule_escape, self._class_weight, s,
                                       self._cap, sc.ids, sc.order, sc.depth)
        by_live = weight < LOOKAHEAD_MIN_SHARE * self._trie.order.shape[0]  # keyed, if at all, as a live state
        if by_live and not self._live(s, weight):
            return self._walk(self._whole, s, ws), False
        cache = self._tok.class_cache
        keys: dict[int, bytes | None] = {}  # group index -> its key (one search per byte set)
        for name, (members, ks, caps) in self._bounds.items():
            keys.update(zip(members, lookahead_keys(A, self._minlen, self._runs[name], name, s, ks, caps, sc)))
        parts = []
        shared = False
        for i, g in enumerate(self._groups):
            key = keys.get(i)
            if key is None:
                parts.append(self._walk(g, s, ws))
                continue
            before = cache.misses
            parts.append(StateClasses(*cache.get(key, lambda: cache_fields(self._walk(g, s, ws)), cache_fields_nbytes)))
            shared |= cache.misses == before
        if by_live:  # a race may lose a count: the choice only comes a little later
            self._live_tries, self._live_shared = self._live_tries + 1, self._live_shared + shared
        else:
            self._keyed_tries, self._keyed_shared = self._keyed_tries + 1, self._keyed_shared + shared
        return union(parts, self.words), shared

    def _live(self, s: int, weight: int) -> bool:
        """Whether ``s`` is keyed as :data:`LOOKAHEAD_MIN_LIVE` says (``weight`` -1: not looked at)."""
        A, tries = self.kernel, self._live_tries
        if not self._keyed or 0 <= weight < LOOKAHEAD_MIN_LIVE or A.has_loop[s] or self.plain_runs[s] > 0:
            return False
        return (tries < LIVE_KEY_TRIAL or 2 * self._live_shared >= tries) and 2 * two_byte_weight(
            A.trans, A.byte_class, A.call_ptr, A.is_end, self._pairs, s) >= LOOKAHEAD_MIN_LIVE

    def _compute(self, chunk: list[int], ws: Workspace, progress=None) -> list[StateClasses]:  # type: ignore[no-untyped-def]
        got = []
        for s in chunk:
            cls, shared = self._classify(s, ws)
            with self._lock:
                self.shared_hits += shared
                cls = self.by_state.setdefault(s, cls)
                if progress is not None:
                    progress(len(self.by_state), len(self.states))
            got.append(cls)
        return got

    def warm(self, aut: Automaton, *, seconds: float, max_states: int) -> None:
        """Classify states in breadth-first order from the start until ``seconds`` have passed or
        ``max_states`` are done: the states a document meets first, within a bounded compile time.
        Stops early once :data:`STOP_WARMING` is set (the interpreter is exiting)."""
        deadline = time.perf_counter() + seconds
        ws = thread_workspace(self._maxlen)
        rets = return_sites(aut)
        start = int(aut.rule_start[0])
        seen = {start}
        queue = deque([start])
        done = 0
        while queue and done < max_states and time.perf_counter() < deadline and not STOP_WARMING.is_set():
            s = queue.popleft()
            if aut.has_bytes[s] and s not in self.by_state:
                self._compute([s], ws)
                done += 1
            nxt = np.unique(aut.trans[s]).tolist()
            for r, t in aut.calls(s):
                nxt += [int(aut.rule_start[r]), t]
            if aut.is_end[s]:
                r = int(aut.state_rule[s])
                nxt += rets[1][rets[0][r]:rets[0][r + 1]].tolist()
            for t in nxt:
                if t >= 0 and t not in seen:
                    seen.add(t)
                    queue.append(t)

    def compute_all(self, progress=None, *, threads: int | None = None) -> None:  # type: ignore[no-untyped-def]
        """Classify every state now, on ``threads`` worker threads (default: CPU count, at most 8)."""
        todo = [s for s in self.states if s not in self.by_state]
        n = max(1, min(threads or os.cpu_count() or 1, 8, len(todo)))
        if n == 1:
            self._compute(todo, thread_workspace(self._maxlen), progress)
            return
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda chunk: self._compute(chunk, thread_workspace(self._maxlen), progress),
                          [todo[k::n] for k in range(n)]))


def prepare_tokenizer(tok: TokenizerInfo) -> None:
    """Build the per-tokenizer tables the classification reads (the token groups, the plain-character
    counts and the plain split), each once per tokenizer and kept in its class cache: a
    :class:`~pda.GrammarCompiler` does it when it is made, so no compile or mask fill pays for it
    (the plain split took 18 ms in the first fill inside a JSON string)."""
    token_groups(tok, LOOKAHEAD_GROUPS or ())
    plain_chars(tok)
    if LOOKAHEAD_GROUPS is not None:
        plain_split(tok, PLAIN_SPLIT_CHARS)


def return_sites(aut: Automaton) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ret_ptr[R+1], ret_state[]): the states each rule can return to, over all call sites."""
    nrules = len(aut.rule_names)
    width = aut.num_states + 1
    pairs = np.unique(aut.call_rule.astype(np.int64) * width + aut.call_return)  # by rule, then return state
    ptr = np.zeros(nrules + 1, dtype=np.int32)
    ptr[1:] = np.cumsum(np.bincount(pairs // width, minlength=nrules))
    return ptr, (pairs % width).astype(np.int32)


def kernel_automaton(aut: Automaton) -> KernelAutomaton:
    """The arrays :func:`~pda.token_walk.walk_tokens` reads, with the escaping rules marked."""
    ret_ptr, ret_state = return_sites(aut)
    escape = np.array([n.startswith((SHARED_PREFIX, REPEAT_PREFIX)) for n in aut.rule_names], dtype=np.bool_)
    escape |= np.diff(ret_ptr) > ESCAPE_RETURN_SITES
    return KernelAutomaton(aut.trans, aut.byte_class, aut.is_end, aut.call_ptr, aut.call_rule, aut.call_return,
                           aut.rule_start, aut.state_rule, ret_ptr, ret_state, aut.simple, escape,
                           (aut.trans == np.arange(aut.num_states, dtype=aut.trans.dtype)[:, None]).any(axis=1),
                           np.full(aut.num_states, -1, dtype=np.int8))


def precompute_classes(aut: Automaton, tok: TokenizerInfo, progress=None, *,  # type: ignore[no-untyped-def]
                       threads: int | None = None, eager: bool = True) -> TokenClasses:
    """Token classes for ``aut``: all states now (``eager``) or each on first use."""
    classes = TokenClasses(aut, tok)
    if eager:
        classes.compute_all(progress, threads=threads)
    return classes
