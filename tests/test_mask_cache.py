"""cache.mask_cache.MaskCache: counters, LRU order, the byte bound, pins, growth, gathers, threads."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
import torch

import pda.cache.mask_cache as mask_cache_module
from pda.cache.mask_cache import DEFAULT_MAX_BYTES, MaskCache
from pda.errors import BitmaskError, LimitExceededError

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]
STATS_KEYS = {"hits", "misses", "evictions", "entries", "bytes", "capacity_rows", "hit_rate"}


def row_of(key: object, words: int) -> np.ndarray:
    """A row that is a function of the key, every word different from another key's (torn rows show)."""
    seed = hash(key) & 0xFFFFFFFF
    return np.random.default_rng(seed).integers(-(2**31), 2**31, size=words, dtype=np.int64).astype(np.int32)


def small(words: int = 8, rows: int = 4, **kw: object) -> MaskCache:
    return MaskCache(words, max_bytes=rows * words * 4, **kw)  # type: ignore[arg-type]


def test_hits_misses_evictions_counted():
    c = small(initial_rows=1)
    assert c.get("a") is None
    for k in "abcd":
        c.put(k, row_of(k, 8))
    assert [c.get(k) is not None for k in "abcd"] == [True] * 4
    c.put("e", row_of("e", 8))  # evicts "a", the least recently used
    assert c.get("a") is None
    assert c.get_many(["b", "zz", "e"])[1] is None
    s = c.stats()
    assert set(s) == STATS_KEYS
    assert (s["hits"], s["misses"], s["evictions"], s["entries"]) == (6, 3, 1, 4)
    assert s["hit_rate"] == pytest.approx(6 / 9)
    assert s["capacity_rows"] == 4 and s["bytes"] == 4 * 8 * 4


def test_lru_order_follows_gets_and_puts():
    c = small()
    slots = {k: c.put(k, row_of(k, 8)) for k in "abcd"}
    c.get("a")  # order now b c d a
    c.put("c", row_of("c", 8))  # a present key: most recent, row kept -> b d a c
    assert c.put("e", row_of("e", 8)) == slots["b"]
    assert c.put("f", row_of("f", 8)) == slots["d"]
    assert "b" not in c and "d" not in c and {"a", "c", "e", "f"} <= {k for k in "abcdef" if k in c}
    assert c.put("g", row_of("g", 8)) == slots["a"]


def test_put_of_present_key_keeps_first_row_and_slot():
    c = small()
    s = c.put(("x", 1), row_of(1, 8))
    assert c.put(("x", 1), row_of(2, 8)) == s
    np.testing.assert_array_equal(c.row(s), row_of(1, 8))
    assert c.stats()["entries"] == 1


@pytest.mark.parametrize("max_bytes", [32, 33, 100, 1000, 4095, 4096])
@pytest.mark.parametrize("initial_rows", [1, 3, 64])
def test_byte_bound_never_exceeded(max_bytes, initial_rows):
    words = 8
    c = MaskCache(words, max_bytes=max_bytes, initial_rows=initial_rows)
    for i in range(300):
        c.put(i, row_of(i, words))
        s = c.stats()
        assert s["capacity_rows"] * words * 4 == s["bytes"] <= max_bytes
        assert s["entries"] <= s["capacity_rows"]
    assert c.stats()["capacity_rows"] == max_bytes // (words * 4)
    for i in range(300 - c.stats()["entries"], 300):  # the most recent entries survive, intact
        np.testing.assert_array_equal(c.row(c.get(i)), row_of(i, words))


def test_max_bytes_below_one_row_is_a_clear_error():
    with pytest.raises(ValueError, match=r"max_bytes=31 holds no row of 8 int32 words \(32 bytes\)"):
        MaskCache(8, max_bytes=31)
    with pytest.raises(BitmaskError, match="words must be a positive int"):
        MaskCache(0)
    assert MaskCache(4040).max_bytes == DEFAULT_MAX_BYTES


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_without_a_device_is_a_clear_error():
    with pytest.raises(BitmaskError, match="'cuda' asked for, but torch sees no CUDA device"):
        MaskCache(8, device="cuda")


