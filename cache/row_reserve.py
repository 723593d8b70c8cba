"""The CPU reserve behind a mask cache's pool: zero pages, mapped in ahead of use, handed on.

A CPU :class:`~pda.cache.mask_cache.MaskCache` whose bound is at most :data:`RESERVE_MAX_BYTES`
takes its whole bound at once (:func:`take_reserve`) as zero pages, which the OS backs with memory
only when they are first written: a growth of the pool is a longer view of the same memory, not a
copy.  The first write of a row then faults its pages in (four 4 KiB pages for a DeepSeek row),
15-28 µs on this machine, paid inside the fill whose miss stores the row.  Two things take that off
the fills:

* **Mapping ahead** (:func:`map_ahead`): the cache asks for the rows past the slots it has handed
  out to be mapped on the background thread (:mod:`pda.background`) with
  ``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14 and later), which maps pages in writable without
  writing them.  A row written meanwhile keeps its contents, so the call races with nothing; only
  whole pages inside the rows are asked for.  Where the call does not exist, nothing is done and
  the first writes fault as before.  Measured on the built-in JSON grammar's 58 misses
  (``/tmp/prof/writesum.py``): a miss's row copy into the pool 24.8-27.8 µs median -> 5.5-8.0 µs.
* **Handing over** (:func:`hand_over`): when a cache dies, a reserve of which it used at most
  :data:`HANDOVER_MAX_BYTES` waits for the next cache of its shape (:data:`HANDOVER_KEEP` at most
  per shape), whose rows are then mapped already: a server compiling one schema per request stops
  paying a fault for every first write of a row.  It goes on as a :class:`Reserve`, with how many
  rows its owners asked to be mapped, so the next cache does not ask the background thread for its
  first rows again: a cache is made in the fill of its grammar's first miss, and that took 157 µs
  (median, 400 schemas), 51 of them handing the mapping over (waking the background thread, which
  then took the GIL).

What stays resident: the rows written, and at most as many again mapped ahead (the cache maps up to
twice the highest slot it has handed out, from its initial rows on).
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import threading
from typing import Any

import numpy as np

from pda import background

__all__ = ["RESERVE_MAX_BYTES", "HANDOVER_MAX_BYTES", "HANDOVER_KEEP", "Reserve", "take_reserve", "hand_over",
           "map_rows", "map_ahead"]

RESERVE_MAX_BYTES = 1 << 30  # CPU pools bounded by at most this are reserved whole
# A dead cache's reserve whose rows in use took at most this many bytes is handed to the next cache
# of its shape (at most HANDOVER_KEEP wait per shape): 6% of the mask time of 400 JSON Schemas
# compiled one after the other was page faults before.
HANDOVER_MAX_BYTES = 16 << 20
HANDOVER_KEEP = 2
_handed: dict[tuple[int, int], list[Reserve]] = {}  # (rows, words) -> reserves of dead caches
_handed_lock = threading.Lock()

_MADV_POPULATE_WRITE = 23  # <linux/mman.h>; EINVAL on kernels before 5.14
_madvise: Any = None  # libc's madvise once looked up; False where there is none (or it refused)


class Reserve:
    """A reserve's ``rows`` (a numpy array over the mapping) and how many of them, from the first,
    its owners asked to be ``mapped`` (:func:`map_ahead`).  One cache owns it at a time."""

    __slots__ = ("rows", "mapped")

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows
        self.mapped = 0


def take_reserve(rows: int, words: int) -> Reserve:
    """A reserve of ``rows`` x ``words`` int32: a dead cache's, else fresh zero pages.  A handed-over
    reserve holds its old owner's rows; a row is always written whole before any read of it
    (``put``), and no view of a pool leaves its cache (``gather`` and ``row`` copy)."""
    with _handed_lock:
        waiting = _handed.get((rows, words))
        if waiting:
            return waiting.pop()
    # An anonymous mapping, not np.zeros: calloc may hand back freed heap memory, which it must
    # then clear, mapping the whole bound in at once (a fresh clone's test suite found a 64 MiB
    # reserve resident before any row was written).  The array holds the mapping; its last view
    # unmaps it.
    memory = mmap.mmap(-1, max(1, rows * words * 4))
    return Reserve(np.frombuffer(memory, dtype=np.int32, count=rows * words).reshape(rows, words))


def hand_over(reserve: Reserve, used: list[int]) -> None:
    """At a cache's death (``weakref.finalize``): keep its reserve for the next cache of its shape."""
    if used[0] * reserve.rows.shape[1] * 4 > HANDOVER_MAX_BYTES:
        return
    with _handed_lock:
        waiting = _handed.setdefault(reserve.rows.shape, [])
        if len(waiting) < HANDOVER_KEEP:
            waiting.append(reserve)


def _libc_madvise() -> Any:
    """libc's ``madvise`` through ctypes (which lets go of the GIL for the call), or False."""
    global _madvise
    if _madvise is None:
        fn: Any = False
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).madvise
                fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
                fn.restype = ctypes.c_int
            except (OSError, AttributeError):
                fn = False
        _madvise = fn
    return _madvise


def map_rows(reserve: np.ndarray, start: int, stop: int) -> bool:
    """Map rows ``[start, stop)`` of ``reserve`` in, writable, without writing them (the whole pages
    inside those rows).  False when this system cannot (then it never tries again)."""
    global _madvise
    fn = _libc_madvise()
    if not fn:
        return False
    row_bytes = reserve.strides[0]
    page = mmap.PAGESIZE
    lo = reserve.ctypes.data + max(0, start) * row_bytes
    hi = reserve.ctypes.data + min(stop, reserve.shape[0]) * row_bytes
    lo = (lo + page - 1) // page * page
    hi = hi // page * page
    if hi <= lo:
        return True
    if fn(lo, hi - lo, _MADV_POPULATE_WRITE) != 0:
        if ctypes.get_errno() == 22:  # EINVAL: no MADV_POPULATE_WRITE here
            _madvise = False
        return False
    return True


def map_ahead(reserve: np.ndarray, start: int, stop: int) -> None:
    """:func:`map_rows` on the background thread, where the system can; the task holds the reserve
    until it has run."""
    if _libc_madvise() and stop > start:
        background.submit([lambda: map_rows(reserve, start, stop)])
