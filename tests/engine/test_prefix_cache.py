"""Prompt KV reuse across requests: a repeated (or prefix-sharing) prompt
copies the cached KV of the shared prefix, prefills only the rest, is
counted, and gives the logits and output of a cold run.

Exactly so in float32 (``prefill_dtype="float32"``, used here); a bfloat16
prefill's rounding depends on how many prompt rows share its GEMM, so a warm
run's logits are then only close to a cold run's (see ``model_runner``)."""

from __future__ import annotations

import pytest
import torch

from leapgen.engine import LLM, SamplingParams
from leapgen.engine.prefix_cache import PrefixCache

ATOL = 1e-4

SYSTEM = ("You are a careful assistant. Answer briefly and precisely. When asked for data, reply with JSON "
          "only, using double quotes and no trailing commas. ")
PROMPT = SYSTEM + "What is the capital of France?"
OTHER = SYSTEM + "Name three primary colors."


def _first_logits(llm: LLM, prompt: str, params: SamplingParams):
    """Generate, recording the logits of the request's first forward."""
    seen = []
    real = llm.model_runner.batch_forward

    def spy(caches, token_lists, num_prompt=None):
        out = real(caches, token_lists, num_prompt)
        seen.append(out[0].clone())
        return out

    llm.model_runner.batch_forward = spy
    try:
        out = llm.generate(prompt, params)[0]
    finally:
        del llm.model_runner.batch_forward
    return out, seen[0]


@pytest.mark.model
def test_repeated_prompt_reuses_the_prefix_and_matches_a_cold_run(loaded_model):
    llm = LLM(loaded=loaded_model, num_threads=1, prefix_cache_tokens=2048, prefill_dtype="float32")
    params = SamplingParams(max_tokens=8, temperature=0.0)
    cold, cold_logits = _first_logits(llm, PROMPT, params)
    assert cold.cached_prompt_tokens == 0 and llm.stats.prefix_cache_hits == 0
    fed = llm.stats.prefill_tokens
    assert fed == cold.prompt_tokens

    warm, warm_logits = _first_logits(llm, PROMPT, params)
    assert warm.cached_prompt_tokens == warm.prompt_tokens - 1  # all but the last token reused
    assert llm.stats.prefix_cache_hits == 1
    assert llm.stats.prefix_cache_hit_tokens == warm.cached_prompt_tokens
    assert llm.stats.prefill_tokens - fed == 1
    torch.testing.assert_close(warm_logits, cold_logits, atol=ATOL, rtol=0)
    assert warm.token_ids == cold.token_ids

    # A prompt sharing only the system part: the shared prefix is reused, the
    # output equals an engine without the prefix cache.
    shared, _ = _first_logits(llm, OTHER, params)
    assert 16 <= shared.cached_prompt_tokens < shared.prompt_tokens - 1
    no_cache = LLM(loaded=loaded_model, num_threads=1, prefix_cache_tokens=0, prefill_dtype="float32")
    reference = no_cache.generate(OTHER, params)[0]
    assert reference.cached_prompt_tokens == 0 and no_cache.stats.prefix_cache_hits == 0
    assert shared.token_ids == reference.token_ids


@pytest.mark.model
def test_prefix_reuse_with_a_grammar_and_in_a_batch(loaded_model):
    llm = LLM(loaded=loaded_model, num_threads=1, prefix_cache_tokens=2048, prefill_dtype="float32")
    params = [SamplingParams(max_tokens=10, regex=r"[A-Z][a-z]+"), SamplingParams(max_tokens=6)]
    first = llm.generate([PROMPT, OTHER], params)
    again = llm.generate([PROMPT, OTHER], params)
    assert all(o.cached_prompt_tokens > 0 for o in again)
    assert [o.token_ids for o in again] == [o.token_ids for o in first]


def test_prefix_cache_is_lru_bounded_by_tokens():
    kv = torch.arange(40, dtype=torch.float32).view(1, 1, 40, 1)
    cache = PrefixCache(max_tokens=50, min_tokens=4)
    a, b = list(range(20)), list(range(100, 125))
    cache.insert(a, kv, kv)
    cache.insert(b, kv, kv)
    assert cache.num_tokens == 45
    n, keys, _ = cache.lookup(a + [7, 8], limit=21)
    assert n == 20 and torch.equal(keys[:, :, :n], kv[:, :, :20])  # a is now most recent
    cache.insert(list(range(200, 220)), kv, kv)  # evicts b, the least recently used
    assert cache.num_tokens == 40 and cache.lookup(b, limit=25)[0] == 0
    assert cache.lookup(a, limit=10)[0] == 10  # capped by the caller's limit
    assert cache.lookup(a[:3] + [999] * 10, limit=13)[0] == 0  # below min_tokens
    cache.insert(a[:10], kv, kv)  # covered by a: nothing stored
    assert cache.num_tokens == 40
    cache.insert(a + [1, 2, 3], kv, kv)  # extends a: replaces it
    assert cache.num_tokens == 43 and len(cache) == 2
    assert PrefixCache(0).lookup(a, limit=20)[0] == 0
