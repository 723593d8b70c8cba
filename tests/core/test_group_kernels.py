"""The kernels around a group's walk against numpy references: the split before it, the classes
after it (every code, every 64-code block boundary, sparse and dense), the classes of a listing
walk (ids or bits on either side of the words threshold) and the row's ids."""

from __future__ import annotations

import numpy as np
import pytest

from pda.group_kernels import (
    LONGER_REJECTED, LONGER_UNCERTAIN, LONGER_WALKED, bits_to_ids, finish_group, listing_classes, split_group,
)
from pda.token_walk import TOKEN_ACCEPTED, TOKEN_OVERFLOW, TOKEN_REJECTED, TOKEN_UNCERTAIN

WORDS = 40  # ids below 1280


def _ids(row: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).astype(np.int32)


def _row(ids: np.ndarray) -> np.ndarray:
    bits = np.zeros(WORDS * 32, np.uint8)
    bits[ids] = 1
    return np.packbits(bits, bitorder="little").view(np.int32)


@pytest.mark.parametrize("seed", range(12))
def test_split_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    chars = rng.integers(-1, 12, n).astype(np.int16)  # -1: not made of plain characters
    # a token ending inside a character (-1 in chars) counts it in its prefix count; the others alike
    partial = (chars < 0) & (rng.random(n) < 0.5)
    prefixes = np.where(partial, rng.integers(1, 12, n), chars).astype(np.int16)
    # a token not made of plain characters (nor cut short in one) stops on a byte; the state reads some
    stops = np.where((chars < 0) & ~partial, rng.integers(0, 256, n), -1).astype(np.int16)
    readable = rng.random(256) < 0.5
    reads = np.packbits(readable, bitorder="little").view(np.uint64).copy()
    run = int(rng.integers(0, 12))
    longer = (LONGER_WALKED, LONGER_UNCERTAIN, LONGER_REJECTED)[seed // 3 % 3 if seed < 9 else int(rng.integers(0, 3))]
    pre = rng.random(n) < 0.2 if seed % 3 == 0 else np.zeros(0, np.bool_)
    order = rng.permutation(WORDS * 32)[:n].astype(np.int32)
    cand = np.arange(n, dtype=np.int32)
    has_pre = pre.shape[0] == n
    acc = (pre if has_pre else np.zeros(n, np.bool_)) | ((prefixes >= 0) & (prefixes <= run))
    unc = ~acc & (longer == LONGER_UNCERTAIN) & (chars > run)
    rej = ~acc & (((longer == LONGER_REJECTED) & (chars > run)) | ((stops >= 0) & ~readable[np.maximum(stops, 0)]))
    rej &= ~unc
    for f in (split_group, split_group.py_func):
        walk, row, accepted, split_unc = f(chars, prefixes, stops, reads, run, longer, pre, cand, order, WORDS)
        if (run <= 0 and not has_pre) or (acc.sum() + unc.sum() + rej.sum()) * 2 < n:  # no split: walk them all
            assert walk.tolist() == cand.tolist() and accepted == 0 and not row.any() and split_unc.size == 0
            continue
        assert accepted == acc.sum()
        assert _ids(row).tolist() == np.sort(order[acc]).tolist()
        assert split_unc.tolist() == np.flatnonzero(unc).tolist()
        assert walk.tolist() == np.flatnonzero(~acc & ~unc & ~rej).tolist()  # the rejected ones are in none


@pytest.mark.parametrize("n", [0, 1, 7, 63, 64, 65, 127, 128, 129, 1000])
@pytest.mark.parametrize("density", [0.0, 0.005, 0.3, 0.95])
@pytest.mark.parametrize("mapped", [False, True])
def test_finish_matches_reference(n: int, density: float, mapped: bool) -> None:
    rng = np.random.default_rng(n * 7 + int(density * 1e3) + mapped)
    total = n + 60  # the group's tokens: the walked ones (cand) and some the split decided
    order = rng.permutation(WORDS * 32)[:total].astype(np.int32)
    cand = np.sort(rng.choice(total, n, replace=False)).astype(np.int32)
    rest = np.setdiff1d(np.arange(total), cand)
    split_acc = rest[rng.random(rest.shape[0]) < 0.5]
    split_unc = np.setdiff1d(rest, split_acc).astype(np.int32)
    out = np.zeros(n, np.int8)
    hit = rng.random(n) < density
    if n:  # the first and last code are the edge cases of the blocks
        hit[[0, n - 1]] = density > 0
    out[hit] = rng.choice(np.array([TOKEN_ACCEPTED, TOKEN_UNCERTAIN, TOKEN_OVERFLOW], np.int8), int(hit.sum()))
    to_main = np.sort(rng.choice(5 * total, total, replace=False)).astype(np.int32) if mapped \
        else np.zeros(0, np.int32)
    want_acc = np.sort(np.concatenate([order[split_acc], order[cand[out == TOKEN_ACCEPTED]]]))
    want_unc = np.sort(np.concatenate([split_unc, cand[(out != TOKEN_ACCEPTED) & (out != TOKEN_REJECTED)]]))
    if mapped:
        want_unc = to_main[want_unc]
    for f in (finish_group, finish_group.py_func):
        row = _row(order[split_acc])
        accepted, unc = f(out, cand, order, row, split_acc.shape[0], split_unc, to_main)
        assert accepted == want_acc.shape[0]
        assert _ids(row).tolist() == want_acc.tolist()
        assert unc.tolist() == want_unc.tolist()


@pytest.mark.parametrize("density", [0.0, 0.01, 0.5, 1.0])
def test_bits_to_ids(density: float) -> None:
    rng = np.random.default_rng(int(density * 100))
    ids = np.flatnonzero(rng.random(WORDS * 32) < density).astype(np.int32)
    row = _row(ids)
    for f in (bits_to_ids, bits_to_ids.py_func):
        assert f(row, ids.shape[0]).tolist() == ids.tolist()


@pytest.mark.parametrize("accepted", [0, 1, WORDS - 1, WORDS, WORDS + 1, 900])
@pytest.mark.parametrize("mapped", [False, True])
def test_listing_classes_match_reference(accepted: int, mapped: bool) -> None:
    """Ids while the accepted tokens are at most ``words``, a row past that; the other listed
    tokens (UNCERTAIN and OVERFLOW) as ascending whole-trie indices; the buffers' tails ignored."""
    rng = np.random.default_rng(accepted * 2 + mapped)
    total = 1200  # tokens of the group's trie
    order = rng.permutation(WORDS * 32)[:total].astype(np.int32)
    n = accepted + int(rng.integers(0, 80))
    found = np.full(total + 5, -7, np.int32)  # stale entries past n must be ignored
    found[:n] = np.sort(rng.choice(total, n, replace=False))
    out = np.full(total + 5, TOKEN_ACCEPTED, np.int8)
    codes = np.array([TOKEN_ACCEPTED] * accepted + [TOKEN_UNCERTAIN, TOKEN_OVERFLOW] * n, np.int8)[:n]
    out[:n] = rng.permutation(codes)
    to_main = np.sort(rng.choice(5 * total, total, replace=False)).astype(np.int32) if mapped \
        else np.zeros(0, np.int32)
    acc = out[:n] == TOKEN_ACCEPTED
    want_ids = np.sort(order[found[:n][acc]])
    want_unc = found[:n][~acc]
    if mapped:
        want_unc = to_main[want_unc]
    for f in (listing_classes, listing_classes.py_func):
        bits, got, unc = f(out, found, n, order, to_main, WORDS)
        assert bits == (accepted > WORDS)
        assert (_ids(got) if bits else got).tolist() == want_ids.tolist()
        assert unc.dtype == np.int32 and unc.tolist() == want_unc.tolist()
