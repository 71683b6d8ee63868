"""Pick the next token from (already masked) logits.

One responsibility: temperature, top-k, top-p, then argmax or a draw from the
request's own seeded ``torch.Generator``. Grammar masking happens before, in
the engine (``apply_token_bitmask_inplace``): masked tokens arrive here as
``-inf`` and can never be picked.
"""

from __future__ import annotations

import torch

from leapgen.engine.sampling_params import SamplingParams


def make_generator(seed: int | None) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed`` (or a fresh random seed
    when ``None``)."""
    gen = torch.Generator(device="cpu")
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)
    return gen


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    """Choose one token id.

    Parameters
    ----------
    logits : torch.Tensor
        float32, shape ``(vocab_size,)``; masked tokens are ``-inf``. Mutated
        (scaled and filtered in place) when sampling is not greedy.
    params : SamplingParams
        temperature, top_k, top_p.
    generator : torch.Generator
        CPU generator; advanced by one draw when not greedy.

    Returns
    -------
    int
        The token id. Greedy ties go to the lowest id.

    Raises
    ------
    ValueError
        If every token is masked (all logits ``-inf``).
    """
    if params.greedy:
        token = int(torch.argmax(logits))
        if logits[token] == float("-inf"):
            raise ValueError("every token is masked")
        return token
    logits.div_(params.temperature)
    if params.top_k != -1 and params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits.masked_fill_(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # Drop a token when the tokens before it already reach top_p.
        before = torch.cumsum(probs, dim=-1) - probs
        drop = before >= params.top_p
        logits[order[drop]] = float("-inf")
    probs = torch.softmax(logits, dim=-1)
    if not torch.isfinite(probs).all():
        raise ValueError("every token is masked")
    return int(torch.multinomial(probs, 1, generator=generator))
