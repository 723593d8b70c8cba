"""Token bitmasks: layout, round trips, apply on CPU against a reference loop and xgrammar, errors."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest
import torch

from pda.bitmask import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    bitmask_to_bool,
    bool_to_bitmask,
    get_bitmask_shape,
    reset_token_bitmask,
)
from pda.errors import BitmaskError

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]


def random_mask(*shape: int, seed: int = 0) -> torch.Tensor:
    """A reproducible random bool mask."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) < 0.5


def reference_apply(logits: torch.Tensor, bitmask: torch.Tensor, indices=None, vocab_size=None) -> torch.Tensor:
    """The documented loop, on a copy."""
    out = logits.clone()
    out2 = out if out.dim() == 2 else out.unsqueeze(0)
    bm = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    if vocab_size is None:
        vocab_size = min(out2.shape[-1], bm.shape[-1] * 32)
    for i in indices if indices is not None else range(out2.shape[0]):
        for t in range(vocab_size):
            if not (int(bm[i, t >> 5]) >> (t & 31)) & 1:
                out2[i, t] = float("-inf")
    return out


@pytest.mark.parametrize(
    "batch, vocab, shape",
    [(1, 1, (1, 1)), (2, 32, (2, 1)), (2, 33, (2, 2)), (0, 64, (0, 2)), (4, 129280, (4, 4040)), (1, 0, (1, 0))],
)
def test_shape_and_allocate(batch: int, vocab: int, shape: tuple[int, int]) -> None:
    assert get_bitmask_shape(batch, vocab) == shape
    bm = allocate_token_bitmask(batch, vocab)
    assert bm.dtype == torch.int32 and tuple(bm.shape) == shape
    assert bool((bm == -1).all())


def test_reset_sets_every_bit() -> None:
    bm = torch.zeros(2, 3, dtype=torch.int32)
    reset_token_bitmask(bm)
    assert bool((bm == -1).all())


@pytest.mark.parametrize(
    "allowed, words",
    [([0], [1, 0]), ([31], [-(2**31), 0]), ([33], [0, 2]), ([0, 1, 2, 40], [7, 256]), (list(range(64)), [-1, -1])],
)
def test_bit_layout(allowed: list[int], words: list[int]) -> None:
    mask = torch.zeros(64, dtype=torch.bool)
    mask[allowed] = True
    assert bool_to_bitmask(mask).tolist() == words
    assert bitmask_to_bool(torch.tensor(words, dtype=torch.int32), 64).nonzero().flatten().tolist() == allowed


@pytest.mark.parametrize("vocab", [1, 31, 32, 33, 100, 1000])
@pytest.mark.parametrize("batch", [None, 1, 3])
def test_round_trip(vocab: int, batch: int | None) -> None:
    mask = random_mask(vocab, seed=vocab) if batch is None else random_mask(batch, vocab, seed=vocab)
    bm = bool_to_bitmask(mask)
    assert bm.dtype == torch.int32 and bm.shape[-1] == (vocab + 31) // 32
    assert torch.equal(bitmask_to_bool(bm, vocab), mask)
    assert torch.equal(bool_to_bitmask(bitmask_to_bool(bm, vocab)), bm)


def test_padding_bits_are_clear_and_full_mask_allows_all() -> None:
    assert bool_to_bitmask(torch.ones(33, dtype=torch.bool)).tolist() == [-1, 1]
    assert bool(bitmask_to_bool(allocate_token_bitmask(2, 70), 70).all())


CASES = [
    # (logits shape, bitmask rows, indices, vocab_size)
    ((3, 100), 3, None, None),
    ((3, 100), 3, None, 77),
    ((3, 100), 3, [2, 0], None),
    ((5, 100), 3, [2, 0], 50),  # batch sizes differ: indices select the same row of both
    ((2, 100), 4, torch.tensor([1]), None),
    ((100,), None, None, None),  # 1-D logits, 1-D bitmask
    ((100,), 1, None, 64),  # 1-D logits, one-row bitmask
    ((3, 64), 3, [], None),
]


