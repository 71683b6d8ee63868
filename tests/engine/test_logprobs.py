"""Output-token log-probabilities (:mod:`leapgen.engine.logprobs`): sampled
tokens after the grammar mask and before temperature, forced tokens from the
extend pass that fed them, entries replaced with the tokens a jump-forward
retokenizes, cut with the text at a stop string.

The reference recomputes every position from scratch: one forward pass over
prompt + output on a fresh cache (prompt rows in the engine's prefill dtype,
as the engine runs them), the grammar's mask from an independent matcher
walk, ``torch.log_softmax`` and ``torch.topk``. The engine runs with
float32 prompts here (``prefill_dtype="float32"``), so both sides compute in
the same precision."""

from __future__ import annotations

import pytest
import torch

from leapgen import GrammarMatcher, allocate_token_bitmask, apply_token_bitmask_inplace
from leapgen.engine import SamplingParams

pytestmark = pytest.mark.model

TOL = 1e-3  # float32 rows of different batch shapes (decode one by one vs one pass)


@pytest.fixture(scope="module")
def llm(loaded_model):
    from leapgen.engine import LLM

    return LLM(loaded=loaded_model, prefill_dtype="float32")


def _reference_rows(llm, out) -> torch.Tensor:
    """Raw logits scoring each output token: row j predicts output token j."""
    runner = llm.model_runner
    ids = out_prompt_ids(llm, out) + list(out.token_ids)
    n_prompt = len(ids) - len(out.token_ids)
    rows = runner.batch_forward([runner.new_cache()], [ids], [n_prompt], [len(ids)])  # (len(ids), V)
    return rows[n_prompt - 1 : len(ids) - 1]


def out_prompt_ids(llm, out) -> list[int]:
    from leapgen.engine.prompt import build_prompt_ids

    return build_prompt_ids(llm.tokenizer, out.prompt, chat=True)


def _check(llm, out, params, num_top: int) -> None:
    assert out.logprobs is not None and [e.token_id for e in out.logprobs] == list(out.token_ids)
    assert sum(e.sampled for e in out.logprobs) == out.completion_tokens_wo_jump_forward
    rows = _reference_rows(llm, out)
    compiled = llm.grammar.compile(params)[0] if params.constrained else None
    matcher = GrammarMatcher(compiled) if compiled is not None else None
    for j, e in enumerate(out.logprobs):
        logits = rows[j].clone()
        if e.sampled and matcher is not None:
            bitmask = allocate_token_bitmask(1, logits.numel())
            matcher.fill_next_token_bitmask(bitmask)
            apply_token_bitmask_inplace(logits[None], bitmask)
        ref = torch.log_softmax(logits, -1)
        assert abs(e.logprob - float(ref[e.token_id])) < TOL, (j, e, float(ref[e.token_id]))
        values, ids = torch.topk(ref, num_top)
        allowed = int(torch.isfinite(ref).sum())  # a sampled step's mask may allow fewer than num_top
        assert len(e.top) == min(num_top, allowed), (j, e.top, allowed)
        for (tid, lp), v in zip(e.top, values.tolist()):
            assert abs(lp - v) < TOL and abs(float(ref[tid]) - lp) < TOL
        if matcher is not None:
            assert matcher.accept_token(e.token_id)


def test_sampled_and_forced_logprobs_equal_a_from_scratch_reference(llm):
    params = SamplingParams(regex=r'\{"id": [0-9]{2}, "name": "[A-Z][a-z]{1,8}", "ok": (true|false)\}',
                            max_tokens=40, logprobs=3)
    out = llm.generate("Make a record for Ada as JSON.", params)[0]
    assert out.finish_reason in ("stop", "grammar") and 0 < out.jump_forward_tokens < out.completion_tokens
    _check(llm, out, params, 3)


def test_temperature_does_not_change_the_reported_logprobs(llm):
    prompt = "List three colors:"
    hot = llm.generate(prompt, SamplingParams(max_tokens=6, temperature=1.7, seed=11, logprobs=2))[0]
    _check(llm, hot, SamplingParams(), 2)  # unconstrained: the model's log_softmax before temperature


def test_a_finish_right_after_a_jump_forward_still_scores_the_forced_tail(llm):
    # After the digit the grammar forces " done." and is then complete: the engine runs the extend pass
    # that scores the forced tokens before finishing (it would otherwise finish without a forward).
    params = SamplingParams(regex=r"Result: [0-9] done\.", max_tokens=20, logprobs=1)
    out = llm.generate("Give a one-digit result.", params)[0]
    assert out.text.endswith(" done.") and out.finish_reason == "grammar"
    assert not out.logprobs[-1].sampled
    _check(llm, out, params, 1)


def test_logprobs_are_cut_with_the_text_at_a_stop_string(llm):
    out = llm.generate("Count: 1, 2, 3,", SamplingParams(max_tokens=20, stop=(" 5",), logprobs=0), chat=False)[0]
    if out.finish_reason != "stop":
        pytest.skip(f"the model did not reach the stop string: {out.text!r}")
    token_bytes = llm.grammar.vocabulary.token_bytes
    covered = b"".join(token_bytes[e.token_id] for e in out.logprobs)
    assert covered.decode().startswith(out.text) and len(covered) - len(out.text.encode()) < 8
    assert all(e.top == () for e in out.logprobs)


def test_no_logprobs_unless_asked(llm):
    assert llm.generate("Hi", SamplingParams(max_tokens=3))[0].logprobs is None
