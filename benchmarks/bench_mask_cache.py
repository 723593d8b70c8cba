"""Micro-benchmark of ``cache.mask_cache.MaskCache``: a batch step's lookups and its gather.

Rows are DeepSeek-sized (``ceil(129280 / 32) = 4040`` int32 words, 16,160 bytes).  The cache is
filled with ``--keys`` entries first (the keys of each step are made before the clock starts); then, for each batch size (1, 8, 32, 128) and device (CPU,
and CUDA when there is one), each timed step is what a batch fill does on a full hit::

    with cache.pinned() as batch:
        slots = batch.get_many(keys)        # B random keys, all present
        cache.gather(slots, bitmask)        # one index operation into an int32[B, 4040] bitmask

plus, separately, the miss path (``get_many`` of B new keys, ``put_many`` of their rows into a
full pool, evicting as many entries, then the gather), which on CUDA is where rows cross from host
to device.  CUDA steps end with ``torch.cuda.synchronize()``.  Each
figure is the median over ``--reps`` steps.  Usage::

    python benchmarks/bench_mask_cache.py [--reps N] [--keys K] [--device cpu|cuda|all]
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
import time
from typing import Callable

import numpy as np
import torch

from pda.cache.mask_cache import MaskCache

WORDS = math.ceil(129280 / 32)
BATCHES = (1, 8, 32, 128)


def _median_us(step: Callable[[], None], reps: int, sync: Callable[[], None]) -> float:
    for _ in range(3):  # warm up
        step()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def bench_device(device: str, reps: int, n_keys: int) -> list[tuple[str, int, float, float, float]]:
    """(device, batch, hit µs/batch, hit µs/row, miss µs/batch) for each batch size."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rng = np.random.default_rng(0)
    rows = rng.integers(-(2**31), 2**31, size=(n_keys, WORDS), dtype=np.int64).astype(np.int32)
    # The bound holds the hit keys and four batches more: once full, each miss evicts an old entry.
    cache = MaskCache(WORDS, device=device, max_bytes=(n_keys + 4 * max(BATCHES)) * WORDS * 4)
    cache.put_many([("state", i) for i in range(n_keys)], list(rows))
    pick = random.Random(0)
    fresh = iter(range(10**9))
    hits: dict[int, float] = {}
    misses: dict[int, float] = {}
    for b in BATCHES:  # all hit figures first: the miss steps below evict the hit keys
        bitmask = torch.zeros((b, WORDS), dtype=torch.int32, device=device)

        batches = itertools.cycle([[("state", pick.randrange(n_keys)) for _ in range(b)] for _ in range(64)])

        def hit() -> None:
            keys = next(batches)
            with cache.pinned() as batch:
                slots = batch.get_many(keys)
                cache.gather(slots, bitmask)  # type: ignore[arg-type]

        hits[b] = _median_us(hit, reps, sync)
    for b in BATCHES:
        bitmask = torch.zeros((b, WORDS), dtype=torch.int32, device=device)

        new_rows = list(rows[:b])
        batches = iter([[("new", next(fresh)) for _ in range(b)] for _ in range(reps + 3)])

        def miss() -> None:
            keys = next(batches)
            with cache.pinned() as batch:
                batch.get_many(keys)
                slots = batch.put_many(keys, new_rows)
                cache.gather(slots, bitmask)

        misses[b] = _median_us(miss, reps, sync)
    out = [(device, b, hits[b], hits[b] / b, misses[b]) for b in BATCHES]
    stats = cache.stats()
    print(f"# {device}: {stats['entries']} entries, {stats['bytes'] / 2**20:.0f} MiB pool, {stats['evictions']} evictions")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=200, help="timed steps per figure (median)")
    ap.add_argument("--keys", type=int, default=2048, help="entries in the cache before timing")
    ap.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    args = ap.parse_args()
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        if args.device == "cuda":
            raise SystemExit("no CUDA device")
        devices.remove("cuda")
    results = []
    for device in devices:
        results += bench_device(device, args.reps, args.keys)
    print(f"words per row: {WORDS}; torch {torch.__version__}; {torch.get_num_threads()} torch threads")
    print(f"{'device':<7}{'batch':>6}{'hit µs/batch':>15}{'hit µs/row':>13}{'miss µs/batch':>16}{'miss µs/row':>14}")
    for device, b, t_hit, t_row, t_miss in results:
        print(f"{device:<7}{b:>6}{t_hit:>15.1f}{t_row:>13.2f}{t_miss:>16.1f}{t_miss / b:>14.2f}")


if __name__ == "__main__":
    main()
