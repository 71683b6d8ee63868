"""The tokens of a grammar state's forced text, as leapgen's vLLM backend plans them for
jump-forward (why and how: :mod:`leapgen.integrations.vllm_jump_forward`).

Engine-free: a Hugging Face tokenizer and a :class:`~leapgen.GrammarMatcher`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from leapgen.engine.token_healing import TokenHealing
from leapgen.errors import StackDepthError

_TOKENIZED_CACHE = 4096


class ForcedTokens:
    """Plans the tokens of a grammar state's forced text.

    Parameters
    ----------
    tokenizer : Hugging Face tokenizer
        ``encode(text, add_special_tokens=False)``.
    tokenizer_info : TokenizerInfo
        The same vocabulary as the grammars' (token bytes, special ids).
    """

    def __init__(self, tokenizer: Any, tokenizer_info: Any):
        self._tokenizer = tokenizer
        self._healing = TokenHealing(tokenizer_info.token_bytes, tokenizer_info.special_token_ids)
        self._tokenized: OrderedDict[str, list[int]] = OrderedDict()

    def _tokenize(self, text: str) -> list[int]:
        ids = self._tokenized.get(text)
        if ids is None:
            ids = list(self._tokenizer.encode(text, add_special_tokens=False))
            self._tokenized[text] = ids
            if len(self._tokenized) > _TOKENIZED_CACHE:
                self._tokenized.popitem(last=False)
        return ids

    def plan(self, matcher: Any) -> tuple[int, ...]:
        """The tokens the grammar will require next from ``matcher``'s state.

        Parameters
        ----------
        matcher : GrammarMatcher
            Not mutated (the tokens are checked on a fork).

        Returns
        -------
        tuple of int
            The forced text's own tokenization, up to the first token the
            grammar rejects, less its last token when the grammar allows a
            longer token starting with that token's bytes; ``()`` where
            nothing is forced.
        """
        text = matcher.find_jump_forward_string()
        if not text:
            return ()
        ids = self._tokenize(text)
        fork = matcher.fork()
        fork.max_rollback_tokens = -1
        n = 0
        for token in ids:
            try:
                if not fork.accept_token(token):
                    break
            except StackDepthError:
                break
            n += 1
        if n and n == len(ids):  # the last token ends where the forced text ends
            fork.rollback(1)
            if self._healing.allows_longer_token(fork, ids[n - 1]):
                n -= 1
        return tuple(ids[:n])
