"""Vocabularies: token id -> exact bytes, special and stop tokens (``TokenizerInfo``)."""

from leapgen.vocab.tokenizer_info import DEFAULT_STOP_TOKEN_STRINGS, TokenizerInfo, VocabType, decode_token_strings

__all__ = ["TokenizerInfo", "VocabType", "DEFAULT_STOP_TOKEN_STRINGS", "decode_token_strings"]
