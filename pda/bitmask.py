"""Token bitmasks: allocate them, convert them, and apply them to logits on CPU or CUDA.

The layout is the one XGrammar, vLLM and SGLang use: ``int32[batch, ceil(vocab / 32)]``, bit
``t & 31`` of word ``t >> 5`` set when token ``t`` is allowed.  :func:`apply_token_bitmask_inplace`
sets the logits of the disallowed tokens to ``-inf``; it has one vectorised torch implementation
(any device) and a Triton kernel for CUDA tensors, imported only when first used.

torch itself is imported inside the functions, so importing this module (and ``pda``) does not
load it; ``BITMASK_DTYPE`` is resolved on first access.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np

from pda.errors import BitmaskError

if TYPE_CHECKING:
    import torch

WORD_BITS = (np.uint32(1) << np.arange(32, dtype=np.uint32)).view(np.int32)
"""The int32 value of each bit of a bitmask word: ``1 << i``, bit 31 being the sign bit (-2**31).
(Here, not in :mod:`pda.kernels`: importing this module must not load numba, see
:mod:`pda.integrations.vllm_processor`.)"""

__all__ = [
    "BITMASK_DTYPE",  # noqa: F822 - resolved on first access (module __getattr__)
    "get_bitmask_shape",
    "allocate_token_bitmask",
    "reset_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_to_bool",
    "bool_to_bitmask",
]


def __getattr__(name: str) -> Any:
    """``BITMASK_DTYPE``, the dtype of a token bitmask: ``torch.int32`` (torch has no full uint32
    support); resolved on first access so that importing this module does not import torch."""
    if name == "BITMASK_DTYPE":
        import torch

        return torch.int32
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

Backend = Literal["auto", "torch", "triton"]


def _check_size(value: object, name: str) -> int:
    """``value`` as a non-negative int, else BitmaskError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BitmaskError(f"{name} must be a non-negative int, got {value!r}")
    return value


def get_bitmask_shape(batch_size: int, vocab_size: int) -> tuple[int, int]:
    """The shape of a bitmask for ``batch_size`` rows of ``vocab_size`` tokens: ``(batch, ceil(vocab / 32))``."""
    batch_size = _check_size(batch_size, "batch_size")
    vocab_size = _check_size(vocab_size, "vocab_size")
    return batch_size, (vocab_size + 31) // 32


