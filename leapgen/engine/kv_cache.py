"""The KV cache of one sequence: :class:`KvCache`.

One responsibility: hold the keys and values of a sequence's tokens, for every
layer, in one preallocated buffer that grows by doubling, so that appending a
token is a slice write (not a concatenation) and cropping after a jump-forward
is O(1). Each request owns its cache; the model runner batches requests by
packing their new tokens, not by padding their caches.
"""

from __future__ import annotations

import torch

_MIN_CAPACITY = 64


class KvCache:
    """Keys/values of one sequence.

    Parameters
    ----------
    num_layers, num_kv_heads, head_dim : int
        Shape of the model's attention.
    dtype : torch.dtype, default torch.float32
    device : torch.device or str, default "cpu"

    Attributes
    ----------
    length : int
        Tokens whose keys/values are held (positions ``0 .. length - 1``).
    keys, values : torch.Tensor
        ``dtype``, shape ``(num_layers, num_kv_heads, capacity, head_dim)``;
        only ``[:, :, :length]`` is meaningful.
    """

    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int, *,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        shape = (num_layers, num_kv_heads, 0, head_dim)
        self.keys = torch.empty(shape, dtype=dtype, device=device)
        self.values = torch.empty(shape, dtype=dtype, device=device)
        self.length = 0

    @property
    def capacity(self) -> int:
        """Tokens the buffer holds before it must grow."""
        return self.keys.shape[2]

    def get_seq_length(self) -> int:
        """``length`` (the name transformers' caches use)."""
        return self.length

    def reserve(self, extra: int) -> None:
        """Make room for ``extra`` more tokens (mutates: may reallocate)."""
        need = self.length + extra
        if need <= self.capacity:
            return
        cap = max(_MIN_CAPACITY, self.capacity)
        while cap < need:
            cap *= 2
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_empty((old.shape[0], old.shape[1], cap, old.shape[3]))
            new[:, :, : self.length] = old[:, :, : self.length]
            setattr(self, name, new)

    def crop(self, length: int) -> None:
        """Keep the first ``length`` tokens (a no-op when ``length`` >= the
        current length). Mutates ``length``.

        Raises
        ------
        ValueError
            If ``length`` < 0.
        """
        if length < 0:
            raise ValueError(f"cannot crop a KV cache to {length} tokens")
        self.length = min(self.length, length)

    def memory_size_bytes(self) -> int:
        """Bytes allocated by the two buffers."""
        return 2 * self.keys.numel() * self.keys.element_size()
