"""CPU implementation of the packed-bitmask operations (vectorized torch)."""

from __future__ import annotations

import numpy as np


def allocate_token_bitmask(batch_size: int, vocab_size: int):
    """A bitmask with every token allowed.

    Parameters
    ----------
    batch_size : int
    vocab_size : int
        Width of the model's logits (may exceed the tokenizer's vocabulary).

    Returns
    -------
    torch.Tensor
        int32, shape ``(batch_size, ceil(vocab_size / 32))``, all bits 1, on CPU.

    Raises
    ------
    ValueError
        Non-positive sizes.
    """
    import torch

    if batch_size <= 0 or vocab_size <= 0:
        raise ValueError(f"batch_size and vocab_size must be positive, got {batch_size}, {vocab_size}")
    return torch.full((batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32)


def bitmask_dtype():
    """The bitmask's dtype, ``torch.int32`` (xgrammar's ``bitmask_dtype``); imports torch."""
    import torch

    return torch.int32


def reset_token_bitmask(bitmask) -> None:
    """Set every bit to 1 (all tokens allowed). Mutates ``bitmask``."""
    bitmask.fill_(-1)


def bitmask_to_bool(bitmask, vocab_size: int):
    """Unpack a bitmask into a bool mask.

    Parameters
    ----------
    bitmask : torch.Tensor
        int32, shape ``(batch, W)`` or ``(W,)``.
    vocab_size : int
        Columns wanted; columns past ``32 * W`` are False.

    Returns
    -------
    torch.Tensor
        bool, shape ``(batch, vocab_size)`` (or ``(vocab_size,)``); True = allowed.
    """
    import torch

    shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    bits = ((bitmask.unsqueeze(-1) >> shifts) & 1).bool()  # (..., W, 32)
    bits = bits.reshape(*bitmask.shape[:-1], -1)
    width = bits.shape[-1]
    if vocab_size <= width:
        return bits[..., :vocab_size]
    pad = torch.zeros(*bits.shape[:-1], vocab_size - width, dtype=torch.bool, device=bits.device)
    return torch.cat([bits, pad], dim=-1)


def apply_token_bitmask_inplace(logits, bitmask, *, indices=None) -> None:
    """Set the logits of disallowed tokens to ``-inf``, in place.

    Parameters
    ----------
    logits : torch.Tensor
        float, shape ``(batch, vocab_size)`` or ``(vocab_size,)``. Columns past
        ``32 * W`` (a model padded wider than the bitmask) are masked off.
    bitmask : torch.Tensor
        int32, shape ``(batch_b, W)`` or ``(W,)``.
    indices : sequence of int, optional
        Rows to mask: logits row ``indices[i]`` with bitmask row ``indices[i]``
        (xgrammar's convention). Default: every row.
        Default: every row, bitmask row ``i`` for logits row ``i``.

    Raises
    ------
    ValueError
        Shapes that do not fit, or a bitmask that is not int32.

    Mutates ``logits``; ``bitmask`` is not changed. CUDA logits go through
    the Triton kernel of :mod:`leapgen.bitmask.triton` when Triton is
    installed; everything else through vectorized torch.
    """
    import torch

    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be int32, got {bitmask.dtype}")
    if logits.device.type == "cuda":
        from leapgen.bitmask.triton import apply_token_bitmask_inplace_triton, triton_available

        if triton_available():
            apply_token_bitmask_inplace_triton(logits, bitmask.to(logits.device).contiguous(), indices=indices)
            return
    squeeze = logits.dim() == 1
    lg = logits.unsqueeze(0) if squeeze else logits
    bm = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if bm.device != lg.device:
        bm = bm.to(lg.device)
    if indices is None:
        if bm.shape[0] != lg.shape[0]:
            raise ValueError(f"bitmask has {bm.shape[0]} rows, logits {lg.shape[0]}")
        rows = None
        allowed = bitmask_to_bool(bm, lg.shape[-1])
    else:
        rows = torch.as_tensor(list(indices), dtype=torch.long, device=lg.device)
        if rows.numel() and (int(rows.max()) >= min(lg.shape[0], bm.shape[0]) or int(rows.min()) < 0):
            raise ValueError(f"indices outside the logits ({lg.shape[0]}) or bitmask ({bm.shape[0]}) rows")
        allowed = bitmask_to_bool(bm[rows], lg.shape[-1])
    if rows is None:
        lg.masked_fill_(~allowed, float("-inf"))
    else:
        sub = lg[rows]
        sub.masked_fill_(~allowed, float("-inf"))
        lg[rows] = sub


def numpy_view(bitmask) -> np.ndarray | None:
    """A writable numpy view of a CPU bitmask, or None.

    Parameters
    ----------
    bitmask : numpy.ndarray or torch.Tensor
        int32, ``(batch, ceil(vocab_size / 32))``.

    Returns
    -------
    numpy.ndarray or None
        ``bitmask`` itself (a numpy array), the tensor's memory (a CPU
        tensor: writes reach the tensor), or None for a tensor on another
        device. Does not copy or mutate.
    """
    if isinstance(bitmask, np.ndarray):
        return bitmask
    if getattr(bitmask, "device", None) is not None and bitmask.device.type == "cpu":
        return bitmask.numpy()
    return None
