"""Prompt log-probabilities (``SamplingParams.prompt_logprobs``) and prefill-only
requests (``max_tokens=0``): what SGLang's ``select`` asks a server for.

The oracle is the Hugging Face model itself, called on the whole prompt with
no cache (no leapgen code: ``model(ids).logits``, ``torch.log_softmax``,
``torch.topk``); the engine runs float32 prompts so both sides compute in the
same precision."""

from __future__ import annotations

import pytest
import torch

from leapgen.engine import SamplingParams

pytestmark = pytest.mark.model

TOL = 1e-3
PROMPT = ("Capitals of Europe, one per line. France: Paris. Germany: Berlin. Spain: Madrid. "
          "Portugal: Lisbon. Italy:")


@pytest.fixture(scope="module")
def llm(loaded_model):
    from leapgen.engine import LLM

    return LLM(loaded=loaded_model, prefill_dtype="float32")


def reference(llm, ids: list[int]) -> torch.Tensor:
    """``(len(ids) - 1, V)``: row ``j`` is log p(. | ids[: j + 1])."""
    with torch.no_grad():
        logits = llm.loaded.model(torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1)


def check(llm, out, start: int, num_top: int) -> None:
    ids = list(out.prompt_token_ids)
    ref = reference(llm, ids)
    entries = out.prompt_logprobs
    assert len(entries) == len(ids) - start and entries[0] is None
    for j, e in zip(range(start + 1, len(ids)), entries[1:]):
        assert e.token_id == ids[j] and not e.sampled
        assert abs(e.logprob - float(ref[j - 1, ids[j]])) < TOL, (j, e.logprob, float(ref[j - 1, ids[j]]))
        values, top_ids = torch.topk(ref[j - 1], num_top)
        assert [t for t, _ in e.top] == top_ids.tolist()
        assert all(abs(lp - v) < TOL for (_, lp), v in zip(e.top, values.tolist()))


def test_a_prefill_only_request_scores_the_whole_prompt(llm):
    out = llm.generate(PROMPT, SamplingParams(max_tokens=0, prompt_logprobs=2), chat=False)[0]
    assert (out.text, out.completion_tokens, out.finish_reason) == ("", 0, "length")
    check(llm, out, 0, 2)


def test_prefill_only_without_logprobs_has_no_entries(llm):
    out = llm.generate(PROMPT, SamplingParams(max_tokens=0), chat=False)[0]
    assert out.completion_tokens == 0 and out.prompt_logprobs is None
    assert out.prompt_tokens == len(out.prompt_token_ids) > 0


def test_a_start_inside_a_cached_prefix_is_still_scored(llm):
    # The first request fills the prefix cache with the prompt; the second may reuse at most `start` tokens.
    first = llm.generate(PROMPT, SamplingParams(max_tokens=0), chat=False)[0]
    n = len(first.prompt_token_ids)
    params = SamplingParams(max_tokens=0, prompt_logprobs=0, prompt_logprobs_start=n - 2)
    out = llm.generate(PROMPT + " Rome. Austria:", params, chat=False)[0]
    assert 0 < out.cached_prompt_tokens <= n - 2
    check(llm, out, n - 2, 0)
    assert len(out.prompt_logprobs) == len(out.prompt_token_ids) - (n - 2)


def test_generation_with_prompt_logprobs_is_unchanged(llm):
    plain = llm.generate(PROMPT, SamplingParams(max_tokens=4), chat=False)[0]
    scored = llm.generate(PROMPT, SamplingParams(max_tokens=4, prompt_logprobs=1, prompt_logprobs_start=3),
                          chat=False)[0]
    assert scored.text == plain.text and scored.completion_tokens == 4
    check(llm, scored, 3, 1)


def test_every_sample_carries_the_prompt_entries(llm):
    outs = llm.generate(PROMPT, SamplingParams(max_tokens=2, n=2, temperature=1.0, seed=3, prompt_logprobs=0),
                        chat=False)
    assert len(outs) == 2 and outs[0].prompt_logprobs == outs[1].prompt_logprobs
    check(llm, outs[1], 0, 0)


def test_a_start_past_the_prompt_is_refused(llm):
    with pytest.raises(ValueError, match="prompt_logprobs_start"):
        llm.generate("Hi", SamplingParams(max_tokens=0, prompt_logprobs=0, prompt_logprobs_start=50), chat=False)
