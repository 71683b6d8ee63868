"""Teacher-forced token log-probabilities of a token sequence (what SGLang's
``select`` ranks choices by, its ``input_token_logprobs``)."""

from __future__ import annotations

from typing import Any, Sequence

import torch


def token_logprobs(model: Any, token_ids: Sequence[int]) -> list[float]:
    """``log p(token_ids[j] | token_ids[:j])`` for ``j = 1 .. len - 1``.

    Parameters
    ----------
    model : transformers causal LM
        Called once on the whole sequence (float32 logits, no KV cache).
    token_ids : sequence of int
        At least one id.

    Returns
    -------
    list of float
        ``len(token_ids) - 1`` natural-log probabilities.

    Does not mutate the model.
    """
    ids = [int(t) for t in token_ids]
    if len(ids) < 2:
        return []
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(torch.tensor([ids], device=device)).logits[0, :-1].float()  # (L-1, V)
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(1, torch.tensor(ids[1:], device=device)[:, None])[:, 0].tolist()
