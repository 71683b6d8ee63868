"""Triton kernel of ``apply_token_bitmask_inplace`` for logits on a GPU.

One program per (masked row, block of ``BLOCK`` columns): it loads the
bitmask word of each column, and stores ``-inf`` where the bit is 0 or the
column lies past ``32 * W``. :func:`leapgen.bitmask.apply_token_bitmask_inplace`
uses it for CUDA tensors when Triton is installed, and the vectorized torch
code otherwise (which runs on any device). With ``TRITON_INTERPRET=1`` set
before Triton is imported, the kernel runs on CPU tensors (how it is tested
on machines without a GPU).
"""

from __future__ import annotations

import functools
import importlib.util

BLOCK = 1024


def triton_available() -> bool:
    """Whether Triton can be imported (found without importing it)."""
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


@functools.lru_cache(maxsize=1)
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def apply_bitmask_kernel(logits_ptr, bitmask_ptr, logit_rows_ptr, mask_rows_ptr, vocab_size, words,
                             logits_stride, bitmask_stride, BLOCK_SIZE: tl.constexpr):
        work = tl.program_id(0)
        logit_row = tl.load(logit_rows_ptr + work).to(tl.int64)
        mask_row = tl.load(mask_rows_ptr + work).to(tl.int64)
        cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        in_row = cols < vocab_size
        word = cols // 32
        packed = tl.load(bitmask_ptr + mask_row * bitmask_stride + word, mask=in_row & (word < words), other=0)
        allowed = (packed >> (cols % 32)) & 1
        tl.store(logits_ptr + logit_row * logits_stride + cols, float("-inf"), mask=in_row & (allowed == 0))

    return apply_bitmask_kernel


def apply_token_bitmask_inplace_triton(logits, bitmask, *, indices=None) -> None:
    """Set the logits of disallowed tokens to ``-inf`` with the Triton kernel, in place.

    Parameters and semantics are those of
    :func:`leapgen.bitmask.apply_token_bitmask_inplace`; ``logits`` and
    ``bitmask`` must be on the same device (a GPU, or the CPU under
    ``TRITON_INTERPRET=1``).

    Raises
    ------
    ValueError
        Shapes that do not fit, a bitmask that is not int32, or tensors on
        different devices.

    Mutates ``logits``; ``bitmask`` is not changed.
    """
    import torch

    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be int32, got {bitmask.dtype}")
    lg = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bm = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if bm.device != lg.device:
        raise ValueError(f"logits on {lg.device} but bitmask on {bm.device}")
    if lg.stride(-1) != 1 or bm.stride(-1) != 1:
        raise ValueError("logits and bitmask rows must be contiguous")
    if indices is None:
        if bm.shape[0] != lg.shape[0]:
            raise ValueError(f"bitmask has {bm.shape[0]} rows, logits {lg.shape[0]}")
        logit_rows = mask_rows = list(range(lg.shape[0]))
    else:
        logit_rows = mask_rows = [int(i) for i in indices]
    if any(not 0 <= r < lg.shape[0] for r in logit_rows) or any(not 0 <= r < bm.shape[0] for r in mask_rows):
        raise ValueError(f"row indices outside the logits ({lg.shape[0]}) or bitmask ({bm.shape[0]}) rows")
    if not logit_rows:
        return
    rows = torch.tensor([logit_rows, mask_rows], dtype=torch.int32, device=lg.device)
    vocab = lg.shape[-1]
    grid = (len(logit_rows), (vocab + BLOCK - 1) // BLOCK)
    _kernel()[grid](lg, bm, rows[0], rows[1], vocab, bm.shape[-1], lg.stride(0), bm.stride(0), BLOCK_SIZE=BLOCK)
