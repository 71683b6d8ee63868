"""``n > 1``: several samples of one prompt, prefilled once.

One responsibility: the samples' parameters and how sample ``i > 0`` gets
the prompt's KV. Each sample is a :class:`~leapgen.engine.request.Request`
of its own (own matcher, own generator, own KV cache), so it batches, masks,
jump-forwards and finishes like any request. Sample 0 (the *leader*)
prefills the prompt; the others wait for that forward pass and then copy the
prompt's keys/values into their caches (a copy, not a shared buffer: a
decode writes in place and a jump-forward crops, and neither may touch a
sibling). When the leader's pass ended exactly at the prompt's end, they take
its next-token logits too and sample from them in the same step (they *ride* on
the leader's row: their masks are filled with the batch's); otherwise they keep
the prompt's last token to feed themselves (one token, so that their first
row of logits comes from their own pass). The seeds follow vLLM: sample
``i`` is seeded ``seed + i`` when the request has a seed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import torch

from leapgen.engine.request import Request
from leapgen.engine.sampler import make_generator
from leapgen.engine.sampling_params import SamplingParams


def sample_params(params: SamplingParams) -> list[SamplingParams]:
    """The parameters of each of ``params.n`` samples (``n == 1`` each;
    seeds ``seed + i`` modulo 2**64 when a seed is given)."""
    if params.n == 1:
        return [params]
    return [dataclasses.replace(params, n=1, seed=None if params.seed is None else (params.seed + i) % 2 ** 64)
            for i in range(params.n)]


def make_samples(prompt: str, prompt_ids: list[int], params: SamplingParams, stop_token_ids: frozenset,
                 compile_future: Any, ids: Iterator[int]) -> list[Request]:
    """The ``params.n`` requests of one prompt: one compile for all, sample 0
    the leader of the others, each its own generator (request ids drawn from
    ``ids``)."""
    requests: list[Request] = []
    for i, sp in enumerate(sample_params(params)):
        requests.append(Request(
            request_id=next(ids), prompt=prompt, prompt_ids=prompt_ids, params=sp, stop_token_ids=stop_token_ids,
            generator=make_generator(sp.seed), compile_future=compile_future, index=i,
            leader=requests[0] if i else None, owns_compile=params.n == 1,
            logprobs=None if params.logprobs is None else []))
    return requests


def waits_for_leader(req: Request) -> bool:
    """Whether ``req`` must not prefill yet: it follows a leader that is
    alive and has not prefilled the prompt. Forgets a leader that finished
    (mutates ``req.leader``): the sample then prefills its own prompt."""
    leader = req.leader
    if leader is None:
        return False
    if leader.is_finished or leader.kv_cache is None:
        req.leader = None
        return False
    return True


def rides_on(req: Request, fed: list[Request]) -> bool:
    """Whether ``req`` samples in this step from its leader's row: the leader
    is in the pass ``fed`` and the pass ends at the prompt's end (neither has
    output tokens), so :func:`share_prompt` hands ``req`` those logits before
    the step samples."""
    leader = req.leader
    return (leader is not None and not leader.output_ids and not req.output_ids
            and any(r is leader for r in fed))


def prompt_ready(leader: Request) -> bool:
    """Whether ``leader``'s cache holds the whole prompt."""
    n = len(leader.prompt_ids)
    return leader.kv_cache is not None and leader.num_cached >= n and leader.kv_cache.length >= n


def share_prompt(leader: Request, follower: Request, next_logits: torch.Tensor | None = None) -> int:
    """Copy the prompt's KV from ``leader`` into ``follower``'s fresh cache.

    Parameters
    ----------
    leader : Request
        Its cache holds the whole prompt (:func:`prompt_ready`).
    follower : Request
        Admitted (has a cache), nothing cached yet. Mutated: cache filled,
        ``num_cached``, ``num_prefix_cached``, ``leader`` (cleared),
        ``prompt_logprobs`` (the leader's), maybe ``stored_logits``.
    next_logits : torch.Tensor or None
        float32 ``(vocab_size,)``: the logits after the prompt's last token
        from the leader's pass, when that pass ended there; not mutated.

    Returns
    -------
    int
        Prompt tokens copied: the whole prompt when the follower takes
        ``next_logits`` or has output tokens (forced text) to feed without
        scoring the first one; else all but the last token.
    """
    n = len(leader.prompt_ids)
    takes_logits = next_logits is not None and not follower.output_ids
    whole = takes_logits or (follower.output_ids and follower.logprobs is None)
    count = n if whole else n - 1
    cache = follower.kv_cache
    if count:
        cache.reserve(count)
        cache.keys[:, :, :count] = leader.kv_cache.keys[:, :, :count]
        cache.values[:, :, :count] = leader.kv_cache.values[:, :, :count]
    cache.length = count
    follower.num_cached = follower.num_prefix_cached = count
    follower.prompt_logprobs = leader.prompt_logprobs  # (scored by the pass that prefilled the prompt)
    if takes_logits:
        follower.stored_logits = next_logits.clone()
    follower.leader = None
    return count
