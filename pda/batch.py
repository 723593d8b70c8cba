"""Batches: the masks of many matchers filled together, with XGrammar's names and shapes.

``BatchGrammarMatcher.batch_fill_next_token_bitmask(matchers, bitmask, indices)`` works in three
passes:

1. For each matcher (in order, on the calling thread) the cache key of its configuration; the hits
   are looked up in their grammar's mask cache, one lock hold per grammar.  Into a CPU bitmask the
   hits' rows are copied under that hold; on CUDA their slots in the device pool are pinned.
2. The misses, each distinct (grammar, key) once, are computed on worker threads: the token walks
   are numba kernels that release the GIL, so misses of different matchers run in parallel.  A
   matcher that shares another's lookup key shares its row only when its exact key -- as deep as
   the computation read the stack -- is the same too.
3. The new rows go into each grammar's cache under those exact keys.  On CUDA, that is one
   host-to-device transfer per grammar, and then every row is gathered from the device pool into
   the bitmask with one index operation.  Last, the stop tokens of matchers whose text is complete
   are set (one scatter on a device).

A batch of fewer than :data:`LOOP_BELOW` matchers into a host bitmask (numpy, or a tensor not on
CUDA) is a loop of each matcher's own fill (:meth:`~pda.matcher.GrammarMatcher.fill_next_token_bitmask`:
a context-free row copied from its classes, no gather), after the same checks: one matcher took 6
us hot that way where the passes above took 12, and two 8 against 23.

The lookup keys cost a dict lookup a row once any matcher of the grammar has met the
configuration: its matchers share one stack space (:mod:`pda.stack_space`), so matchers at the same
point of a document hold the same configuration object, and its key is remembered there.  Keys are
ints (:mod:`pda.mask_keys`), so the cache's lookups hash and compare in C whatever the stack depth.

Matchers of a batch may belong to different compiled grammars and tokenizers of one vocabulary
size.  A matcher must not appear twice in one batch.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np

from .errors import BitmaskError
from .bitmask import _check_bitmask, cached_host_rows, remember_host_rows
from .kernels import set_bits

if TYPE_CHECKING:
    from .matcher import GrammarMatcher

__all__ = ["BatchGrammarMatcher"]

# Into a host bitmask, fewer matchers than this are filled one by one, each as its own fill does
# (a context-free row copied from its state's classes, the others from the mask cache): the
# batch's passes cost more below it (json.gbnf, warm: 2 matchers 23 us against 8 us one by one,
# 4 matchers 20 against 17.5; equal at 8, and the batch 40 against 61 us at 16).
LOOP_BELOW = 8


class BatchGrammarMatcher:
    """Fills and advances many :class:`~pda.GrammarMatcher` objects at once.

    ``max_threads`` is the number of worker threads that compute cache misses (``"auto"``: the CPU
    count).  The object holds only its thread pool; it may be shared by threads that fill
    different batches.
    """

    def __init__(self, max_threads: int | Literal["auto"] = "auto") -> None:
        if max_threads == "auto":
            threads = os.cpu_count() or 1
        elif isinstance(max_threads, int) and max_threads >= 1:
            threads = max_threads
        else:
            raise ValueError(f"max_threads must be a positive int or 'auto', got {max_threads!r}")
        self.max_threads = threads
        self._pool: ThreadPoolExecutor | None = None

    def _executor(self) -> ThreadPoolExecutor | None:
        if self.max_threads <= 1:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_threads, thread_name_prefix="pda-batch")
        return self._pool

    def batch_fill_next_token_bitmask(self, matchers: Sequence[GrammarMatcher], bitmask: Any,
                                      indices: Sequence[int] | None = None, debug_print: bool = False) -> None:
        """Write matcher ``k``'s mask into row ``indices[k]`` of ``bitmask`` (row ``k`` without
        ``indices``).  ``bitmask`` is ``int32[batch, ceil(vocab/32)]``: a numpy array or a torch
        tensor on CPU or CUDA.  Reads the matchers' states only."""
        n = len(matchers)
        if n == 1 and getattr(bitmask, "is_cuda", False) is False and getattr(bitmask, "ndim", 0) == 2 \
                and (indices is None or len(indices) == 1):
            # one matcher into a host bitmask: its own fill (no gather; the same checks of the bitmask)
            matchers[0].fill_next_token_bitmask(bitmask, 0 if indices is None else int(indices[0]))
            return
        rows = list(range(n)) if indices is None else [int(i) for i in indices]
        if len(rows) != n:
            raise BitmaskError(f"{n} matchers but {len(rows)} indices")
        if len(set(map(id, matchers))) != n:
            raise BitmaskError("a matcher appears more than once in the batch")
        if not n:
            return
        words = matchers[0]._compiled.words
        host, device = _target(bitmask, words, rows, indices is None)
        if host is not None and n < LOOP_BELOW:
            _check_words(matchers, words)
            for m, r in zip(matchers, rows):  # each matcher's own fill, into its row of the host view
                m._fill_row(host[r])
            return
        out: Any = host if host is not None else bitmask
        # one pass over the batch: finished rows, live positions per grammar, lookup keys, stop rows
        keys: list[Any] = [None] * n
        zero_rows: list[int] = []
        complete: list[int] = []
        by_grammar: dict[int, list[int]] = {}
        gid, live = 0, None
        for k, m in enumerate(matchers):
            if id(m._compiled) != gid:  # a batch is usually of one grammar: one dict lookup per run of it
                gid = id(m._compiled)
                if m._compiled.words != words:  # before any row is written
                    raise _other_words(m._compiled.words, words)
                live = by_grammar.setdefault(gid, [])
            finished, key, stops = m._batch_state()
            if finished:
                zero_rows.append(rows[k])
                continue
            keys[k] = key
            if stops:
                complete.append(k)
            live.append(k)  # type: ignore[union-attr]
        if not all(by_grammar.values()):  # a grammar whose matchers are all finished
            by_grammar = {g: live for g, live in by_grammar.items() if live}
        if zero_rows:
            out[_index(zero_rows, out)] = 0
        if host is not None:
            self._fill_host(matchers, by_grammar, keys, host, rows, debug_print)
        else:
            with ExitStack() as pins:
                plans = [_GrammarRows(matchers, live, keys, str(device), pins) for live in by_grammar.values()]
                groups = [(plan, g) for plan in plans for g in plan.pending.values()]
                computed = self._compute(matchers, [g for _, g in groups], debug_print)
                for (plan, _), entry in zip(groups, computed):
                    plan.computed.append(entry)
                for plan in plans:
                    plan.write(bitmask, rows)
        self._set_stops(matchers, complete, out, rows)

    def _fill_host(self, matchers: Sequence[GrammarMatcher], by_grammar: dict[int, list[int]], keys: list[Any],
                   host: np.ndarray, rows: list[int], debug_print: bool) -> None:
        """A CPU bitmask: each grammar's hits are copied from its CPU pool under one lock hold (no
        pins needed); the misses are computed, written and put into the cache (unpinned)."""
        pending: dict[tuple[Any, ...], list[int]] = {}  # (grammar id, lookup key) -> batch positions
        for gid, live in by_grammar.items():
            lookup = [keys[k] for k in live]
            cached = live
            if None in lookup:  # rows without a key: computed on their own
                cached = [k for k in live if keys[k] is not None]
                lookup = [keys[k] for k in cached]
            cache = matchers[live[0]]._compiled.mask_cache()
            hits = cache.get_many_into(lookup, host, [rows[k] for k in cached])
            missed = [k for k, hit in zip(cached, hits) if not hit]
            if cached is not live:
                missed += [k for k in live if keys[k] is None]
            for k in missed:
                key = keys[k]
                pending.setdefault((gid, key) if key is not None else (gid, None, k), []).append(k)  # no key: on its own
        groups = list(pending.values())
        for group in self._compute(matchers, groups, debug_print) if groups else ():
            cache = matchers[group[0][0]]._compiled.mask_cache()
            fresh: dict[Any, np.ndarray] = {}
            for k, row, key in group:
                host[rows[k]] = row
                if key is not None:
                    fresh.setdefault(key, row)
            if fresh:
                cache.put_many(list(fresh), list(fresh.values()))

    def _compute(self, matchers: Sequence[GrammarMatcher], groups: list[list[int]],
                 debug_print: bool) -> list[list[tuple[int, np.ndarray, Any]]]:
        """(position, row, exact key) for every position of each group, the group's configuration
        computed once (groups on worker threads when there are several: the token walks are numba
        kernels that release the GIL)."""
        pool = self._executor() if len(groups) > 1 else None
        got = [_compute_group(matchers, g) for g in groups] if pool is None else list(
            pool.map(lambda g: _compute_group(matchers, g), groups))
        if debug_print:
            print(f"pda batch: {len(matchers)} matchers, {len(groups)} masks computed")
        return got

    @staticmethod
    def _set_stops(matchers: Sequence[GrammarMatcher], complete: list[int], out: Any, rows: list[int]) -> None:
        """Set the stop tokens of the matchers at positions ``complete`` (their text is a sentence;
        on a device, one scatter per distinct set of stop tokens: usually one for the whole batch)."""
        by_stops: dict[bytes, list[int]] = {}  # the stop words' bytes -> batch positions
        for k in complete:
            m = matchers[k]
            if isinstance(out, np.ndarray):
                set_bits(out[rows[k]], m._stops)
            else:
                by_stops.setdefault(m._stops.tobytes(), []).append(k)
        if not by_stops:
            return
        torch = _torch()
        for stops, ks in by_stops.items():
            words, bits = _stop_cells(stops)
            r = np.array([rows[k] for k in ks], dtype=np.int64)
            # (row, word, bits) of every cell in one array: one transfer to the device
            cells = np.empty((3, r.shape[0], words.shape[0]), dtype=np.int64)
            cells[0] = r[:, None]
            cells[1] = words[None, :]
            cells[2] = bits[None, :]
            on = torch.from_numpy(cells).to(out.device)
            # a row's words are distinct; a repeated row (two matchers given one index) gets the same bits
            out[on[0], on[1]] |= on[2].to(torch.int32)

    @staticmethod
    def batch_accept_token(matchers: Sequence[GrammarMatcher], tokens: Sequence[int],
                           debug_print: bool = False) -> list[bool]:
        """``[m.accept_token(t) for m, t in zip(matchers, tokens)]`` (changes each matcher's state
        where its token is accepted)."""
        if len(matchers) != len(tokens):
            raise ValueError(f"{len(matchers)} matchers but {len(tokens)} tokens")
        out = [m.accept_token(int(t)) for m, t in zip(matchers, tokens)]
        if debug_print:
            print(f"pda batch: accepted {sum(out)} of {len(out)} tokens")
        return out

    @staticmethod
    def batch_accept_string(matchers: Sequence[GrammarMatcher], strings: Sequence[str | bytes],
                            debug_print: bool = False) -> list[bool]:
        """``[m.accept_string(s) for m, s in zip(matchers, strings)]``."""
        if len(matchers) != len(strings):
            raise ValueError(f"{len(matchers)} matchers but {len(strings)} strings")
        out = [m.accept_string(s) for m, s in zip(matchers, strings)]
        if debug_print:
            print(f"pda batch: accepted {sum(out)} of {len(out)} strings")
        return out


