"""The adaptive (state, stack-signature) mask cache: final token-bitmask rows in a device pool.

What a key is
    Final masks are cached per key, shared by every matcher of one compiled grammar.  The matcher
    computes the keys; this module treats them as opaque hashables and relies on one contract:
    **two equal keys always have the same mask**.  The matcher meets it with a key made of the
    automaton state(s) and, for each, the signature of the top ``d`` stack frames, where ``d`` is
    the deepest frame any uncertain-token check has ever read for that state.  The check is
    deterministic and only reads those frames, so another stack that agrees on them makes the same
    reads and gets the same mask: a hit is always exact, never a guess from a shallower key.  When
    a check reads deeper than ``d``, ``d`` grows and later keys for that state are longer; entries
    under the older, shorter keys are never asked for again and age out of the LRU order.  The
    matcher hands over each key as its int id in the grammar's table (:mod:`pda.mask_keys`: equal
    key tuples, equal ids), so a lookup hashes and compares in C.  The first row stored for a key
    wins: ``put`` of a key that is present returns its slot and does not compare the rows.

The pool
    Rows are ``int32[words]`` in the xgrammar/vLLM bitmask layout (bit ``t & 31`` of word
    ``t >> 5`` set when token ``t`` is allowed).  They live in one preallocated tensor
    ``pool = torch.int32[capacity, words]`` on ``device`` (CPU or CUDA).  A key maps to a *slot*,
    a row index of the pool.  The pool starts with ``initial_rows`` rows and doubles (a new tensor,
    the old rows copied over on the device) when it is full, up to ``max_bytes // (4 * words)``
    rows: ``capacity * words * 4 <= max_bytes`` always holds (while a growth copies, the old pool
    is alive too, up to half as much again, until the copy is done).  On CPU, a bound of at most
    ``RESERVE_MAX_BYTES`` is allocated whole at once as zero pages (:mod:`pda.cache.row_reserve`):
    the pool is a view of its first ``capacity`` rows, and a growth makes the view longer without
    copying.  The rows ahead of the slots handed out are mapped in on the background thread, and a
    dead cache's reserve goes to the next cache of its shape, so that a fill rarely pays a page
    fault for the first write of a row.  ``gather`` writes a batch's rows into a bitmask with one
    index operation on the pool's device, so on CUDA only misses cross from host to device
    (``put`` copies one row, ``put_many`` all of its rows in one transfer; ``gather`` sends its slot
    indices, unless they already are a tensor on the device).
    A CPU pool is shared with a numpy view, so CPU callers read and write rows without torch.

Eviction and slot lifetime
    Once the pool has reached its bound, a new key takes the slot of the least recently used entry
    (``get`` and ``put`` of a present key make it the most recent).  So a slot is only valid until
    a later ``put`` -- from any thread -- can evict it:

    * a slot from ``get``/``put`` is safe to ``gather`` when no other thread puts in between;
    * ``get_many``/``put_many`` hold the lock once for all their keys; slots returned by one call
      are never evicted by that same call (and its keys are all distinct slots);
    * a batch that must keep its slots across its misses' computation and its ``gather``, while
      other threads put, pins them::

          with cache.pinned() as batch:
              slots = batch.get_many(keys)            # None for a miss
              miss = [i for i, s in enumerate(slots) if s is None]
              rows = [compute_mask(keys[i]) for i in miss]   # outside the lock
              for i, s in zip(miss, batch.put_many([keys[i] for i in miss], rows)):
                  slots[i] = s
              cache.gather(slots, bitmask, rows=indices)
          # leaving the block unpins them

      A pinned slot is neither evicted nor overwritten; when every slot is pinned and the pool is
      at its bound, a ``put`` raises :class:`~pda.errors.LimitExceededError` (``max_bytes`` must
      hold the rows of the batches in flight at once).

Thread safety
    One lock guards the key map, the LRU order, the pins, the counters and every write into the
    pool (a row copy, or growth).  ``gather`` and ``row`` read outside it: growth swaps in a new
    tensor after copying, so a reader holding the old one still sees the right rows for slots
    that are pinned (or that no concurrent ``put`` evicts).  Computing a mask is the caller's work
    and happens outside the lock.

Counters: ``stats()`` returns ``hits``, ``misses`` (counted by ``get``/``get_many``), ``evictions``,
``entries``, ``bytes`` (the pool tensor's), ``capacity_rows`` and ``hit_rate``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from pda.bitmask import copy_row_runs
from pda.errors import BitmaskError, LimitExceededError

from pda.cache.row_reserve import RESERVE_MAX_BYTES, Reserve, hand_over, map_ahead, take_reserve

__all__ = ["MaskCache", "PinnedBatch", "DEFAULT_MAX_BYTES"]

DEFAULT_MAX_BYTES = 256 << 20  # 256 MiB: about 16,600 rows of a 129,280-token vocabulary


class MaskCache:
    """Token-bitmask rows cached by key in a bounded, LRU-evicted pool tensor on ``device``.

    ``words`` is the row length (``ceil(vocab_size / 32)``); ``max_bytes`` bounds the pool tensor
    (at least one row); ``initial_rows`` is the pool's first capacity (it doubles when full).
    """

    def __init__(
        self,
        words: int,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        device: str | torch.device = "cpu",
        initial_rows: int = 64,
    ) -> None:
        if int(words) != words or words < 1:
            raise BitmaskError(f"MaskCache: words must be a positive int, got {words!r}")
        if int(initial_rows) != initial_rows or initial_rows < 1:
            raise BitmaskError(f"MaskCache: initial_rows must be a positive int, got {initial_rows!r}")
        self.words = int(words)
        self.row_bytes = 4 * self.words
        if max_bytes < self.row_bytes:
            raise BitmaskError(
                f"MaskCache: max_bytes={max_bytes} holds no row of {self.words} int32 words "
                f"({self.row_bytes} bytes); pass max_bytes >= {self.row_bytes}"
            )
        self.max_bytes = int(max_bytes)
        self.max_rows = self.max_bytes // self.row_bytes
        self.device = _device_named(device) if isinstance(device, str) else torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise BitmaskError(f"MaskCache: device {str(device)!r} asked for, but torch sees no CUDA device")
        self._initial_rows = min(int(initial_rows), self.max_rows)
        self._lock = threading.Lock()
        self._handover: weakref.finalize | None = None  # hands the CPU reserve on at this cache's death
        self._alloc(self._initial_rows)
        self.device = self.device if self._tensor is None else self._tensor.device  # with its index ("cuda:0")
        self._on_cpu = self.device.type == "cpu"

    # ---- pool ------------------------------------------------------------------------------

    def _alloc(self, rows: int) -> None:
        """A fresh, empty pool of ``rows`` rows (under the lock, or from ``__init__``)."""
        if self._handover is not None:  # clear(): the old reserve is freed with its last view, not handed over
            self._handover.detach()
        self._held: Reserve | None = None
        self._handover = None
        self._tensor: torch.Tensor | None = None
        if self.device.type == "cpu" and self.max_rows * self.row_bytes <= RESERVE_MAX_BYTES:
            # the whole bound at once, as zero pages the OS maps in only when a row is written: a
            # growth is then a longer view, not a copy (7 ms for a pool of a few MiB, in one fill)
            held = self._held = take_reserve(self.max_rows, self.words)
            self._used = [rows]  # rows ever in the pool (its owner's writes touched no others)
            self._handover = weakref.finalize(self, hand_over, held, self._used)
            self._host: np.ndarray | None = held.rows[:rows]  # its torch view is made when asked (_pool)
            self._map_ahead(rows)  # nothing to ask when a dead cache's reserve came with them mapped
        else:  # on CPU calloc'd pages: torch.zeros fills them eagerly (~10 ms for 1 MiB here)
            self._tensor = torch.from_numpy(np.zeros((rows, self.words), dtype=np.int32)) if self.device.type == "cpu" \
                else torch.zeros((rows, self.words), dtype=torch.int32, device=self.device)
            self._host = self._tensor.numpy() if self._tensor.device.type == "cpu" else None
        self._lru: OrderedDict[Hashable, int] = OrderedDict()
        self._free: list[int] = list(range(rows - 1, -1, -1))  # pop() hands out low slots first
        self._pins = [0] * rows
        self._orphans: set[int] = set()  # pinned slots whose entry clear() dropped
        self._hits = self._misses = self._evictions = 0

    @property
    def _pool(self) -> torch.Tensor:
        """The pool as a torch tensor; a reserve's is made on first use (a matcher's own fills use
        the numpy view only: making both cost 100-200 µs of the fill that made the cache), and
        dropped by a growth (two threads may both make it: the same memory)."""
        t = self._tensor
        if t is None:
            t = self._tensor = torch.from_numpy(self._host)  # type: ignore[arg-type]
        return t

    @property
    def _reserve(self) -> np.ndarray | None:  # the whole reserve behind a CPU pool (None for other pools)
        return None if self._held is None else self._held.rows

    def _capacity(self) -> int:
        return self._host.shape[0] if self._host is not None else self._pool.shape[0]

    def _grow(self, need: int) -> None:
        """Grow the pool geometrically so that ``need`` more free slots exist, within the bound."""
        cap = self._capacity()
        new_cap = min(self.max_rows, max(2 * cap, cap + need - len(self._free)))
        if new_cap <= cap:
            return
        if self._held is not None:
            self._host = self._held.rows[:new_cap]  # the same memory, more of it
            self._tensor = None  # after the longer view: a reader meanwhile keeps the old tensor
            self._used[0] = new_cap
        else:
            if self._on_cpu:
                pool = torch.from_numpy(np.zeros((new_cap, self.words), dtype=np.int32))
                pool[:cap].copy_(self._pool)
            else:
                pool = torch.empty((new_cap, self.words), dtype=torch.int32, device=self.device)
                pool[cap:].zero_()
                pool[:cap].copy_(self._pool)
            self._tensor = pool
            self._host = pool.numpy() if self._on_cpu else None
        self._free[:0] = range(new_cap - 1, cap - 1, -1)
        self._pins.extend([0] * (new_cap - cap))

    def _map_ahead(self, upto: int) -> None:
        """Have the reserve's rows below ``upto`` mapped in on the background thread, so that their
        first writes, in fills, fault no page (:mod:`pda.cache.row_reserve`)."""
        upto = min(upto, self.max_rows)
        held = self._held
        if held is not None and upto > held.mapped:
            map_ahead(held.rows, held.mapped, upto)
            held.mapped = upto

    def _take_slot(self) -> int:
        """A slot for a new entry: a free one, else after growth, else the LRU unpinned entry's."""
        if not self._free:
            self._grow(1)
        if self._free:
            slot = self._free.pop()
            if self._held is not None and 2 * slot >= self._held.mapped:
                self._map_ahead(2 * self._held.mapped)
            return slot
        for key, slot in self._lru.items():
            if not self._pins[slot]:
                del self._lru[key]
                self._evictions += 1
                return slot
        raise LimitExceededError(
            "MaskCache max_bytes",
            self.max_bytes,
            f"all {self.max_rows} rows of {self.words} words are pinned by batches in flight; "
            "raise max_bytes to hold every row those batches gather",
        )

    def _check_row(self, row: Any) -> np.ndarray:
        arr = np.asarray(row)
        if arr.dtype == np.uint32:
            arr = arr.view(np.int32)
        if arr.dtype != np.int32 or arr.shape != (self.words,):
            raise BitmaskError(
                f"MaskCache: a row must be int32[{self.words}], got {arr.dtype}{list(arr.shape)}"
            )
        return arr

    def _write(self, slots: list[int], rows: list[np.ndarray]) -> None:
        """Copy host rows into pool slots (under the lock): one transfer for all of them."""
        if not slots:
            return
        host = self._host
        if host is not None:  # row by row: no stacked temporary
            for slot, row in zip(slots, rows):
                host[slot] = row
            return
        src = torch.from_numpy(np.stack(rows)).to(self.device)
        index = torch.tensor(slots, dtype=torch.long, device=self.device)
        self._pool.index_copy_(0, index, src)

    # ---- lookups and stores ----------------------------------------------------------------

    def _get(self, key: Hashable, pins: list[int] | None) -> int | None:
        slot = self._lru.get(key)
        if slot is None:
            self._misses += 1
            return None
        self._lru.move_to_end(key)
        self._hits += 1
        if pins is not None:
            self._pins[slot] += 1
            pins.append(slot)
        return slot

    def _get_many(self, keys: Sequence[Hashable], pins: list[int] | None) -> list[int | None]:
        """:meth:`_get` of each key (under the lock), its loop written out: a batch fill looks up
        every row of the batch here."""
        lru = self._lru
        out: list[int | None] = []
        hits = 0
        for k in keys:
            slot = lru.get(k)
            if slot is not None:
                lru.move_to_end(k)
                hits += 1
                if pins is not None:
                    self._pins[slot] += 1
                    pins.append(slot)
            out.append(slot)
        self._hits += hits
        self._misses += len(out) - hits
        return out

    def _put_many(self, keys: Sequence[Hashable], rows: Sequence[Any], pins: list[int] | None) -> list[int]:
        if len(keys) != len(rows):
            raise BitmaskError(f"MaskCache.put_many: {len(keys)} keys but {len(rows)} rows")
        checked = [self._check_row(r) for r in rows]
        out: list[int] = []  # slots this call returns: pinned while it runs, so it evicts none
        new_slots: list[int] = []
        new_rows: list[np.ndarray] = []
        try:
            for key in keys:  # present keys first: fresh ones must not evict them
                slot = self._lru.get(key)
                if slot is not None:
                    self._lru.move_to_end(key)
                    self._pins[slot] += 1
                    out.append(slot)
            fresh = len({k for k in keys if k not in self._lru})
            if fresh > len(self._free):
                self._grow(fresh)
            for key, row in zip(keys, checked):
                if key not in self._lru:
                    slot = self._take_slot()
                    self._lru[key] = slot
                    self._pins[slot] += 1
                    out.append(slot)
                    new_slots.append(slot)
                    new_rows.append(row)
        finally:
            try:  # the rows of the entries made so far, even when a later key found no slot
                self._write(new_slots, new_rows)
            except BaseException:
                self._forget(set(new_slots))
                raise
            finally:
                for slot in out:
                    self._pins[slot] -= 1
        slots = [self._lru[k] for k in keys]
        if pins is not None:
            for slot in slots:
                self._pins[slot] += 1
            pins.extend(slots)
        return slots

    def _forget(self, slots: set[int]) -> None:
        """Drop the entries in ``slots`` (whose rows were never written) and free the slots."""
        for key in [k for k, s in self._lru.items() if s in slots]:
            del self._lru[key]
        self._free.extend(slots)

    def get(self, key: Hashable) -> int | None:
        """The slot holding ``key``'s row, or None; marks it most recently used, counts hit/miss.

        The slot is valid until a later ``put`` (from any thread) can evict it; see the module
        docstring for pinning.
        """
        with self._lock:
            return self._get(key, None)

    def get_into(self, key: Hashable, out: np.ndarray) -> bool:
        """Copy ``key``'s row into the numpy row ``out`` and return True, or return False (a miss).
        Counts a hit or a miss.  The copy happens under the lock, so no other thread's ``put`` can
        replace the row half way: the one-matcher path of a CPU pool needs no pinning."""
        with self._lock:  # not through get_many_into's lists: a single matcher's fill runs this per token
            slot = self._get(key, None)
            if slot is None:
                return False
            host = self._host
            out[...] = host[slot] if host is not None else self._pool[slot].cpu().numpy()
        return True

    def get_many_into(self, keys: Sequence[Hashable], out: np.ndarray, rows: Sequence[int]) -> list[bool]:
        """``get_into`` of each key into ``out[rows[i]]`` under one hold of the lock; True where it
        was a hit."""
        if len(keys) != len(rows):
            raise BitmaskError(f"MaskCache.get_many_into: {len(keys)} keys but {len(rows)} rows")
        with self._lock:
            slots = self._get_many(keys, None)
            if self._host is not None:
                copy_row_runs(self._pool, self._host, slots, out, rows)
            else:
                for r, slot in zip(rows, slots):
                    if slot is not None:
                        out[r] = self._pool[slot].cpu().numpy()
        return [s is not None for s in slots]

    def put(self, key: Hashable, row: Any) -> int:
        """Store a copy of ``row`` (``int32[words]``) under ``key`` and return its slot.

        A present key keeps its row and returns its slot (marked most recently used).  May grow the
        pool or evict the least recently used unpinned entry.
        """
        arr = self._check_row(row)
        with self._lock:  # _put_many of one key, inlined: every miss of a matcher's fill stores one row
            slot = self._lru.get(key)
            if slot is not None:
                self._lru.move_to_end(key)
                return slot
            slot = self._take_slot()
            try:
                self._write([slot], [arr])
            except BaseException:
                self._free.append(slot)
                raise
            self._lru[key] = slot
            return slot

    def get_many(self, keys: Sequence[Hashable]) -> list[int | None]:
        """``get`` of each key under one hold of the lock (hits and misses counted per key)."""
        with self._lock:
            return self._get_many(keys, None)

    def put_many(self, keys: Sequence[Hashable], rows: Sequence[Any]) -> list[int]:
        """``put`` of each (key, row) under one hold of the lock, the new rows in one transfer.

        The slots returned are distinct per distinct key and none is evicted by this call; raises
        :class:`~pda.errors.LimitExceededError` when the pool cannot hold them all at once.
        """
        with self._lock:
            return self._put_many(keys, rows, None)

    def pinned(self) -> PinnedBatch:
        """A batch, used as ``with cache.pinned() as batch:``, whose slots stay pinned until the block ends."""
        return PinnedBatch(self)

    def _unpin(self, slots: list[int]) -> None:
        with self._lock:
            for slot in slots:
                self._pins[slot] -= 1
                if not self._pins[slot] and slot in self._orphans:
                    self._orphans.discard(slot)
                    self._free.append(slot)

    # ---- reads -----------------------------------------------------------------------------

    def row(self, slot: int) -> np.ndarray:
        """A host copy of the row in ``slot`` (for tests and CPU callers)."""
        pool = self._host if self._host is not None else self._pool
        if not 0 <= slot < pool.shape[0]:
            raise BitmaskError(f"MaskCache.row: slot {slot} outside the pool's {pool.shape[0]} rows")
        if isinstance(pool, np.ndarray):
            return pool[slot].copy()
        return pool[slot].cpu().numpy()

    def gather(
        self,
        slots: Sequence[int] | torch.Tensor,
        out: torch.Tensor | np.ndarray,
        rows: Sequence[int] | torch.Tensor | None = None,
    ) -> None:
        """Write the pool's rows ``slots`` into ``out[rows]`` (``out[:len(slots)]`` when rows is None).

        ``out`` is an ``int32[batch, words]`` bitmask, a torch tensor on the pool's device or a
        numpy array.  The rows move in one index operation: on CUDA one ``index_select`` (plus one
        ``index_copy_`` when ``rows`` is given; into a numpy ``out``, one device-to-host copy of
        the batch's rows); on CPU one ``np.take`` over the pool's numpy view (into a CPU tensor's
        view too).  Roughly::

            for i, s in enumerate(slots):
                out[rows[i] if rows is not None else i] = pool[s]

        Slot indices in a CUDA tensor are not range-checked (the others are).
        """
        n = len(slots)
        if rows is not None and len(rows) != n:
            raise BitmaskError(f"MaskCache.gather: {n} slots but {len(rows)} rows")
        if out.ndim != 2 or out.shape[1] != self.words:
            raise BitmaskError(
                f"MaskCache.gather: out must be int32[batch, {self.words}], got shape {list(out.shape)}"
            )
        if n > out.shape[0]:
            raise BitmaskError(f"MaskCache.gather: {n} slots but out has {out.shape[0]} rows")
        if isinstance(out, np.ndarray):
            if out.dtype != np.int32:
                raise BitmaskError(f"MaskCache.gather: out must be int32, got {out.dtype}")
            dst: np.ndarray | None = out
        elif out.dtype != torch.int32 or out.device != self.device:
            raise BitmaskError(
                f"MaskCache.gather: out must be int32 on {self.device}, got {out.dtype} on {out.device}"
            )
        else:
            dst = out.numpy() if self._on_cpu else None
        if not n:
            return
        host = self._host
        if host is not None:  # a CPU pool: numpy's take, measured faster than torch's at 1-128 rows
            _check_slots(slots, host.shape[0])
            if rows is None:
                np.take(host, _host_index(slots), axis=0, out=dst[:n], mode="clip")  # type: ignore[index]
            else:
                dst[_host_index(rows)] = np.take(host, _host_index(slots), axis=0, mode="clip")  # type: ignore[index]
            return
        pool = self._pool
        _check_slots(slots, pool.shape[0])
        if dst is None and rows is not None and not isinstance(slots, torch.Tensor) and not isinstance(rows, torch.Tensor):
            # slots and rows cross to the device in one transfer (each small copy waits ~10 us)
            both = torch.as_tensor(np.array([list(slots), list(rows)], dtype=np.int64)).to(pool.device)
            out.index_copy_(0, both[1], pool.index_select(0, both[0]))
            return
        index = torch.as_tensor(slots, dtype=torch.long).to(pool.device, non_blocking=True)
        if dst is not None:  # a CUDA pool into a numpy array: one device-to-host copy of the rows
            got = pool.index_select(0, index).cpu().numpy()
            if rows is None:
                dst[:n] = got
            else:
                dst[_host_index(rows)] = got
        elif rows is None:
            if out[:n].is_contiguous():
                torch.index_select(pool, 0, index, out=out[:n])
            else:
                out[:n].copy_(pool.index_select(0, index))
        else:
            dst_index = torch.as_tensor(rows, dtype=torch.long).to(pool.device, non_blocking=True)
            out.index_copy_(0, dst_index, pool.index_select(0, index))

    # ---- bookkeeping -----------------------------------------------------------------------

    def stats(self) -> dict[str, int | float]:
        """``hits``, ``misses``, ``evictions``, ``entries``, ``bytes``, ``capacity_rows``, ``hit_rate``."""
        with self._lock:
            looked = self._hits + self._misses
            cap = self._capacity()
            return {
                "hits": self._hits,
                "misses": self._misses,
                "evictions": self._evictions,
                "entries": len(self._lru),
                "bytes": cap * self.row_bytes,
                "capacity_rows": cap,
                "hit_rate": self._hits / looked if looked else 0.0,
            }

    def clear(self) -> None:
        """Drop every entry and zero the counters.

        With no slot pinned, the pool shrinks back to ``initial_rows``; otherwise it keeps its
        capacity and the pinned rows stay readable until their batches end.
        """
        with self._lock:
            if not any(self._pins):
                self._alloc(self._initial_rows)
                return
            cap = self._capacity()
            self._orphans = {s for s in range(cap) if self._pins[s]}
            self._lru.clear()
            self._free = [s for s in range(cap - 1, -1, -1) if not self._pins[s]]
            self._hits = self._misses = self._evictions = 0

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, key: Hashable) -> bool:
        """Whether ``key`` is cached (does not count, does not touch the LRU order)."""
        return key in self._lru