def allocate_token_bitmask(
    batch_size: int, vocab_size: int, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """A new bitmask with every token allowed (all bits set: every word is ``-1``)."""
    import torch

    return torch.full(get_bitmask_shape(batch_size, vocab_size), -1, dtype=torch.int32, device=device)


def _check_bitmask(bitmask: Any, name: str = "bitmask") -> torch.Tensor:
    """Raise BitmaskError unless ``bitmask`` is a 1-D or 2-D int32 tensor."""
    import torch

    if not isinstance(bitmask, torch.Tensor):
        raise BitmaskError(
            f"{name} must be a torch.Tensor, got {type(bitmask).__name__}; create one with allocate_token_bitmask()"
        )
    if bitmask.dtype != torch.int32:
        raise BitmaskError(
            f"{name} must have dtype torch.int32, got {bitmask.dtype}; create it with allocate_token_bitmask() "
            "or convert it with .to(torch.int32)"
        )
    if bitmask.dim() not in (1, 2):
        raise BitmaskError(f"{name} must be 1-D or 2-D (batch, ceil(vocab / 32)), got shape {tuple(bitmask.shape)}")
    return bitmask


def reset_token_bitmask(bitmask: torch.Tensor) -> None:
    """Allow every token again: set all bits of ``bitmask`` in place."""
    _check_bitmask(bitmask).fill_(-1)


_SHIFTS: dict[torch.device, torch.Tensor] = {}


def _shifts(device: torch.device) -> torch.Tensor:
    """``arange(32)`` as int32 on ``device`` (cached)."""
    import torch

    shifts = _SHIFTS.get(device)
    if shifts is None:
        shifts = _SHIFTS[device] = torch.arange(32, dtype=torch.int32, device=device)
    return shifts


def _unpack(words: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Bool tensor ``[..., vocab_size]`` of the bits of ``words`` ``[..., W]`` (needs ``32 * W >= vocab_size``).

    On CPU, numpy's ``unpackbits`` writes the bytes directly (bit ``t & 7`` of byte ``t >> 3`` is
    token ``t`` on little-endian machines, the layout of the int32 words); elsewhere, shifts."""
    import sys

    if words.device.type == "cpu" and sys.byteorder == "little" and words.dim() in (1, 2):
        import numpy as np
        import torch

        data = np.ascontiguousarray(words.numpy()).view(np.uint8)
        return torch.from_numpy(np.unpackbits(data, axis=-1, count=vocab_size, bitorder="little").view(np.bool_))
    bits = (words.unsqueeze(-1) >> _shifts(words.device)) & 1
    return bits.reshape(*words.shape[:-1], words.shape[-1] * 32)[..., :vocab_size].bool()


def bitmask_to_bool(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """The allowed-token mask as a bool tensor ``[..., vocab_size]`` (True = allowed); same device."""
    _check_bitmask(bitmask)
    vocab_size = _check_size(vocab_size, "vocab_size")
    if bitmask.shape[-1] * 32 < vocab_size:
        raise BitmaskError(
            f"a bitmask of {bitmask.shape[-1]} words holds {bitmask.shape[-1] * 32} tokens, fewer than "
            f"vocab_size={vocab_size}; allocate it with get_bitmask_shape(batch, {vocab_size})"
        )
    return _unpack(bitmask, vocab_size)


def bool_to_bitmask(mask: torch.Tensor) -> torch.Tensor:
    """Pack a bool tensor ``[..., vocab]`` (True = allowed) into an int32 bitmask ``[..., ceil(vocab / 32)]``.

    The padding bits past ``vocab`` in the last word are 0 (not allowed).
    """
    import torch

    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise BitmaskError(f"mask must be a torch.BoolTensor, got {got}; build it with a comparison or .bool()")
    if mask.dim() not in (1, 2):
        raise BitmaskError(f"mask must be 1-D or 2-D (batch, vocab), got shape {tuple(mask.shape)}")
    vocab = mask.shape[-1]
    pad = (-vocab) % 32
    if pad:
        mask = torch.nn.functional.pad(mask, (0, pad))
    # distinct bits, at most one of them negative (bit 31): an int32 sum never overflows
    bits = torch.from_numpy(WORD_BITS).to(mask.device)
    return (mask.reshape(*mask.shape[:-1], -1, 32).to(torch.int32) * bits).sum(dim=-1, dtype=torch.int32)


def _index_list(indices: Sequence[int] | torch.Tensor, rows: int, bitmask_rows: int, device: torch.device) -> torch.Tensor:
    """``indices`` as an int64 tensor on ``device``, each checked against both batch sizes."""
    import torch

    if isinstance(indices, torch.Tensor):
        if indices.dim() != 1 or indices.dtype.is_floating_point or indices.dtype == torch.bool:
            raise BitmaskError(f"indices must be a 1-D integer tensor or a list of ints, got {indices.dtype} {tuple(indices.shape)}")
        values = indices.tolist()
    else:
        values = list(indices)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
            raise BitmaskError(f"indices must be ints, got {values!r}")
    limit = min(rows, bitmask_rows)
    bad = [v for v in values if not 0 <= v < limit]
    if bad:
        raise BitmaskError(
            f"indices {bad[:5]} out of range: logits have {rows} rows and the bitmask {bitmask_rows}; "
            f"each index selects the same row of both"
        )
    return torch.tensor(values, dtype=torch.int64, device=device)


def apply_token_bitmask_inplace(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    *,
    indices: Sequence[int] | torch.Tensor | None = None,
    vocab_size: int | None = None,
    backend: Backend = "auto",
) -> None:
    """Set the logits of disallowed tokens to ``-inf``, in place (the bitmask is not changed)::

        for i in (indices if indices is not None else range(batch)):
            for t in range(vocab_size):
                if not bitmask[i, t >> 5] >> (t & 31) & 1:
                    logits[i, t] = -inf

    ``logits`` is a float tensor ``[batch, V]`` or ``[V]``; ``bitmask`` an int32 tensor ``[batch, W]``
    or ``[W]`` on the same device.  Without ``indices`` both have the same number of rows; with
    ``indices``, index ``i`` selects row ``i`` of both, and the two batch sizes may differ (as in
    XGrammar).  ``vocab_size`` defaults to ``min(V, 32 * W)``; when the bitmask covers fewer tokens
    than ``V``, the logits past it are left unchanged and a warning says so (as XGrammar does): give
    the bitmask the model's full vocabulary size.  ``backend="auto"`` runs Triton on CUDA when it is
    installed and torch elsewhere.
    """
    import torch

    if not isinstance(logits, torch.Tensor) or not logits.dtype.is_floating_point:
        got = logits.dtype if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise BitmaskError(f"logits must be a floating-point torch.Tensor, got {got}")
    if logits.dim() not in (1, 2):
        raise BitmaskError(f"logits must be 1-D or 2-D (batch, vocab), got shape {tuple(logits.shape)}")
    _check_bitmask(bitmask)
    if bitmask.device != logits.device:
        raise BitmaskError(
            f"logits are on {logits.device} but the bitmask is on {bitmask.device}; "
            f"move the bitmask with bitmask.to({str(logits.device)!r}, non_blocking=True)"
        )
    width = logits.shape[-1]
    covered = bitmask.shape[-1] * 32
    if vocab_size is None:
        vocab_size = min(width, covered)
        if covered < width:
            warnings.warn(
                f"the bitmask covers {covered} tokens but logits have {width}: logits[..., {covered}:] are "
                "left unmasked; allocate the bitmask with the model's full vocab size or pass vocab_size=",
                stacklevel=2,
            )
    else:
        vocab_size = _check_size(vocab_size, "vocab_size")
        if vocab_size > min(width, covered):
            raise BitmaskError(
                f"vocab_size={vocab_size} exceeds the logits width ({width}) or the tokens the bitmask "
                f"covers ({covered}); pass vocab_size <= {min(width, covered)}"
            )
    logits2 = logits if logits.dim() == 2 else logits.unsqueeze(0)
    bitmask2 = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    rows: torch.Tensor | None = None
    if indices is not None:
        rows = _index_list(indices, logits2.shape[0], bitmask2.shape[0], logits.device)
    elif logits2.shape[0] != bitmask2.shape[0]:
        raise BitmaskError(
            f"logits have {logits2.shape[0]} rows but the bitmask has {bitmask2.shape[0]}; "
            "pass indices= to mask only some rows"
        )
    if vocab_size == 0 or (rows is not None and rows.numel() == 0):
        return

    if backend == "auto":
        backend = "triton" if logits.is_cuda and _triton_available() else "torch"
    if backend == "torch":
        _apply_torch(logits2, bitmask2, rows, vocab_size)
    elif backend == "triton":
        if not logits.is_cuda and not _triton_interpreting():
            raise BitmaskError(f"backend='triton' needs CUDA tensors, got logits on {logits.device}; use backend='torch'")
        if not _triton_available():
            raise BitmaskError("backend='triton' needs the triton package; install it or use backend='torch'")
        from pda._bitmask_triton import apply_triton

        apply_triton(logits2, bitmask2, rows, vocab_size)
    else:
        raise BitmaskError(f"unknown backend {backend!r}; expected 'auto', 'torch' or 'triton'")


def _apply_torch(logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None, vocab_size: int) -> None:
    """The torch implementation: unpack the needed words into a bool mask and fill -inf."""
    words = bitmask[:, : (vocab_size + 31) // 32]
    if rows is None:
        banned = ~_unpack(words, vocab_size)
        logits[:, :vocab_size].masked_fill_(banned, float("-inf"))
    else:
        banned = ~_unpack(words.index_select(0, rows), vocab_size)
        part = logits.index_select(0, rows)[:, :vocab_size].masked_fill_(banned, float("-inf"))
        logits[rows, :vocab_size] = part


def _triton_available() -> bool:
    """Whether triton can be imported (checked once, without importing it at module import)."""
    global _TRITON
    if _TRITON is None:
        import importlib.util

        _TRITON = importlib.util.find_spec("triton") is not None
    return _TRITON


def _triton_interpreting() -> bool:
    """Whether Triton runs in its CPU interpreter (``TRITON_INTERPRET=1``, used by the tests)."""
    import os

    return os.environ.get("TRITON_INTERPRET") == "1"


_TRITON: bool | None = None


def _noop() -> None:
    return None


_VIEWS = threading.local()  # per thread: the last CPU tensor filled, and its numpy view


def cached_host_rows(bitmask: Any) -> np.ndarray | None:
    """The 2-D numpy view (rows of int32 words) of ``bitmask`` when it is the CPU tensor this
    thread last filled and is unchanged (same storage, shape and strides); else None.  A decode
    loop fills the same bitmask at every step: its checks and numpy view are made once."""
    last = getattr(_VIEWS, "last", None)
    if last is not None and last[0]() is bitmask:
        _, ptr, shape, strides, rows = last
        if bitmask.data_ptr() == ptr and bitmask.shape == shape and bitmask.stride() == strides:
            return rows  # type: ignore[no-any-return]
    return None


def remember_host_rows(bitmask: Any, rows: np.ndarray) -> None:
    """Keep ``rows``, the checked numpy view of the CPU tensor ``bitmask``, for :func:`cached_host_rows`."""
    _VIEWS.last = (weakref.ref(bitmask), bitmask.data_ptr(), bitmask.shape, bitmask.stride(), rows)


def _row_view_for_fill(bitmask: Any, index: int, words: int) -> tuple[Any, Any]:
    """A numpy int32 row to write a mask into, and a function that commits it to ``bitmask``.

    CPU tensors and numpy arrays are written in place (no copy); a CUDA row is written on the host
    and copied over in one transfer when committed.  The numpy view of the last CPU tensor each
    thread filled is kept (:func:`cached_host_rows`).
    """
    rows = cached_host_rows(bitmask)
    if rows is not None and rows.shape[1] == words and 0 <= index < rows.shape[0]:
        return rows[index], _noop
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:
            raise BitmaskError(f"bitmask must have dtype int32, got {bitmask.dtype}")
        rows = bitmask.reshape(1, -1) if bitmask.ndim == 1 else bitmask
    else:
        rows = _check_bitmask(bitmask)
        rows = rows.view(1, -1) if rows.dim() == 1 else rows
    if rows.shape[-1] != words:
        raise BitmaskError(
            f"bitmask rows must have {words} int32 words (ceil(vocab_size / 32)) for this tokenizer, got "
            f"{rows.shape[-1]}; allocate it with allocate_token_bitmask(batch, tokenizer_info.vocab_size)"
        )
    if not 0 <= index < rows.shape[0]:
        raise BitmaskError(f"bitmask row index {index} is out of range for {rows.shape[0]} rows")
    if isinstance(rows, np.ndarray):
        return rows[index], _noop
    if rows.device.type == "cpu":
        view = rows.numpy()
        remember_host_rows(bitmask, view)
        return view[index], _noop
    import torch

    host = np.zeros(words, dtype=np.int32)
    return host, lambda: rows[index].copy_(torch.from_numpy(host))


_TORCH_RUN_ROWS = 32  # a run of at least this many rows is copied by torch (on its intra-op threads)


def copy_row_runs(pool: torch.Tensor, host: np.ndarray, slots: Sequence[int | None], out: np.ndarray,
                  rows: Sequence[int]) -> None:
    """``out[rows[i]] = host[slots[i]]`` for each slot that is not None, a run of consecutive
    destination rows at a time: one ``np.take`` for a short run, one ``torch.index_select`` into
    ``out``'s view for a long one.  A batch of 128 DeepSeek rows (2 MiB) took 142 us row by row,
    98 us with ``np.take`` and 39 us with torch's copy on this machine's two threads.  ``pool`` is a
    CPU tensor and ``host`` its numpy view (the mask cache's pool)."""
    import torch

    n = len(slots)
    r0 = rows[0] if n else -1
    if n >= _TORCH_RUN_ROWS and r0 >= 0 and out.flags.c_contiguous and None not in slots \
            and rows == list(range(r0, r0 + n)):  # every row a hit, into rows in order: one copy, no scan
        index = torch.from_numpy(np.array(slots, dtype=np.int64))
        torch.index_select(pool, 0, index, out=torch.from_numpy(out[r0:r0 + n]))
        return
    i = 0
    while i < n:
        if slots[i] is None:
            i += 1
            continue
        j = i + 1
        r0 = rows[i]
        while r0 >= 0 and j < n and slots[j] is not None and rows[j] == rows[j - 1] + 1:
            j += 1
        if j - i == 1:
            out[r0] = host[slots[i]]  # type: ignore[index]
        elif j - i < _TORCH_RUN_ROWS or not out.flags.c_contiguous:
            np.take(host, slots[i:j], axis=0, out=out[r0:r0 + j - i], mode="clip")  # type: ignore[call-overload]
        else:
            index = torch.from_numpy(np.array(slots[i:j], dtype=np.int64))
            torch.index_select(pool, 0, index, out=torch.from_numpy(out[r0:r0 + j - i]))
        i = j
