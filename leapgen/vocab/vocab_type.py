"""What a tokenizer reader needs to describe a vocabulary: its encoding
(:class:`VocabType`) and the token strings that stop a turn by default.

Shared by :class:`leapgen.vocab.TokenizerInfo` and the Hugging Face reader
(:mod:`leapgen.vocab.hf`).
"""

from __future__ import annotations

import enum

#: Token strings that end a turn or a document in common chat formats; a
#: special token with one of these strings is a default stop token.
DEFAULT_STOP_TOKEN_STRINGS: tuple[str, ...] = (
    "</s>", "<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>",
    "<|end|>", "<end_of_turn>", "<eos>", "<|end▁of▁sentence|>", "<|EOT|>", "<|return|>",
    "<|call|>",
)


class VocabType(enum.Enum):
    """How a tokenizer writes a token's bytes as a token string.

    Attributes
    ----------
    RAW
        The entries are the bytes themselves (tiktoken ranks, or ``str`` taken as UTF-8).
    BYTE_FALLBACK
        SentencePiece: ``"▁"`` (U+2581) is a space and ``"<0xNN>"`` is the raw byte ``0xNN``
        (Llama-2, Mistral, Gemma).
    BYTE_LEVEL
        Byte-level BPE: each character stands for one byte through GPT-2's
        ``bytes_to_unicode`` table (GPT-2, Llama-3, Qwen, SmolLM2).
    """

    RAW = "raw"
    BYTE_FALLBACK = "byte_fallback"
    BYTE_LEVEL = "byte_level"