def test_rows_of_the_wrong_shape_or_dtype_are_refused():
    c = small()
    with pytest.raises(BitmaskError, match=r"int32\[8\], got int64\[8\]"):
        c.put("a", np.zeros(8, dtype=np.int64))
    with pytest.raises(BitmaskError, match=r"got int32\[9\]"):
        c.put("a", np.zeros(9, dtype=np.int32))
    c.put("u", np.full(8, 0xFFFFFFFF, dtype=np.uint32))  # uint32 is read as the same bits
    np.testing.assert_array_equal(c.row(c.get("u")), np.full(8, -1, dtype=np.int32))
    assert "a" not in c and c.stats()["entries"] == 1


def test_put_stores_a_copy():
    c = small()
    r = row_of("a", 8)
    s = c.put("a", r)
    r[:] = 0
    np.testing.assert_array_equal(c.row(s), row_of("a", 8))


@pytest.mark.parametrize("device", DEVICES)
def test_growth_copies_rows(device):
    words = 40
    c = MaskCache(words, max_bytes=100 * words * 4, device=device, initial_rows=1)
    caps, slots = [], {}
    for i in range(70):
        slots[i] = c.put(i, row_of(i, words))
        caps.append(c.stats()["capacity_rows"])
    assert sorted(set(caps)) == [1, 2, 4, 8, 16, 32, 64, 100]
    for i, s in slots.items():
        assert c.get(i) == s
        np.testing.assert_array_equal(c.row(s), row_of(i, words))
    big = c.put_many(list(range(70, 100)), [row_of(i, words) for i in range(70, 100)])
    assert len(set(big)) == 30 and c.stats()["evictions"] == 0


def test_batch_calls_never_evict_their_own_slots():
    c = small(rows=4)
    for k in "abcd":
        c.put(k, row_of(k, 8))
    keys = ["e", "f", "a", "g"]  # "a" is the LRU entry, but present: e, f, g evict b, c, d instead
    slots = c.put_many(keys, [row_of(k, 8) for k in keys])
    assert len(set(slots)) == 4 and c.stats()["evictions"] == 3
    for k, s in zip(keys, slots):
        np.testing.assert_array_equal(c.row(s), row_of(k, 8))
    assert c.put_many(["h", "h"], [row_of("h", 8)] * 2)[0] == c.get("h")
    with pytest.raises(LimitExceededError, match="pinned"):
        c.put_many(list("vwxyz"), [row_of(k, 8) for k in "vwxyz"])
    s = c.stats()
    assert s["entries"] == 4 and s["capacity_rows"] == 4
    for k in "vwxy":  # the four that fitted were written before the fifth failed
        np.testing.assert_array_equal(c.row(c.get(k)), row_of(k, 8))


def test_pinned_slots_survive_other_puts_until_released():
    c = small(rows=4)
    for k in "abcd":
        c.put(k, row_of(k, 8))
    with c.pinned() as batch:
        (sa,) = batch.get_many(["a"])  # a is now the least recently used *after* this
        c.get("b"), c.get("c"), c.get("d")  # ... and then a is the LRU entry, but pinned
        (se,) = batch.put_many(["e"], [row_of("e", 8)])
        for i in range(10):
            c.put(i, row_of(i, 8))
        assert c.get("a") == sa and c.get("e") == se
        np.testing.assert_array_equal(c.row(sa), row_of("a", 8))
        np.testing.assert_array_equal(c.row(se), row_of("e", 8))
        assert batch.get("zz") is None and batch.put("y", row_of("y", 8)) not in (sa, se)
        batch.put("z", row_of("z", 8))  # evicts the last unpinned entry
        with pytest.raises(LimitExceededError, match="all 4 rows of 8 words are pinned"):
            batch.put("q", row_of("q", 8))
    for i in range(4):
        c.put(("after", i), row_of(i, 8))
    assert "a" not in c and "e" not in c


