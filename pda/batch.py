"""Batches: the masks of many matchers filled together, with XGrammar's names and shapes.

``BatchGrammarMatcher.batch_fill_next_token_bitmask(matchers, bitmask, indices)`` works in three
passes:

1. For each matcher (in order, on the calling thread) the cache key of its configuration; a row
   whose key is in its grammar's mask cache is copied at once (CPU) or noted (CUDA).
2. The misses, each distinct (grammar, key) once, are computed on worker threads: the token walks
   are numba kernels that release the GIL, so misses of different matchers run in parallel.
3. On CUDA, each grammar's rows are gathered from its device-resident pool with one index
   operation (only the misses crossed from host to device); then the stop tokens of matchers
   whose text is complete are set.

Matchers of a batch may belong to different compiled grammars and tokenizers of one vocabulary
size.  A matcher must not appear twice in one batch.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np

from .errors import BitmaskError

if TYPE_CHECKING:
    from .matcher import GrammarMatcher

__all__ = ["BatchGrammarMatcher"]


class _Uncached(int):
    """The pending-work key of a matcher whose mask has no cache key (computed on its own)."""


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
        rows = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
        if len(rows) != len(matchers):
            raise BitmaskError(f"{len(matchers)} matchers but {len(rows)} indices")
        if len({id(m) for m in matchers}) != len(matchers):
            raise BitmaskError("a matcher appears more than once in the batch")
        if not matchers:
            return
        words = matchers[0]._compiled.words
        host, device = _target(bitmask, words, rows)
        if host is not None:
            self._fill_host(matchers, host, rows, debug_print)
        else:
            self._fill_device(matchers, bitmask, rows, str(device), debug_print)

    def _fill_host(self, matchers: Sequence[GrammarMatcher], host: np.ndarray, rows: list[int],
                   debug_print: bool) -> None:
        pending: dict[tuple[int, Any], list[int]] = {}  # (grammar id, key) -> batch positions
        for k, m in enumerate(matchers):
            row = host[rows[k]]
            if m._finished():
                row[:] = 0
                continue
            key = m._lookup_key(m._cfg)
            if key is not None and m._compiled.mask_cache().get_into(key, row):
                continue
            pending.setdefault((id(m._compiled), key if key is not None else _Uncached(k)), []).append(k)
        self._compute(matchers, pending, lambda k: host[rows[k]], debug_print)
        for k, m in enumerate(matchers):
            if not m._finished():
                m._add_stops(m._cfg, host[rows[k]])

    def _compute(self, matchers: Sequence[GrammarMatcher], pending: dict[tuple[int, Any], list[int]],
                 row_of: Any, debug_print: bool, *, store: bool = True) -> None:
        """Compute each pending key's row once (on worker threads), into every position that needs
        it; ``store``: also into the grammar's CPU mask cache."""

        def one(positions: list[int]) -> None:
            first = matchers[positions[0]]
            cfg = first._cfg
            row = first._compute_row(cfg, first._compiled.mask_cache() if store else None)
            for k in positions:
                row_of(k)[:] = row

        groups = list(pending.values())
        pool = self._executor() if len(groups) > 1 else None
        if pool is None:
            for g in groups:
                one(g)
        else:
            list(pool.map(one, groups))
        if debug_print:
            print(f"pda batch: {len(matchers)} matchers, {len(groups)} masks computed")

    def _fill_device(self, matchers: Sequence[GrammarMatcher], bitmask: Any, rows: list[int], device: str,
                     debug_print: bool) -> None:
        import torch

        by_grammar: dict[int, list[int]] = {}
        for k, m in enumerate(matchers):
            by_grammar.setdefault(id(m._compiled), []).append(k)
        zero_rows = [rows[k] for k, m in enumerate(matchers) if m._finished()]
        if zero_rows:
            bitmask[torch.tensor(zero_rows, device=bitmask.device)] = 0
        for positions in by_grammar.values():
            live = [k for k in positions if not matchers[k]._finished()]
            if not live:
                continue
            compiled = matchers[live[0]]._compiled
            cache = compiled.mask_cache(device)
            keys = [matchers[k]._lookup_key(matchers[k]._cfg) for k in live]
            staged: dict[int, np.ndarray] = {}  # uncacheable rows, copied one by one
            with cache.pinned() as batch:
                slots: list[Any] = batch.get_many([key for key in keys if key is not None])
                slot_of = iter(slots)
                pending: dict[tuple[int, Any], list[int]] = {}
                for k, key in zip(live, keys):
                    slot = next(slot_of) if key is not None else None
                    if slot is None:  # a miss, or not cacheable
                        pending.setdefault((id(compiled), key if key is not None else _Uncached(k)), []).append(k)
                host_rows = {k: np.zeros(compiled.words, dtype=np.int32) for g in pending.values() for k in g}
                self._compute(matchers, pending, lambda k: host_rows[k], debug_print, store=False)
                computed = {key: g[0] for (_, key), g in pending.items() if not isinstance(key, _Uncached)}
                if computed:  # one host-to-device transfer for the batch's misses
                    put = batch.put_many(list(computed), [host_rows[k] for k in computed.values()])
                    slot_by_key = dict(zip(computed, put))
                else:
                    slot_by_key = {}
                fill_slots, fill_rows = [], []
                slots_iter = iter(slots)
                for k, key in zip(live, keys):
                    if key is None:
                        staged[k] = host_rows[k]
                        continue
                    slot = next(slots_iter)
                    fill_slots.append(slot if slot is not None else slot_by_key[key])
                    fill_rows.append(rows[k])
                if fill_slots:
                    cache.gather(fill_slots, bitmask, rows=fill_rows)
            for k, row in staged.items():
                bitmask[rows[k]].copy_(torch.from_numpy(row))
        for k, m in enumerate(matchers):
            if not m._finished() and m._cfg.accepting:
                for t in m._stops.tolist():
                    bit = t & 31
                    bitmask[rows[k], t >> 5] |= (1 << bit) - (1 << 32) if bit == 31 else 1 << bit

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


def _target(bitmask: Any, words: int, rows: list[int]) -> tuple[np.ndarray | None, str | None]:
    """(a numpy view of the rows, None) for numpy and CPU tensors; (None, device) for CUDA."""
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32 or bitmask.ndim != 2:
            raise BitmaskError(f"bitmask must be int32[batch, words], got {bitmask.dtype} with shape {bitmask.shape}")
        host: Any = bitmask
        device = None
    else:
        from .bitmask import _check_bitmask

        t = _check_bitmask(bitmask)
        if t.dim() != 2:
            raise BitmaskError(f"bitmask must be int32[batch, words], got shape {tuple(t.shape)}")
        if t.device.type == "cpu":
            host, device = t.numpy(), None
        else:
            host, device = None, str(t.device)
    shape = bitmask.shape
    if shape[-1] != words:
        raise BitmaskError(f"bitmask rows must have {words} int32 words for this tokenizer, got {shape[-1]}")
    bad = [r for r in rows if not 0 <= r < shape[0]]
    if bad:
        raise BitmaskError(f"bitmask row index {bad[0]} is out of range for {shape[0]} rows")
    return host, device
