"""The Triton backend of :func:`pda.bitmask.apply_token_bitmask_inplace` (imported only when used).

One program masks ``BLOCK`` consecutive tokens of one row: it reads the word of each token, tests
the token's bit and stores ``-inf`` where the bit is clear.  Arguments are checked by the caller.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _mask_kernel(
    logits_ptr,
    bitmask_ptr,
    rows_ptr,
    vocab_size,
    logits_row_stride,
    logits_col_stride,
    bitmask_row_stride,
    HAS_ROWS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    """Set logits[row, t] = -inf for each t of this block whose bit in bitmask[row] is 0."""
    if HAS_ROWS:
        row = tl.load(rows_ptr + tl.program_id(0))
    else:
        row = tl.program_id(0).to(tl.int64)
    tokens = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    inside = tokens < vocab_size
    words = tl.load(bitmask_ptr + row * bitmask_row_stride + tokens // 32, mask=inside, other=-1)
    banned = ((words >> (tokens % 32)) & 1) == 0
    tl.store(logits_ptr + row * logits_row_stride + tokens * logits_col_stride, float("-inf"), mask=inside & banned)


def apply_triton(logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None, vocab_size: int) -> None:
    """Mask 2-D ``logits`` with 2-D ``bitmask`` in place; ``rows`` (int64, same device) or every row."""
    if bitmask.stride(-1) != 1:
        bitmask = bitmask.contiguous()
    num_rows = logits.shape[0] if rows is None else rows.numel()
    grid = (num_rows, triton.cdiv(vocab_size, BLOCK))
    _mask_kernel[grid](
        logits,
        bitmask,
        rows if rows is not None else bitmask,  # an unused pointer when HAS_ROWS is False
        vocab_size,
        logits.stride(0),
        logits.stride(1),
        bitmask.stride(0),
        HAS_ROWS=rows is not None,
        BLOCK_SIZE=BLOCK,
    )