class _GrammarRows:
    """The rows of one compiled grammar's live matchers in a batch fill.

    Made, from the batch's lookup keys: the hits' slots in the grammar's mask cache on ``device`` (pinned
    until ``pins`` closes); ``pending`` groups the misses by key (each computed once, by the
    caller, into ``computed`` in the same order).  ``write`` stores the new rows under the exact
    keys the computations gave (one transfer to the device) and gathers every cached row into
    ``out`` with one index operation; rows without a key are copied one by one."""

    def __init__(self, matchers: Sequence[GrammarMatcher], live: list[int], lookup_keys: list[Any], device: str,
                 pins: ExitStack) -> None:
        self.live = live
        self.cache = matchers[live[0]]._compiled.mask_cache(device)
        self.batch = pins.enter_context(self.cache.pinned())
        keys = [lookup_keys[k] for k in live]
        cached = [(k, key) for k, key in zip(live, keys) if key is not None]
        self.slot: dict[int, int] = {}
        for (k, _), slot in zip(cached, self.batch.get_many([key for _, key in cached])):
            if slot is not None:
                self.slot[k] = slot
        self.pending: dict[Any, list[int]] = {}  # lookup key (or (None, position)) -> batch positions
        for k, key in zip(live, keys):
            if k not in self.slot:
                self.pending.setdefault(key if key is not None else (None, k), []).append(k)  # no key: on its own
        self.computed: list[list[tuple[int, np.ndarray, Any]]] = []  # per pending group

    def write(self, out: Any, rows: list[int]) -> None:
        fresh: dict[Any, np.ndarray] = {}  # exact key -> row
        keyed: list[tuple[int, Any]] = []
        direct: list[tuple[int, np.ndarray]] = []
        for k, row, key in (entry for group in self.computed for entry in group):
            if key is None:
                direct.append((k, row))
            else:
                fresh.setdefault(key, row)
                keyed.append((k, key))
        if fresh:  # one transfer of the batch's new rows to the pool's device
            slot_of = dict(zip(fresh, self.batch.put_many(list(fresh), list(fresh.values()))))
            for k, key in keyed:
                self.slot[k] = slot_of[key]
        order = [k for k in self.live if k in self.slot]
        if order:
            self.cache.gather([self.slot[k] for k in order], out, rows=[rows[k] for k in order])
        for k, row in direct:
            if isinstance(out, np.ndarray):
                out[rows[k]] = row
            else:
                out[rows[k]].copy_(_torch().from_numpy(row))


