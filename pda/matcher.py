"""Token-level matching: token masks, token acceptance, rollback and jump-forward for one sequence.

A :class:`GrammarMatcher` steps a :class:`~pda.walker.Walker` configuration through the bytes of
accepted tokens and keeps the history of configurations for rollback.  The walker, its stack
arena, the linear stacks below its nodes, the mask keys of configurations and their steps by token
belong to the compiled grammar's :class:`~pda.stack_space.StackSpace`, shared by its matchers:
matchers at the same point of a document hold the same configuration object, and one of them keys
and steps it for all.  Its mask for a configuration is the union, over the configuration's tops,
of the top state's *accepted* tokens (:mod:`pda.precompute`) and of those of the state's
*uncertain* tokens that survive a walk on the real stack below the top
(:func:`pda.token_walk.walk_tokens` over each linear stack of the GSS).

**The mask cache.**  Final rows are kept in the compiled grammar's
:class:`~pda.cache.mask_cache.MaskCache`, shared by every matcher of that grammar.  The key of a
configuration is, for each top, its state and the *signature* of the top ``d`` frames below it
(the set of return-state paths of length ``d``; ``-1`` ends a path at the bottom), where ``d`` is
the deepest frame a walk has ever read for that state (``CompiledGrammar.signature_depth``).  A
walk is deterministic and reads only those frames, so any stack that agrees on them gets the same
mask: a hit is exact.  A key is computed with the depths known when its row was computed, never
shallower than what that row's walks read; keys from before a depth grew only miss.  Stop tokens
are per matcher, so they are added after the cached row is copied.  A row that misses is built top
by top, and a top's surviving uncertain tokens are kept per (state, paths of the frames its walk
read) (:mod:`pda.walk_results`): a new combination of tops met before walks none of them again
(interleaved A/B: ``c_like`` total fill time -12%, ``sql_select`` -3%).

**Context-free configurations.**  When every top is classified and has no uncertain token, no stack
changes the mask: it is the union of the tops' accepted tokens, and a single matcher's fill builds
it from them (a copy of one row, or a few ids set) with neither a key nor the cache
(:meth:`GrammarMatcher._write_context_free`).  On 400 JSON Schemas that is 79% of the fills; the
cache held a second copy of each of those rows (interleaved A/B: total fill time -4.6%, and -4.9%
more once first visits take this path too; the cache's bytes fell from 728 to 227 MiB).  A batch
still gathers every row from the cache, as one index operation.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from .bitmask import _row_view_for_fill
from .kernels import set_bits
from .plain_runs import RUN_CAP, mark_within, stack_run
from .split_tops import SPLIT_DEPTH, top_frames
from .path_survivors import survivors_on_path
from .token_walk import TOKEN_ACCEPTED, TOKEN_OVERFLOW, TOKEN_UNCERTAIN, walk_tokens
from .walk_workspace import thread_workspace
from .stack_space import StackSpace
from .walker import Config, as_bytes

if TYPE_CHECKING:
    from .compiler import CompiledGrammar

__all__ = ["GrammarMatcher"]

# A top with at least this many uncertain tokens left to walk decides what it can from its frame
# classes first (:meth:`GrammarMatcher._by_frame_classes`).
FRAME_MIN_UNCERTAIN = 4096
# A top over one linear stack with fewer uncertain tokens than that is decided in one kernel call
# (:func:`pda.path_survivors.survivors_on_path`); the Python path of _survivors is its reference (the
# tests turn this off to compare the two).
ONE_CALL_SURVIVORS = True
# Such a top of a state whose walks have read more than SPLIT_DEPTH frames is a *split* top
# (:mod:`pda.split_tops`): decided over its top frames, and its few deep tokens below them; its key
# part is its state, top frames and deep tokens' outcome.  Off: keyed by every frame its walks
# read, decided in one call (the tests compare the two).
SPLIT_TOPS = True
_MAX_JUMP = 4096
# A context-free configuration of at least this many tops keeps its row in the mask cache from its
# second build on: its union costs a copy and an OR of a row per top (after a value in an object,
# 6-7 tops: 8-19 us); storing a row met once cost 2-3% of the fills of c_like and SQL.
CONTEXT_FREE_CACHED_TOPS = 3

MaskKey = int  # a mask key's id in its grammar's table (pda.mask_keys)
_NO_KEY = object()  # _fill_row: no key remembered for the configuration yet
_NO_STEP = object()  # accept_token: the token's step from the configuration not remembered yet


def _cache_key(remembered: Any) -> MaskKey | None:
    """The mask key a remembered key stands for.  A :meth:`GrammarMatcher._context_free`
    configuration's key id is remembered as ``~id`` (negative), so that a single fill knows to build
    its row from the classes while a batch gathers it from the cache under ``id``.  (It was an
    ``int`` subclass, whose every instance the garbage collector tracks: 500-700 objects per grammar
    for each full collection to read.)"""
    return remembered if remembered is None or remembered >= 0 else ~remembered


class GrammarMatcher:
    """Token masks and token acceptance for one generated sequence (see DESIGN.md, Token masks).

    Methods that change the matcher's state: ``accept_token``, ``accept_string``, ``rollback``,
    ``reset``.  Everything else only reads it.  A refused token or string returns False and changes
    nothing; after termination (a stop token accepted) only ``rollback`` and ``reset`` change it.
    """

    def __init__(
        self, compiled: CompiledGrammar, *, stop_token_ids: list[int] | int | None = None,
        terminate_without_stop_token: bool = False, max_rollback_tokens: int | None = None,
    ) -> None:
        self._compiled = compiled
        self._join(compiled.stack_space())
        tok = compiled.tokenizer_info
        if stop_token_ids is None:
            stops = list(tok.stop_token_ids)
        elif isinstance(stop_token_ids, int):
            stops = [stop_token_ids]
        else:
            stops = list(stop_token_ids)
        for t in stops:
            if not 0 <= t < tok.vocab_size:
                raise ValueError(f"stop token id {t} is outside the vocabulary (size {tok.vocab_size})")
        self._stops = np.array(sorted(set(stops)), dtype=np.int32)
        self._has_stops = bool(self._stops.shape[0])
        self._stop_set = frozenset(stops)
        self._terminate_without_stop = terminate_without_stop_token
        self._max_rollback = max_rollback_tokens
        self._token_bytes = tok.token_bytes
        self._vocab_size = tok.vocab_size
        self._last_key: tuple[Config, tuple[tuple[int, bool], ...], tuple[Any, ...] | None] | None = None  # (see _key)
        # the configuration after each accepted token (the rollback history), and whether the last
        # one accepted a stop token (only the last can: nothing is accepted after it).  Not a tuple
        # per token: the collector would track one more object per token for as long as the matcher
        # lives (a server's long generations make every full collection longer)
        self._history: list[Config] = [self._space.start]
        self._stopped = False

    # ------------------------------------------------------------------ state

    def _join(self, space: StackSpace) -> None:
        """Take ``space``'s arena, walker, stack paths and key memo (shared with the grammar's other
        matchers in it; :mod:`pda.stack_space`)."""
        self._space = space
        self._walker = space.walker
        self._stacks = space.stacks  # the linear stacks and signatures below tops
        self._keys = space.keys  # mask keys (or None) of configurations met
        self._steps = space.steps  # (configuration, token) -> the next configuration, or None: refused (by int)

    @property
    def _cfg(self) -> Config:
        return self._history[-1]

    def is_terminated(self) -> bool:
        """True after a stop token was accepted; with ``terminate_without_stop_token``, as soon as
        the text is a complete sentence (as xgrammar does)."""
        return self._stopped or (self._terminate_without_stop and self._history[-1].accepting)

    def is_completed(self) -> bool:
        """True when the text so far is a whole sentence (a stop token would be accepted)."""
        return self._cfg.accepting

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """The tokens that end the text (allowed exactly when it is complete)."""
        return tuple(self._stops.tolist())

    @property
    def num_tokens(self) -> int:
        """Tokens accepted and still in the rollback history."""
        return len(self._history) - 1

    def _push(self, cfg: Config, stopped: bool) -> None:
        self._history.append(cfg)
        self._stopped = stopped
        if self._max_rollback is not None and len(self._history) > self._max_rollback + 1:
            del self._history[: len(self._history) - self._max_rollback - 1]

    def accept_token(self, token_id: int) -> bool:
        """Accept one token if the grammar allows it here (changes state only then)."""
        if self.is_terminated():
            return False
        if token_id in self._stop_set:
            if not self._cfg.accepting:
                return False
            self._push(self._cfg, True)
            return True
        if type(token_id) is not int:
            token_id = operator.index(token_id)  # numpy integers; a float is a TypeError, as a list index
        if not 0 <= token_id < self._vocab_size:
            return False
        cur = self._history[-1]
        key = cur.serial * self._vocab_size + token_id  # (StackSpace.steps)
        nxt = self._steps.get(key, _NO_STEP)  # the grammar's other matchers stepped it before
        if nxt is _NO_STEP:
            nxt = self._space.remember_step(key, self._step(cur, token_id))
        if nxt is None:
            return False
        self._push(nxt, False)  # type: ignore[arg-type]
        return True

    def _step(self, cfg: Config, token_id: int) -> Config | None:
        """The configuration after token ``token_id`` (not a stop token) from ``cfg``; None when it
        is refused there (or has no bytes, or is outside the vocabulary)."""
        if not 0 <= token_id < self._vocab_size:
            return None
        data = self._token_bytes[token_id] if token_id < len(self._token_bytes) else b""
        if not data:
            return None
        arr = np.frombuffer(data, dtype=np.uint8)
        nxt, pos = self._walker.run(cfg, arr, 0, len(arr))
        return nxt if pos == len(arr) else None

    def accept_string(self, text: str | bytes) -> bool:
        """Accept the bytes of ``text`` as one step (counts as one token for ``rollback``)."""
        if self.is_terminated():
            return False
        arr = np.frombuffer(as_bytes(text), dtype=np.uint8)
        cfg, pos = self._walker.run(self._cfg, arr, 0, len(arr))
        if pos < len(arr):
            return False
        self._push(self._space.canonical(cfg), False)
        return True

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens (stop tokens included)."""
        if not 0 <= num_tokens <= len(self._history) - 1:
            raise ValueError(f"cannot roll back {num_tokens} tokens: {len(self._history) - 1} in the history")
        if num_tokens:
            del self._history[-num_tokens:]
            self._stopped = False  # only the last token can have been a stop token

    def reset(self) -> None:
        """Back to the start of the grammar, with an empty history, in the grammar's current stack
        space: a new one once the old arena has grown past ``ARENA_RESET_NODES`` nodes (matchers
        not reset keep the old one), so matchers reused for many sequences stay bounded."""
        space = self._compiled.stack_space()
        if space is not self._space:
            self._join(space)
            self._last_key = None
        self._history = [self._space.start]
        self._stopped = False

    def fork(self) -> GrammarMatcher:
        """An independent copy (for beam search or parallel sampling); shares read-only data.
        A fork may be used from another thread: the stack space they share (with the grammar's other
        matchers) interns nodes under a lock and writes memo entries whole, and kernel scratch
        arrays are per thread."""
        other = object.__new__(GrammarMatcher)
        other.__dict__.update(self.__dict__)
        other._history = list(self._history)
        return other

    # ------------------------------------------------------------------ masks

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> bool:  # type: ignore[no-untyped-def]
        """Write the allowed tokens into row ``index`` of ``bitmask`` (int32, ceil(vocab/32) words;
        a torch tensor or a numpy array).  Reads the state only.  Returns True (a mask to apply)."""
        row, commit = _row_view_for_fill(bitmask, index, self._compiled.words)
        self._fill_row(row)
        commit()
        return True

    def next_token_mask(self) -> np.ndarray:
        """The allowed tokens as a fresh int32 bitmask row (numpy)."""
        row = np.zeros(self._compiled.words, dtype=np.int32)
        self._fill_row(row)
        return row

    def _batch_state(self) -> tuple[bool, MaskKey | None, bool]:
        """(finished, lookup key, whether to set the stop tokens) of the current configuration: what
        a batch fill asks of each matcher, in one call (the key is None when finished or uncached)."""
        cfg = self._history[-1]
        if self._stopped or (self._terminate_without_stop and cfg.accepting):
            return True, None, False
        key = self._keys.get(cfg, _NO_KEY)  # _lookup_key's first step, written out (once per row)
        return False, self._lookup_key(cfg) if key is _NO_KEY else _cache_key(key), cfg.accepting and self._has_stops

    def _fill_row(self, row: np.ndarray) -> None:
        """The mask of the current configuration into ``row`` (reads the state only).  Runs once per
        token: :meth:`_batch_state`, :meth:`_lookup_key` and setting the stop tokens (the batch's steps)
        are written out here (calling them cost a few percent of the fill time in an interleaved A/B)."""
        cfg = self._history[-1]
        if self._stopped or (self._terminate_without_stop and cfg.accepting):
            row[:] = 0
            return
        key: Any = self._keys.get(cfg, _NO_KEY)
        if key is _NO_KEY:
            if self._context_free(cfg):
                key = self._remember(cfg, self._context_free_key(cfg))
            else:
                key = self._current_key(cfg)
        if key is not None and key < 0:  # context-free (_cache_key)
            if len(cfg.tops) < CONTEXT_FREE_CACHED_TOPS:
                self._write_context_free(cfg, row)
            else:
                key = ~key
                cache = self._compiled.mask_cache()
                if not cache.get_into(key, row):
                    self._write_context_free(cfg, row)
                    if self._space.built_before(key):
                        cache.put(key, row)
        else:
            cache = self._compiled.mask_cache()
            if key is None or not cache.get_into(key, row):
                row[:] = self._compute_row(cfg, cache)
        if cfg.accepting and self._stops.shape[0]:
            set_bits(row, self._stops)

    def _write_context_free(self, cfg: Config, row: np.ndarray) -> None:
        """Write the mask of a :meth:`_context_free` configuration into ``row``: the union of its
        tops' accepted tokens, whatever the stack -- a copy of one row, a few ids set.  One of
        fewer than :data:`CONTEXT_FREE_CACHED_TOPS` tops does it without the mask cache (79% of the
        fills of 400 JSON Schemas, whose rows the cache held a second copy of); one of more keeps
        the union there from its second build on (:meth:`_fill_row`)."""
        by_state = self._compiled.classes.by_state
        tops = cfg.tops
        if not tops:  # complete text, nothing more to read: only the stop tokens
            row[:] = 0
            return
        by_state[tops[0][0]].write_into(row)
        for s, _ in tops[1:]:
            by_state[s].or_accepted_into(row)

    def _lookup_key(self, cfg: Config) -> MaskKey | None:
        """The cache key of ``cfg`` (None: its mask is not cached), remembered per configuration; a
        real key for a context-free one too (a batch gathers every row from the cache).  A
        context-free configuration's key has no stack part (a top without uncertain tokens never
        gets a signature depth or a split): its top states, what :meth:`_key` makes of it at a fifth
        of the cost.  Tops not classified yet are left to the batch's worker threads."""
        key = self._keys.get(cfg, _NO_KEY)  # not try/except: a batch's every new configuration misses here
        if key is _NO_KEY and self._context_free(cfg, classify=False):
            key = self._remember(cfg, self._context_free_key(cfg))
        if key is _NO_KEY:
            return self._current_key(cfg)
        return _cache_key(key)

    def _current_key(self, cfg: Config) -> MaskKey | None:
        """The cache key of ``cfg`` at the signature depths as they are now (remembered, replacing a
        key made before a computation deepened them)."""
        return self._remember(cfg, self._key(cfg, self._compiled.signature_depth))  # type: ignore[return-value]

    def _remember(self, cfg: Config, key: object) -> object:
        """Remember ``key`` (a cache key or None) for ``cfg`` in the stack space, for every matcher
        in it, and return it."""
        return self._space.remember(cfg, key)

    def _key(self, cfg: Config, depths: dict[int, int]) -> MaskKey | None:
        """The id (:mod:`pda.mask_keys`) of the tuple of each top's part (:meth:`_top_part`).
        Remembers the parts with what they were made from (:meth:`_basis`), for
        :meth:`_compute_entry`; a key of the configuration made before keeps the parts of the tops
        whose depth and split state are the same (a computation that deepened one top's key walked
        no other top again: 36 us a miss on the built-in JSON grammar)."""
        basis = self._basis(cfg, depths)  # first: a depth that grows meanwhile only deepens the key
        last = self._last_key
        old = last[1] if last is not None and last[0] is cfg and last[2] is not None else None
        parts: list[Any] = []
        for i, (s, parents) in enumerate(cfg.tops):
            part = last[2][i] if old is not None and old[i] == basis[i] else self._top_part(s, parents, depths)  # type: ignore[index]
            if part is None:
                break
            parts.append(part)
        whole = tuple(parts) if len(parts) == len(cfg.tops) else None
        self._last_key = (cfg, basis, whole)
        return None if whole is None else self._compiled.mask_keys.id_of(whole)

    def _context_free_key(self, cfg: Config) -> int:
        """The key of a context-free configuration, as remembered: ``~id`` of the id of its top
        states with no stack part (:func:`_cache_key`)."""
        return ~self._compiled.mask_keys.id_of(tuple((s, ()) for s, _ in cfg.tops))

    def _basis(self, cfg: Config, depths: dict[int, int]) -> tuple[tuple[int, bool], ...]:
        """What a key of ``cfg`` depends on besides the configuration: each top's depth and whether
        it is split (states only ever become split, and depths only grow)."""
        split = self._compiled.split_tops.states
        return tuple((depths.get(s, 0), s in split) for s, _ in cfg.tops)

    def _top_part(self, s: int, parents: tuple[int, ...], depths: dict[int, int]) -> Any:
        """Top ``s``'s part of a key: its state with the signature of its top ``depths[s]`` frames (0
        when absent); for a split top (:meth:`_split_path`), its state, top frames and the ids its
        deep tokens accept on its stack (:mod:`pda.split_tops`; a new stack pattern walks those few
        here).  None: not cacheable."""
        comp = self._compiled
        if s in comp.split_tops.states and SPLIT_TOPS:
            unc = comp.classes.get(s).uncertain
            path = self._split_path(parents, unc)
            if path is not None:
                return comp.split_tops.part(s, unc, path)
        d = depths.get(s, 0)
        sig = self._stacks.signature(parents, d) if d else ()  # most tops read no frame
        return None if sig is None else (s, sig)

    def _compute_row(self, cfg: Config, cache: Any) -> np.ndarray:
        """Build the mask of ``cfg`` (without stop tokens) and store it in ``cache`` (unless None)
        when an exact key exists for it.  Reads the state only; safe to run on a worker thread."""
        row, key = self._compute_entry(cfg)
        if self._context_free(cfg):  # built from its classes from now on (_write_context_free)
            self._remember(cfg, self._context_free_key(cfg))
        elif key is not None and cache is not None:
            cache.put(key, row)
        return row

    def _context_free(self, cfg: Config, classify: bool = True) -> bool:
        """Whether no top of ``cfg`` has uncertain tokens: its masks are then built by
        :meth:`_write_context_free`, not read from the cache.  Classifies the tops met for the
        first time: the cache cannot hold a row of a configuration with such a top (no row was
        computed for it), so its fill needs their classes anyway.  Without ``classify``, a top not
        classified yet counts as uncertain (a batch reading its keys on the calling thread)."""
        classes = self._compiled.classes
        get = classes.get if classify else classes.by_state.get
        for s, _ in cfg.tops:
            c = get(s)
            if c is None or c.uncertain.shape[0]:
                return False
        return True

    def _compute_entry(self, cfg: Config) -> tuple[np.ndarray, MaskKey | None]:
        """The mask of ``cfg`` (without stop tokens) and the exact key to cache it under (None: not
        cacheable).  The key's signatures are as deep as the checks read, which may be deeper than
        the key :meth:`_lookup_key` gave before the computation: store under this one."""
        comp = self._compiled
        classes = comp.classes
        row = np.zeros(comp.words, dtype=np.int32)
        depth = comp.signature_depth
        depths: dict[int, int] = {}
        cacheable = True
        last = self._last_key  # the lookup key's parts: a split top's deep ids are decided there
        parts = last[2] if last is not None and last[0] is cfg else None
        for i, (s, parents) in enumerate(cfg.tops):
            c = classes.get(s)
            c.or_accepted_into(row)
            depths[s] = depth.get(s, 0)
            path = self._split_path(parents, c.uncertain) if s in comp.split_tops.states and SPLIT_TOPS else None
            if path is not None:
                part = parts[i] if parts is not None and len(parts[i]) == 4 else None
                cacheable &= self._add_split(row, s, parents, c.uncertain, path, part)
            elif c.uncertain.shape[0]:
                ids, read = self._top_survivors(s, parents, c.uncertain)
                if ids.shape[0]:
                    set_bits(row, ids)
                if read is None:
                    cacheable = False
                elif read > depths[s]:
                    depths[s] = read
                    if read > depth.get(s, 0):
                        depth[s] = read  # a race may lose this update: then keys only miss more
                    if read > SPLIT_DEPTH:  # from now on keyed by its deep tokens' outcome
                        comp.split_tops.mark_split(s)
        key = self._key(cfg, depths) if cacheable else None  # the lookup key's parts, where nothing changed
        self._remember(cfg, key)
        return row, key

    def _split_path(self, parents: tuple[int, ...], unc: np.ndarray) -> np.ndarray | None:
        """The linear stack below a split top: one linear stack and some uncertain tokens, fewer
        than frame classes start at; else None."""
        if not 0 < unc.shape[0] < FRAME_MIN_UNCERTAIN:
            return None
        paths = self._stacks.paths(parents)
        return paths[0] if paths is not None and len(paths) == 1 else None

    def _add_split(self, row: np.ndarray, s: int, parents: tuple[int, ...], unc: np.ndarray, path: np.ndarray,
                   part: tuple[int, tuple[int, ...], bool, tuple[int, ...]] | None = None) -> bool:
        """Set in ``row`` the uncertain tokens of split top ``s`` that its stack ``path`` accepts
        (:mod:`pda.split_tops`); False when that is not cacheable (a deep walk overflowed: its
        tokens are decided by the byte walker).  ``part``: this top's key part, made on the same
        stack (:meth:`pda.split_tops.SplitTops.part`), whose deep ids are then not decided again
        (a level's lookup a frame at a time, up to the depth of the document's nesting)."""
        split = self._compiled.split_tops
        frames, deeper = split.top(path) if part is None else part[1:3]
        shallow = split.shallow(s, unc, path, frames, deeper)
        if shallow.accepted.shape[0]:
            set_bits(row, shallow.accepted)
        ids = split.deep_ids(s, shallow, path, frames, deeper) if part is None else part[3]
        if ids is None:
            ok = np.zeros(shallow.deep.shape[0], dtype=np.bool_)
            self._decide_by_bytes(s, parents, shallow.deep, ok)
            set_bits(row, self._compiled.trie.order[shallow.deep[ok]].astype(np.int32))
            return False
        if ids:
            set_bits(row, np.array(ids, dtype=np.int32))
        return True

    def _top_survivors(self, s: int, parents: tuple[int, ...], unc: np.ndarray) -> tuple[np.ndarray, int | None]:
        """:meth:`_survivors`, kept per (state, the paths of the frames read) in the grammar's
        :class:`~pda.walk_results.WalkResults`: a new combination of tops met before walks none."""
        memo = self._compiled.top_survivors
        got = memo.find(s, lambda depth: self._stacks.signature(parents, depth))
        if got is not None:
            return got  # type: ignore[return-value]
        ids, read = self._survivors(s, parents, unc)
        sig = self._stacks.signature(parents, read) if read is not None else None
        if sig is not None:
            memo.store(s, sig, read, ids, ids.nbytes + 16 * read * max(1, len(sig)) + 200)  # type: ignore[operator]
        return ids, read

    def _survivors(self, s: int, parents: tuple[int, ...], unc: np.ndarray) -> tuple[np.ndarray, int | None]:
        """The ids of the uncertain tokens ``unc`` (sorted-trie indices) that the real stack below
        top ``s`` accepts, and how many frames the walks read (None: read by the byte walker,
        which reads any depth, so not cacheable)."""
        comp = self._compiled
        paths = self._stacks.paths(parents)
        ok = np.zeros(unc.shape[0], dtype=np.bool_)
        ws = thread_workspace(comp.max_token_length)
        if ONE_CALL_SURVIVORS and paths is not None and len(paths) == 1 and unc.shape[0] < FRAME_MIN_UNCERTAIN:
            # the usual case, what the rest of this method does for it, in one kernel call
            classes = comp.classes
            ids, frames, overflow = survivors_on_path(comp.kernel, comp.trie, unc, s, paths[0], ws, classes.plain_runs,
                                                      classes.plain_to_end, classes.plain_chars(), ok)
            if not overflow:
                return ids, frames
            self._decide_by_bytes(s, parents, unc, ok)
            return comp.trie.order[unc[ok]].astype(np.int32), None
        out = np.empty(unc.shape[0], dtype=np.int8)
        read: int | None = 0
        fallback = paths is None
        walked: list[tuple[int, tuple[int, ...]]] = []  # (frames read, those frames) of each walk
        if paths:  # tokens of plain string characters within the run over the stack (pda.plain_runs)
            classes = comp.classes
            run, to_end = classes.plain_runs, classes.plain_to_end
            for path in paths:
                within, frames = stack_run(run, to_end, s, path, RUN_CAP)
                if frames:
                    mark_within(classes.plain_chars(), unc, within, ok)
                    read = max(read, frames)  # type: ignore[type-var]
        for path in paths or ():
            # A walk answers alike for every stack that agrees on the frames it read (what makes
            # the mask cache exact): a stack that agrees with a walked one there adds nothing.
            if any(top_frames(path, r) == top for r, top in walked):
                continue
            todo = np.flatnonzero(~ok)  # tokens another stack accepted need no walk on this one
            if todo.shape[0] == 0:
                break
            todo, framed = comp.classes.within_most(s, path, unc, todo)  # long plain tokens: rejected
            if todo.shape[0] >= FRAME_MIN_UNCERTAIN and path.shape[0]:
                todo, by_frame = self._by_frame_classes(s, int(path[-1]), unc, todo, ok)
                framed = max(framed, by_frame)
            cand = unc if todo.shape[0] == unc.shape[0] else unc[todo]
            got = out[:cand.shape[0]]
            r = walk_tokens(comp.kernel, comp.trie, cand, s, path, False, got, ws) if cand.shape[0] else 0
            r = max(r, framed)
            read = max(read, r)  # type: ignore[type-var]
            walked.append((r, top_frames(path, r)))
            ok[todo[got == TOKEN_ACCEPTED]] = True
            if (got == TOKEN_OVERFLOW).any():
                fallback = True
        if fallback:  # exotic stacks: decide the undecided tokens with the byte walker
            read = None
            self._decide_by_bytes(s, parents, unc, ok)
        return comp.trie.order[unc[ok]].astype(np.int32), read

    def _decide_by_bytes(self, s: int, parents: tuple[int, ...], unc: np.ndarray, ok: np.ndarray) -> None:
        """Set ``ok[j]`` for each undecided token ``unc[j]`` that top ``s`` accepts on its real stack,
        with the byte walker (which reads any depth): for stacks the token walk cannot take."""
        comp = self._compiled
        start = Config(((s, parents),), False)
        data, offsets = comp.trie.data, comp.trie.offsets
        for j in np.flatnonzero(~ok).tolist():
            i = unc[j]
            arr = data[offsets[i]:offsets[i + 1]]
            _, pos = self._walker.run(start, arr, 0, len(arr))
            ok[j] = pos == len(arr)

    def _by_frame_classes(self, s: int, ret: int, unc: np.ndarray, todo: np.ndarray,
                          ok: np.ndarray) -> tuple[np.ndarray, int]:
        """Decide the tokens ``unc[todo]`` that the frame classes of ``(s, ret)`` decide
        (:meth:`pda.precompute.TokenClasses.frame_codes`): accepted ones are set in ``ok``.
        Returns the positions still to walk on the real stack, and the frames read (1: ``ret``;
        0 when there are no frame classes and nothing was decided)."""
        classes = self._compiled.classes
        codes = classes.frame_codes(s, ret, unc)
        short = classes.short_tokens(s)
        if codes is None or codes.shape[0] != np.count_nonzero(short):
            return todo, 0
        every = np.full(unc.shape[0], TOKEN_UNCERTAIN, dtype=np.int8)
        every[short] = codes
        mine = every if todo.shape[0] == unc.shape[0] else every[todo]
        ok[todo[mine == TOKEN_ACCEPTED]] = True
        return todo[mine == TOKEN_UNCERTAIN], 1

    # ------------------------------------------------------------------ jump forward

    def find_jump_forward_string(self) -> str:
        """The longest text the grammar forces from here (reads the state only).

        Stops where more than one byte could follow, or where the text could end; returns only
        whole UTF-8 characters."""
        if self.is_terminated():
            return ""
        cfg = self._cfg
        out = bytearray()
        while not cfg.accepting and len(out) < _MAX_JUMP:
            nxt = self._walker.expected(cfg)
            if len(nxt) != 1:
                break
            out.append(nxt[0])
            cfg = self._walker.step(cfg, nxt[0])
        text = bytes(out)
        for cut in range(len(text), max(len(text) - 4, -1), -1):
            try:
                return text[:cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
        return ""
