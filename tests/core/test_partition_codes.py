"""partition_codes against a numpy reference: every code, every block boundary, both sparse and dense."""

from __future__ import annotations

import numpy as np
import pytest

from pda.kernels import partition_codes
from pda.token_walk import TOKEN_ACCEPTED, TOKEN_OVERFLOW, TOKEN_REJECTED, TOKEN_UNCERTAIN


def _reference(out: np.ndarray, cand: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return order[cand[out == TOKEN_ACCEPTED]], cand[(out != TOKEN_ACCEPTED) & (out != TOKEN_REJECTED)]


@pytest.mark.parametrize("n", [0, 1, 7, 63, 64, 65, 127, 128, 129, 1000, 128050])
@pytest.mark.parametrize("density", [0.0, 0.0005, 0.05, 0.9])
def test_partition_matches_reference(n: int, density: float) -> None:
    rng = np.random.default_rng(n * 7 + int(density * 1e4))
    total = n + 40
    cand = np.sort(rng.choice(total, n, replace=False)).astype(np.int32)
    order = rng.permutation(total).astype(np.int32)
    out = np.zeros(n, np.int8)
    hit = rng.random(n) < density
    if n:  # the first and last code of the array are the edge cases of the blocks
        hit[[0, n - 1]] = density > 0
    out[hit] = rng.choice(np.array([TOKEN_ACCEPTED, TOKEN_UNCERTAIN, TOKEN_OVERFLOW], np.int8), int(hit.sum()))
    want_acc, want_unc = _reference(out, cand, order)
    for f in (partition_codes, partition_codes.py_func):
        acc, unc = f(out, cand, order)
        assert acc.dtype == np.int32 and unc.dtype == np.int32
        np.testing.assert_array_equal(acc, want_acc)
        np.testing.assert_array_equal(unc, want_unc)
        # copies, not views that would keep an n-sized buffer alive (numba's own arrays show a MemInfo)
        assert not isinstance(acc.base, np.ndarray) and not isinstance(unc.base, np.ndarray)