def test_clear_resets_and_keeps_pinned_rows_readable():
    c = small(rows=4, initial_rows=1)
    for k in "abcd":
        c.put(k, row_of(k, 8))
    c.get("a"), c.get("x")
    c.clear()
    assert c.stats() == {
        "hits": 0, "misses": 0, "evictions": 0, "entries": 0, "bytes": 32, "capacity_rows": 1, "hit_rate": 0.0,
    }
    for k in "abcd":
        c.put(k, row_of(k, 8))
    with c.pinned() as batch:
        (sb,) = batch.get_many(["b"])
        c.clear()
        assert "b" not in c and c.stats()["capacity_rows"] == 4
        for i in range(3):
            assert c.put(i, row_of(i, 8)) != sb
        np.testing.assert_array_equal(c.row(sb), row_of("b", 8))
    assert c.put(3, row_of(3, 8)) == sb  # released: the orphaned slot is free again


@pytest.mark.parametrize("device", DEVICES)
def test_gather_into_torch_and_numpy(device):
    words = 4040
    c = MaskCache(words, device=device, initial_rows=2)
    keys = [("s", i, (i % 3,)) for i in range(20)]
    slots = c.put_many(keys, [row_of(k, words) for k in keys])
    want = np.stack([row_of(k, words) for k in keys])
    order = [7, 3, 3, 19, 0]
    pick = [slots[i] for i in order]

    out = torch.zeros((8, words), dtype=torch.int32, device=device)
    c.gather(pick, out)
    np.testing.assert_array_equal(out[:5].cpu().numpy(), want[order])
    assert not out[5:].any()

    out.zero_()
    dst = [6, 1, 4, 0, 2]
    c.gather(torch.tensor(pick, device=device), out, rows=dst)
    got = out.cpu().numpy()
    np.testing.assert_array_equal(got[dst], want[order])
    assert not got[[3, 5, 7]].any()

    strided = torch.zeros((10, words), dtype=torch.int32, device=device)[::2]
    c.gather(pick, strided)
    np.testing.assert_array_equal(strided.cpu().numpy(), want[order])

    host = np.zeros((6, words), dtype=np.int32)
    c.gather(pick, host)
    np.testing.assert_array_equal(host[:5], want[order])
    host[:] = 0
    c.gather(pick, host, rows=[5, 4, 3, 2, 1])
    np.testing.assert_array_equal(host[[5, 4, 3, 2, 1]], want[order])
    assert not host[0].any()
    c.gather([], out)  # an empty batch writes nothing


@pytest.mark.parametrize("device", DEVICES)
def test_get_many_into_copies_hits_and_counts(device):
    words = 64
    c = MaskCache(words, device=device, initial_rows=2)
    keys = [("k", i) for i in range(6)]
    c.put_many(keys[:4], [row_of(k, words) for k in keys[:4]])
    out = np.zeros((8, words), dtype=np.int32)
    asked = [keys[3], keys[5], keys[0], keys[4]]
    dst = [6, 1, 2, 0]
    assert c.get_many_into(asked, out, dst) == [True, False, True, False]
    np.testing.assert_array_equal(out[6], row_of(keys[3], words))
    np.testing.assert_array_equal(out[2], row_of(keys[0], words))
    assert not out[[0, 1, 3, 4, 5, 7]].any()  # misses and unasked rows untouched
    st = c.stats()
    assert (st["hits"], st["misses"]) == (2, 2)
    with pytest.raises(BitmaskError, match="2 keys but 1 rows"):
        c.get_many_into(keys[:2], out, [0])


