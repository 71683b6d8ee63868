"""Run the model forward over new tokens of one sequence, with a KV cache.

One responsibility: ``forward(cache, token_ids) -> next-token logits``. A
prefill, a one-token decode and a jump-forward *extend* (k tokens appended to a
cropped cache) are all the same call: the tokens given are appended after what
the cache already holds, in one forward pass.

The KV cache is a transformers ``DynamicCache`` owned by the request (see
:class:`leapgen.engine.request.Request`), so the runner itself holds no
per-sequence state; only counters. Batched forward over many caches comes with
continuous batching.
"""

from __future__ import annotations

import inspect
from typing import Any, Sequence

import torch


class ModelRunner:
    """Forward passes of a Hugging Face causal LM over a KV cache.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM in eval mode. Not mutated.

    Attributes
    ----------
    num_forwards : int
        Forward passes run so far.
    num_tokens_fed : int
        Tokens fed to the model so far (prefill, decode and extend together).
    last_num_tokens : int
        Tokens fed by the most recent forward pass.
    vocab_size : int
        Width of the model's logits (``config.vocab_size``); may exceed the
        tokenizer's vocabulary (padding rows).
    """

    def __init__(self, model: Any):
        self.model = model
        self.vocab_size = int(model.config.vocab_size)
        self.device = next(model.parameters()).device
        params = inspect.signature(model.forward).parameters
        # transformers >= 5.x names the argument ``cache``; older ones
        # ``past_key_values`` (still accepted, with a FutureWarning).
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        self._has_logits_to_keep = "logits_to_keep" in params
        self.num_forwards = 0
        self.num_tokens_fed = 0
        self.last_num_tokens = 0

    def new_cache(self) -> Any:
        """An empty KV cache for one sequence.

        Returns
        -------
        transformers.DynamicCache
        """
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # transformers < 4.56 takes no config
            return DynamicCache()

    @staticmethod
    def cache_length(cache: Any) -> int:
        """Number of tokens whose keys/values ``cache`` holds."""
        return int(cache.get_seq_length())

    @staticmethod
    def crop(cache: Any, length: int) -> None:
        """Drop the KV entries of every token at position >= ``length``.

        Parameters
        ----------
        cache : transformers.DynamicCache
            Mutated in place.
        length : int
            Tokens to keep, ``0 <= length``; a length >= the current one is a
            no-op.

        Raises
        ------
        ValueError
            If ``length`` < 0.
        """
        if length < 0:
            raise ValueError(f"cannot crop a KV cache to {length} tokens")
        remove = int(cache.get_seq_length()) - length
        if remove > 0:
            # A negative argument removes that many tokens in every
            # transformers version (5.x accepts only that form).
            cache.crop(-remove)

    @torch.no_grad()
    def forward(self, cache: Any, token_ids: Sequence[int]) -> torch.Tensor:
        """Append ``token_ids`` to the sequence in ``cache`` in one forward
        pass and return the logits for the token after the last one.

        Parameters
        ----------
        cache : transformers.DynamicCache
            The sequence's KV cache; mutated (the new tokens' keys/values are
            appended).
        token_ids : sequence of int
            At least one token id.

        Returns
        -------
        torch.Tensor
            float32, shape ``(vocab_size,)``: logits of the next token. A fresh
            tensor the caller may modify in place.

        Raises
        ------
        ValueError
            If ``token_ids`` is empty.
        """
        n = len(token_ids)
        if n == 0:
            raise ValueError("forward needs at least one token")
        input_ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self.device)  # (1, n)
        kwargs = {self._cache_kwarg: cache, "use_cache": True}
        if self._has_logits_to_keep:
            kwargs["logits_to_keep"] = 1
        out = self.model(input_ids=input_ids, **kwargs)
        self.num_forwards += 1
        self.num_tokens_fed += n
        self.last_num_tokens = n
        return out.logits[0, -1].float().clone()  # (V,)