@lru_cache(maxsize=64)
def _device_named(name: str) -> torch.device:
    return torch.device(name)  # made once per name: 12 µs, in the fill of a grammar's first miss


def _host_index(index: Sequence[int] | torch.Tensor) -> Any:
    """An index numpy takes: a tensor's values on the host, else the sequence itself."""
    return index.cpu().numpy() if isinstance(index, torch.Tensor) else index


def _check_slots(slots: Sequence[int] | torch.Tensor, cap: int) -> None:
    """Raise unless every slot is an index into a pool of ``cap`` rows (CUDA tensors unchecked)."""
    if isinstance(slots, torch.Tensor):
        if slots.device.type != "cpu":
            return
        lo, hi = int(slots.min()), int(slots.max())
    else:
        try:
            lo, hi = min(slots), max(slots)
        except TypeError:
            raise BitmaskError("MaskCache.gather: a slot is not an int (a miss never put?)") from None
    if lo < 0 or hi >= cap:
        raise BitmaskError(f"MaskCache.gather: slot {lo if lo < 0 else hi} outside the pool's {cap} rows")


class PinnedBatch:
    """Lookups and stores of one batch; every slot they return stays pinned until ``release``.

    Made by :meth:`MaskCache.pinned` (which releases it on leaving the ``with`` block).  A pinned
    slot is not evicted or overwritten, so ``MaskCache.gather`` may read it while other threads put.
    """

    def __init__(self, cache: MaskCache) -> None:
        self.cache = cache
        self._pinned: list[int] = []

    def get_many(self, keys: Sequence[Hashable]) -> list[int | None]:
        """``MaskCache.get_many``, pinning each hit."""
        cache = self.cache
        with cache._lock:
            return cache._get_many(keys, self._pinned)

    def put_many(self, keys: Sequence[Hashable], rows: Sequence[Any]) -> list[int]:
        """``MaskCache.put_many``, pinning each slot it returns."""
        cache = self.cache
        with cache._lock:
            return cache._put_many(keys, rows, self._pinned)

    def get(self, key: Hashable) -> int | None:
        return self.get_many([key])[0]

    def put(self, key: Hashable, row: Any) -> int:
        return self.put_many([key], [row])[0]

    def __enter__(self) -> PinnedBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Unpin every slot this batch returned so far (the batch stays usable)."""
        pinned, self._pinned = self._pinned, []
        if pinned:
            self.cache._unpin(pinned)