@pytest.mark.parametrize("shape, rows, indices, vocab_size", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_apply_matches_reference(shape, rows, indices, vocab_size, dtype) -> None:
    vocab = shape[-1]
    mask = random_mask(vocab, seed=1) if rows is None else random_mask(rows, vocab, seed=1)
    bm = bool_to_bitmask(mask)
    logits = torch.randn(*shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    want = reference_apply(logits, bm, None if indices is None else list(indices), vocab_size)
    apply_token_bitmask_inplace(logits, bm, indices=indices, vocab_size=vocab_size, backend="torch")
    assert torch.equal(logits, want)


def test_apply_on_non_contiguous_logits_writes_through() -> None:
    base = torch.zeros(3, 80)
    view = base[:, 5:69]
    bm = bool_to_bitmask(random_mask(3, 64, seed=3))
    apply_token_bitmask_inplace(view, bm)
    assert torch.equal(torch.isinf(base[:, 5:69]), ~bitmask_to_bool(bm, 64))
    assert not torch.isinf(base[:, :5]).any() and not torch.isinf(base[:, 69:]).any()


def test_wider_logits_are_left_unmasked_with_a_warning() -> None:
    logits = torch.zeros(2, 70)
    bm = torch.zeros(2, 2, dtype=torch.int32)
    with pytest.warns(UserWarning, match=r"covers 64 tokens but logits have 70: logits\[\.\.\., 64:\] are left unmasked"):
        apply_token_bitmask_inplace(logits, bm)
    assert bool(torch.isinf(logits[:, :64]).all()) and not torch.isinf(logits[:, 64:]).any()


@pytest.mark.parametrize("shape, rows, indices, vocab_size", CASES + [((2, 70), 2, None, None), ((3, 40), 3, [1], None)])
def test_apply_matches_xgrammar(shape, rows, indices, vocab_size) -> None:
    xgr = pytest.importorskip("xgrammar")
    vocab = shape[-1]
    mask = random_mask(vocab, seed=4) if rows is None else random_mask(rows, vocab, seed=4)
    bm = bool_to_bitmask(mask)
    if shape == (2, 70):
        bm = bm[:, :2].contiguous()  # bitmask narrower than logits
    logits = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    ours, theirs = logits.clone(), logits.clone()
    idx = None if indices is None else [int(i) for i in indices]
    with pytest.warns(UserWarning) if shape == (2, 70) else _nothing():
        apply_token_bitmask_inplace(ours, bm, indices=indices, vocab_size=vocab_size)
    with pytest.warns(UserWarning) if shape == (2, 70) else _nothing():
        xgr.apply_token_bitmask_inplace(theirs, bm, indices=idx, vocab_size=vocab_size)
    assert torch.equal(ours, theirs)


class _nothing:
    """A context manager that does nothing (pytest.warns' counterpart for 'no warning expected')."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["auto", "torch", "triton"])
def test_apply_on_device(device: str, backend: str) -> None:
    if backend == "triton":
        if device == "cpu":
            pytest.skip("the triton backend runs on CUDA (its CPU interpreter is tested separately)")
        pytest.importorskip("triton")
    mask = random_mask(4, 1000, seed=6)
    bm = bool_to_bitmask(mask).to(device)
    logits = torch.randn(4, 1000, generator=torch.Generator().manual_seed(7))
    want = reference_apply(logits, bm.cpu(), [3, 1], 999)
    got = logits.to(device)
    apply_token_bitmask_inplace(got, bm, indices=[3, 1], vocab_size=999, backend=backend)
    assert torch.equal(got.cpu(), want)
    full = logits.to(device)
    apply_token_bitmask_inplace(full, bm, backend=backend)
    assert torch.equal(torch.isinf(full).cpu(), ~mask)


def test_triton_kernel_in_the_cpu_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Triton kernel, run by Triton's CPU interpreter (TRITON_INTERPRET=1), equals the torch backend."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delitem(sys.modules, "pda._bitmask_triton", raising=False)
    try:
        importlib.import_module("pda._bitmask_triton")  # jitted under the interpreter
        g = torch.Generator().manual_seed(0)
        bm = bool_to_bitmask(torch.rand(3, 1500, generator=g) < 0.5)
        for indices in (None, [2, 0]):
            for vocab_size in (None, 1100):
                a = torch.randn(3, 1510, generator=g)[:, :1500]  # not contiguous
                b = a.clone()
                apply_token_bitmask_inplace(a, bm, indices=indices, vocab_size=vocab_size, backend="triton")
                apply_token_bitmask_inplace(b, bm, indices=indices, vocab_size=vocab_size, backend="torch")
                assert torch.equal(a, b), (indices, vocab_size)
    finally:
        sys.modules.pop("pda._bitmask_triton", None)  # a later CUDA run compiles it for real


def test_module_does_not_import_triton_at_import_time() -> None:
    import pda.bitmask

    tree = ast.parse(Path(pda.bitmask.__file__).read_text())
    top_level = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in top_level for a in n.names] + [n.module or "" for n in top_level if isinstance(n, ast.ImportFrom)]
    assert not [n for n in names if "triton" in n]


I32 = torch.int32
ERRORS = [
    # (logits, bitmask, kwargs, message)
    (torch.zeros(2, 64), torch.zeros(2, 2, dtype=torch.int64), {}, r"bitmask must have dtype torch.int32, got torch.int64"),
    (torch.zeros(2, 64), [[-1, -1]], {}, r"bitmask must be a torch.Tensor, got list; create one with allocate_token_bitmask"),
    (torch.zeros(2, 64, dtype=torch.int64), torch.zeros(2, 2, dtype=I32), {}, r"logits must be a floating-point torch.Tensor, got torch.int64"),
    (torch.zeros(1, 2, 64), torch.zeros(1, 2, dtype=I32), {}, r"logits must be 1-D or 2-D \(batch, vocab\), got shape \(1, 2, 64\)"),
    (torch.zeros(2, 64), torch.zeros(1, 2, 2, dtype=I32), {}, r"bitmask must be 1-D or 2-D"),
    (torch.zeros(2, 64), torch.zeros(2, 2, dtype=I32, device="meta"), {}, r"logits are on cpu but the bitmask is on meta; move the bitmask"),
    (torch.zeros(2, 64), torch.zeros(3, 2, dtype=I32), {}, r"logits have 2 rows but the bitmask has 3; pass indices="),
    (torch.zeros(2, 64), torch.zeros(3, 2, dtype=I32), {"indices": [2]}, r"indices \[2\] out of range: logits have 2 rows and the bitmask 3"),
    (torch.zeros(2, 64), torch.zeros(2, 2, dtype=I32), {"indices": [0.5]}, r"indices must be ints"),
    (torch.zeros(2, 64), torch.zeros(2, 2, dtype=I32), {"vocab_size": 65}, r"vocab_size=65 exceeds .* pass vocab_size <= 64"),
    (torch.zeros(2, 64), torch.zeros(2, 2, dtype=I32), {"vocab_size": -1}, r"vocab_size must be a non-negative int, got -1"),
    (torch.zeros(2, 64), torch.zeros(2, 2, dtype=I32), {"backend": "cuda"}, r"unknown backend 'cuda'; expected 'auto', 'torch' or 'triton'"),
    (torch.zeros(2, 64), torch.zeros(2, 2, dtype=I32), {"backend": "triton"}, r"backend='triton' needs CUDA tensors, got logits on cpu"),
]


@pytest.mark.parametrize("logits, bitmask, kwargs, message", ERRORS)
def test_apply_errors(logits, bitmask, kwargs, message, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(BitmaskError, match=message):
        apply_token_bitmask_inplace(logits, bitmask, **kwargs)
    assert not torch.isinf(logits).any()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: get_bitmask_shape(-1, 10), r"batch_size must be a non-negative int, got -1"),
        (lambda: allocate_token_bitmask(1, 2.5), r"vocab_size must be a non-negative int, got 2.5"),
        (lambda: reset_token_bitmask(torch.zeros(2)), r"bitmask must have dtype torch.int32, got torch.float32"),
        (lambda: bitmask_to_bool(torch.zeros(1, 2, dtype=I32), 65), r"holds 64 tokens, fewer than vocab_size=65"),
        (lambda: bool_to_bitmask(torch.zeros(5, dtype=torch.int32)), r"mask must be a torch.BoolTensor, got torch.int32"),
        (lambda: bool_to_bitmask(torch.zeros(1, 1, 5, dtype=torch.bool)), r"mask must be 1-D or 2-D"),
    ],
)
def test_helper_errors(call, message) -> None:
    with pytest.raises(BitmaskError, match=message):
        call()


def test_bitmask_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        get_bitmask_shape(1, -5)