def _target(bitmask: Any, words: int, rows: list[int], in_order: bool) -> tuple[np.ndarray | None, str | None]:
    """(a numpy view of the rows, None) for numpy and CPU tensors; (None, device) for CUDA.
    ``in_order``: ``rows`` is ``0 .. len(rows) - 1``."""
    host: Any = None if isinstance(bitmask, np.ndarray) else cached_host_rows(bitmask)
    device = None
    if host is None or len(bitmask.shape) != 2:  # else: the CPU tensor this thread filled last, checked then
        host, device = _host_or_device(bitmask)
    shape = bitmask.shape
    if shape[-1] != words:
        raise BitmaskError(f"bitmask rows must have {words} int32 words for this tokenizer, got {shape[-1]}")
    height = int(shape[0])
    if in_order and len(rows) > height:
        raise BitmaskError(f"bitmask row index {height} is out of range for {height} rows")
    if not in_order:
        bad = [r for r in rows if not 0 <= r < height]
        if bad:
            raise BitmaskError(f"bitmask row index {bad[0]} is out of range for {height} rows")
    return host, device


def _check_words(matchers: Sequence[GrammarMatcher], words: int) -> None:
    """Every matcher's rows have ``words`` int32 words (the batch's vocabulary size), checked once
    per run of matchers of one compiled grammar, before any row is written."""
    last = None
    for m in matchers:
        if m._compiled is not last:
            last = m._compiled
            if last.words != words:
                raise _other_words(last.words, words)