@pytest.mark.parametrize("contiguous", [True, False])
def test_get_many_into_long_runs_equal_row_by_row_copies(contiguous):
    """Runs of consecutive rows are copied in one operation (torch's for 32 rows or more, numpy's
    below): the rows equal a row-by-row copy, with misses breaking runs, rows out of order, a
    negative row and an ``out`` that is not C-contiguous (no run copy into it)."""
    words = 40
    c = MaskCache(words, initial_rows=8)
    keys = [("k", i) for i in range(120)]
    c.put_many(keys[:100], [row_of(k, words) for k in keys[:100]])
    asked = keys[:40] + [keys[110]] + keys[40:75] + keys[75:90][::-1] + [keys[95], keys[115], keys[96]]
    dst = list(range(0, 40)) + [40] + list(range(41, 76)) + list(range(76, 91)) + [-1, 91, 93]
    rng = random.Random(0)
    order = list(range(len(asked)))
    rng.shuffle(order)
    out = np.zeros((95, words), dtype=np.int32) if contiguous else np.zeros((words, 95), dtype=np.int32).T
    hits = c.get_many_into(asked, out, dst)
    assert hits == [k in keys[:100] for k in asked]
    want = np.zeros((95, words), dtype=np.int32)
    for k, r in zip(asked, dst):
        if k in keys[:100]:
            want[r] = row_of(k, words)
    np.testing.assert_array_equal(out, want)
    shuffled = np.zeros((95, words), dtype=np.int32)
    c.get_many_into([asked[i] for i in order], shuffled, [dst[i] for i in order])
    np.testing.assert_array_equal(shuffled, want)


def test_gather_refuses_bad_arguments():
    c = small(rows=4)
    s = c.put("a", row_of("a", 8))
    out = torch.zeros((2, 8), dtype=torch.int32)
    with pytest.raises(BitmaskError, match="not an int"):
        c.gather([s, None], out)  # type: ignore[list-item]
    with pytest.raises(BitmaskError, match="slot 4 outside the pool's 4 rows"):
        c.gather([4], out)
    with pytest.raises(BitmaskError, match="slot -1 outside"):
        c.gather(torch.tensor([-1]), out)
    with pytest.raises(BitmaskError, match=r"int32\[batch, 8\]"):
        c.gather([s], torch.zeros((2, 9), dtype=torch.int32))
    with pytest.raises(BitmaskError, match="int32 on cpu"):
        c.gather([s], torch.zeros((2, 8), dtype=torch.int64))
    with pytest.raises(BitmaskError, match="3 slots but out has 2 rows"):
        c.gather([s, s, s], out)
    with pytest.raises(BitmaskError, match="2 slots but 1 rows"):
        c.gather([s, s], out, rows=[0])
    with pytest.raises(BitmaskError, match="must be int32, got uint32"):
        c.gather([s], np.zeros((2, 8), dtype=np.uint32))
    with pytest.raises(BitmaskError, match="outside the pool"):
        c.row(7)


