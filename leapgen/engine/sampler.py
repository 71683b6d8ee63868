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


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator, *,
           temperature: float | None = None) -> int:
    """Choose one token id.

    Parameters
    ----------
    logits : torch.Tensor
        float32, shape ``(vocab_size,)``; masked tokens are ``-inf``. Not
        mutated.
    params : SamplingParams
        temperature, top_k, top_p.
    generator : torch.Generator
        CPU generator; advanced by one draw when not greedy.
    temperature : float, optional
        This step's temperature instead of ``params.temperature`` (the grammar
        rule's: :attr:`leapgen.GrammarMatcher.temperature`); 0 is greedy.

    Returns
    -------
    int
        The token id. Greedy ties go to the lowest id.

    Raises
    ------
    ValueError
        If every token is masked (all logits ``-inf``).

    Notes
    -----
    Any positive temperature and top_p sample, however small: the logits are
    shifted so that the best is 0 and scaled in float64, so a tiny
    temperature underflows the other tokens' probabilities to 0 (greedy, ties
    shared) instead of overflowing to ``inf`` / ``nan``; the most likely
    token is always in the top-p nucleus.
    """
    t = params.temperature if temperature is None else temperature
    best = torch.max(logits)
    if best == float("-inf"):
        raise ValueError("every token is masked")
    if t == 0:
        return int(torch.argmax(logits))
    scaled = (logits.double() - best).div_(t)  # <= 0 everywhere, 0 at the best
    if params.top_k != -1 and params.top_k < scaled.numel():
        kth = torch.topk(scaled, params.top_k).values[-1]
        scaled.masked_fill_(scaled < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_scaled, order = torch.sort(scaled, descending=True)
        probs = torch.softmax(sorted_scaled, dim=-1)
        # Drop a token when the tokens before it already reach top_p (never the first).
        drop = torch.cumsum(probs, dim=-1) - probs >= params.top_p
        drop[0] = False
        scaled[order[drop]] = float("-inf")
    return int(torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator))