def _other_words(got: int, words: int) -> BitmaskError:
    return BitmaskError(f"the batch's matchers must share one vocabulary size: rows of {got} and {words} int32 words")


def _host_or_device(bitmask: Any) -> tuple[np.ndarray | None, str | None]:
    """Check that ``bitmask`` is ``int32[batch, words]``: (its numpy view, None) for numpy and CPU
    tensors (a CPU tensor's view is kept for the next step, :func:`pda.bitmask.cached_host_rows`);
    (None, device) for CUDA."""
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32 or bitmask.ndim != 2:
            raise BitmaskError(f"bitmask must be int32[batch, words], got {bitmask.dtype} with shape {bitmask.shape}")
        return bitmask, None
    t = _check_bitmask(bitmask)
    if t.dim() != 2:
        raise BitmaskError(f"bitmask must be int32[batch, words], got shape {tuple(t.shape)}")
    if t.device.type != "cpu":
        return None, str(t.device)
    host = t.numpy()
    remember_host_rows(t, host)
    return host, None


def _compute_group(matchers: Sequence[GrammarMatcher], positions: list[int]) -> list[tuple[int, np.ndarray, Any]]:
    """Compute the first matcher's mask; the others of the group (same lookup key) share it when
    their exact key -- with the signature depths the computation may just have deepened -- is the
    same, and are computed on their own otherwise."""
    first = matchers[positions[0]]
    row, key = first._compute_entry(first._cfg)
    out = [(positions[0], row, key)]
    for k in positions[1:]:
        m = matchers[k]
        mine = m._current_key(m._cfg) if key is not None else None
        out.append((k, row, key) if mine is not None and mine == key else (k, *m._compute_entry(m._cfg)))
    return out


@lru_cache(maxsize=64)
def _stop_cells(stops: bytes) -> tuple[np.ndarray, np.ndarray]:
    """A matcher's stop tokens (its ``_stops``' bytes) as (their distinct words, the OR of their
    bits in each, as int64 holding the int32 word), once per set of stop tokens."""
    ids = np.frombuffer(stops, dtype=np.int32).astype(np.int64)
    words, where = np.unique(ids >> 5, return_inverse=True)
    bits = np.zeros(words.shape[0], dtype=np.int64)
    np.bitwise_or.at(bits, where, np.left_shift(np.int64(1), ids & 31))
    return words, bits.astype(np.uint32).view(np.int32).astype(np.int64)


def _torch() -> Any:
    import torch  # lazy: numpy bitmasks need no torch

    return torch


def _index(rows: list[int], out: Any) -> Any:
    """``rows`` as an index of ``out`` (a numpy array, or a tensor on its device)."""
    if isinstance(out, np.ndarray):
        return np.asarray(rows, dtype=np.int64)
    return _torch().tensor(rows, dtype=_torch().long, device=out.device)