@pytest.mark.parametrize("device", DEVICES)
def test_eight_threads_read_back_exactly_what_was_put(device):
    """Batches from 8 threads (gets, puts of misses, gathers) over more keys than the pool holds."""
    words, n_keys, batch = 64, 120, 4
    c = MaskCache(words, max_bytes=48 * words * 4, device=device, initial_rows=2)
    want = {k: row_of(("k", k), words) for k in range(n_keys)}
    errors: list[str] = []
    start = threading.Barrier(8)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        out = torch.zeros((batch, words), dtype=torch.int32, device=device)
        host = np.zeros((batch, words), dtype=np.int32)
        start.wait()
        try:
            for _ in range(150):
                keys = [rng.randrange(n_keys) for _ in range(batch)]
                with c.pinned() as b:
                    slots = b.get_many(keys)
                    miss = [i for i, s in enumerate(slots) if s is None]
                    for i, s in zip(miss, b.put_many([keys[i] for i in miss], [want[keys[i]] for i in miss])):
                        slots[i] = s
                    c.gather(slots, out)  # type: ignore[arg-type]
                    c.gather(slots, host)  # type: ignore[arg-type]
                    for j, k in enumerate(keys):
                        if not (np.array_equal(host[j], want[k]) and np.array_equal(out[j].cpu().numpy(), want[k])):
                            errors.append(f"key {k} read back a row that is not its own")
                        if not np.array_equal(c.row(slots[j]), want[k]):  # type: ignore[arg-type]
                            errors.append(f"row({slots[j]}) is not key {k}'s")
                k = rng.randrange(n_keys)  # unpinned calls too
                if c.get(k) is None:
                    c.put(k, want[k])
        except Exception as exc:  # reported below, with the thread's seed
            errors.append(f"thread {seed}: {exc!r}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    s = c.stats()
    assert s["hits"] + s["misses"] == 8 * 150 * (batch + 1)
    assert s["evictions"] > 0 and s["capacity_rows"] == 48 and s["entries"] == 48
    assert not any(c._pins)  # every batch released its pins


def test_a_dead_caches_reserve_serves_the_next_cache_without_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reserve of a dead cache goes to the next cache of its shape (rows already mapped); the
    new cache knows none of the old keys, and its rows are its own: gathered, read and copied out
    exactly, whatever the old owner left in the memory."""
    import gc

    from pda.cache import row_reserve

    monkeypatch.setattr(row_reserve, "_handed", {})
    words, rows = 37, 64  # a shape no other test uses
    old = MaskCache(words, max_bytes=rows * words * 4, initial_rows=4)
    for k in range(20):  # grows to 32 rows, all written
        old.put(("old", k), row_of(("old", k), words))
    memory = old._reserve
    assert memory is not None
    del old
    gc.collect()
    assert [r.rows is memory for r in row_reserve._handed[(rows, words)]] == [True]
    assert row_reserve._handed[(rows, words)][0].mapped >= 32
    asked: list[tuple[int, int]] = []  # the new cache asks the background thread for nothing mapped already
    monkeypatch.setattr(mask_cache_module, "map_ahead", lambda reserve, start, stop: asked.append((start, stop)))
    new = MaskCache(words, max_bytes=rows * words * 4, initial_rows=4)
    assert new._reserve is memory and not row_reserve._handed[(rows, words)]
    assert new._tensor is None and not asked  # and no torch view until one is asked for
    assert all(new.get(("old", k)) is None for k in range(20)) and len(new) == 0
    slots = [new.put(("new", k), row_of(("new", k), words)) for k in range(12)]
    out = np.zeros((12, words), dtype=np.int32)
    new.gather(slots, out)
    for k in range(12):
        np.testing.assert_array_equal(out[k], row_of(("new", k), words))
        got = np.zeros(words, dtype=np.int32)
        assert new.get_into(("new", k), got)
        np.testing.assert_array_equal(got, row_of(("new", k), words))
        np.testing.assert_array_equal(new.row(slots[k]), row_of(("new", k), words))
    new.clear()  # clear() frees the reserve in use with its last view rather than handing it over
    assert new._reserve is not memory
    del new
    gc.collect()
    assert all(r.rows is not memory for r in row_reserve._handed[(rows, words)])


def test_a_large_dead_reserve_is_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reserve whose owner used more than HANDOVER_MAX_BYTES of it is not kept, and no more than
    HANDOVER_KEEP wait per shape: what waits is bounded."""
    import gc

    from pda.cache import row_reserve

    monkeypatch.setattr(row_reserve, "_handed", {})
    words, rows = 41, 64
    monkeypatch.setattr(row_reserve, "HANDOVER_MAX_BYTES", 16 * words * 4)
    big = MaskCache(words, max_bytes=rows * words * 4, initial_rows=4)
    for k in range(20):  # 32 rows in use: past the bound
        big.put(k, row_of(k, words))
    del big
    gc.collect()
    assert not row_reserve._handed.get((rows, words))
    caches = [MaskCache(words, max_bytes=rows * words * 4, initial_rows=4) for _ in range(5)]
    del caches
    gc.collect()
    assert len(row_reserve._handed[(rows, words)]) == row_reserve.HANDOVER_KEEP


def _resident_pages(reserve: np.ndarray, start: int, stop: int) -> tuple[int, int]:
    """(resident, all) of the whole pages inside rows [start, stop) of ``reserve`` (``mincore``)."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    lo = -(-(reserve.ctypes.data + start * reserve.strides[0]) // page) * page
    hi = (reserve.ctypes.data + stop * reserve.strides[0]) // page * page
    n = (hi - lo) // page
    vec = (ctypes.c_ubyte * n)()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    assert libc.mincore(lo, hi - lo, vec) == 0, ctypes.get_errno()
    return sum(v & 1 for v in vec), n


def _can_map_rows() -> bool:
    import sys

    from pda.cache import row_reserve

    return sys.platform.startswith("linux") and row_reserve.map_rows(np.zeros((2, 4096), dtype=np.int32), 0, 2)


def test_map_rows_maps_pages_in_and_keeps_what_rows_hold() -> None:
    """``map_rows`` backs the rows' pages with memory (``mincore`` sees them resident; a fresh reserve's
    are not) and leaves every value as it was: rows written before keep their contents, the others
    read zero."""
    if not _can_map_rows():
        pytest.skip("no madvise(MADV_POPULATE_WRITE) here")
    import mmap

    from pda.cache import row_reserve

    words = 4040  # a DeepSeek row: four pages
    memory = mmap.mmap(-1, 2048 * words * 4)  # 32 MiB of fresh zero pages, whatever the allocator holds
    reserve = np.frombuffer(memory, dtype=np.int32).reshape(2048, words)
    written = {3: row_of("a", words), 640: row_of("b", words)}
    for k, row in written.items():
        reserve[k] = row
    # rows 400-480 start 6 MiB past the first written row: no huge page (2 MiB) of it reaches them
    assert _resident_pages(reserve, 400, 480)[0] == 0
    assert row_reserve.map_rows(reserve, 380, 700)
    got, n = _resident_pages(reserve, 400, 480)
    assert n > 0 and got == n
    assert _resident_pages(reserve, 1400, 1500)[0] == 0  # only the rows asked for (or their huge pages)
    for k in range(700):
        np.testing.assert_array_equal(reserve[k], written.get(k, np.zeros(words, dtype=np.int32)))


def test_a_cpu_cache_maps_the_rows_ahead_of_its_slots_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new CPU cache has its initial rows mapped in on the background thread, and the rows past
    the slots it hands out as they fill up: a miss's first write of a row faults no page there."""
    if not _can_map_rows():
        pytest.skip("no madvise(MADV_POPULATE_WRITE) here")
    from pda import background
    from pda.cache import row_reserve

    monkeypatch.setattr(row_reserve, "_handed", {})  # a reserve of fresh pages
    words = 4040
    cache = MaskCache(words, max_bytes=4096 * words * 4, initial_rows=16)
    background.submit([]).wait(30)  # the tasks before it have run
    reserve = cache._reserve
    assert reserve is not None
    got, n = _resident_pages(reserve, 0, 16)
    assert got == n
    assert _resident_pages(reserve, 1000, 1100)[0] == 0
    for k in range(40):
        cache.put(k, row_of(k, words))
    background.submit([]).wait(30)
    got, n = _resident_pages(reserve, 40, 64)
    assert got == n
    assert _resident_pages(reserve, 1000, 1100)[0] == 0  # ahead, not the whole bound (2 MiB huge pages round up)
    for k in range(40):
        np.testing.assert_array_equal(cache.row(cache.get(k)), row_of(k, words))
