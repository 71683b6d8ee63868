"""Packed token bitmasks: int32, shape ``(batch, ceil(vocab_size / 32))``, bit 1 = allowed.

The layout xgrammar, llguidance and vLLM share: bit ``i % 32`` of word
``i // 32`` says whether token ``i`` is allowed, so bitmasks interoperate.
torch is imported only when these functions run.
"""

from leapgen.bitmask.cpu import (allocate_token_bitmask, apply_token_bitmask_inplace, bitmask_dtype, bitmask_to_bool,
                                 reset_token_bitmask)

__all__ = ["allocate_token_bitmask", "apply_token_bitmask_inplace", "bitmask_dtype", "bitmask_to_bool",
           "reset_token_bitmask"]
