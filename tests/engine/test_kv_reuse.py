"""KV-cache reuse after a jump-forward: the logits after an extend over a
cropped cache equal those of a from-scratch forward over the same ids, and the
extend feeds only the tokens past the common prefix."""

from __future__ import annotations

import pytest
import torch

from leapgen.engine import LLM, SamplingParams
from leapgen.engine.jump_forward import common_prefix_length
from leapgen.engine.model_runner import ModelRunner
from leapgen.engine.prompt import build_prompt_ids
from leapgen.engine.request import Request
from tests.engine.person import PERSON_PROMPT, PERSON_SCHEMA

pytestmark = pytest.mark.model

ATOL = 1e-4


def _from_scratch(runner: ModelRunner, ids: list[int]) -> torch.Tensor:
    return runner.forward(runner.new_cache(), ids)


@pytest.mark.parametrize(
    "pieces, forced",
    [
        # Sampled tokens the tokenizer would produce too: the common prefix
        # keeps them all, the extend feeds the last sampled token + forced ones.
        (['{"', "name", '":', ' "', "Marie"], '", "age": '),
        # Non-canonical sampled tokens ("{" then '"'): the retokenization merges
        # them into '{"', the common prefix is 0 and cached tokens are dropped.
        (["{", '"'], 'name": "'),
    ],
)
def test_extend_after_crop_matches_from_scratch(loaded_model, pieces, forced):
    tok = loaded_model.tokenizer
    runner = ModelRunner(loaded_model.model)
    prompt_ids = build_prompt_ids(tok, PERSON_PROMPT)
    old = [i for piece in pieces for i in tok.encode(piece, add_special_tokens=False)]
    # Engine state after sampling old[-1]: everything but the last token is cached.
    cache = runner.new_cache()
    runner.forward(cache, prompt_ids + old[:-1])
    num_fed = len(old) - 1

    new = tok.encode(tok.decode(old) + forced, add_special_tokens=False)
    p = common_prefix_length(old, new)
    keep = len(prompt_ids) + min(p, num_fed)
    runner.crop(cache, keep)
    assert runner.cache_length(cache) == keep

    fed_before, forwards_before = runner.num_tokens_fed, runner.num_forwards
    logits = runner.forward(cache, new[keep - len(prompt_ids):])
    assert runner.num_forwards == forwards_before + 1  # one extend
    assert runner.num_tokens_fed - fed_before == len(new) - min(p, num_fed)
    assert runner.cache_length(cache) == len(prompt_ids) + len(new)

    expected = _from_scratch(runner, prompt_ids + new)
    torch.testing.assert_close(logits, expected, atol=ATOL, rtol=0)


def test_engine_extends_match_from_scratch(loaded_model, monkeypatch):
    """Run a constrained generation with jump-forward; check every forward
    pass of the engine against the request's true ids, every extend's logits
    against a from-scratch forward, and count the tokens each extend feeds.
    All in float32: a bfloat16 prefill's rounding depends on how many prompt
    rows share its GEMM (see ``model_runner``), which this test is not about."""
    llm = LLM(loaded=loaded_model, num_threads=1, prefill_dtype="float32")
    runner = llm.model_runner
    events: list[tuple] = []  # ("jump", expected_fed) / ("forward", fed, ids, logits)
    current: list[Request] = []

    real_replace = Request.replace_output

    def replace_output(self, new_ids, common_prefix):
        current[:] = [self]
        cached_before = self.num_output_cached
        prompt_uncached = len(self.prompt_ids) - min(self.num_cached, len(self.prompt_ids))
        keep = real_replace(self, new_ids, common_prefix)
        # Fed by the next forward: the prompt if not cached yet, then the new
        # ids past the common prefix (or past what was cached, if less).
        events.append(("jump", prompt_uncached + len(new_ids) - min(common_prefix, cached_before)))
        return keep

    real_forward = runner.batch_forward

    def batch_forward(caches, token_lists, num_prompt=None, num_logits=None):
        assert len(caches) == 1  # one request: a batch of one
        req = llm.scheduler.running[0]
        full = req.prompt_ids + req.output_ids
        before = runner.cache_length(caches[0])
        # What the engine feeds is exactly the request's uncached tail.
        assert list(token_lists[0]) == full[before:]
        logits = real_forward(caches, token_lists, num_prompt, num_logits)
        events.append(("forward", len(token_lists[0]), full, logits[0].clone()))
        return logits

    monkeypatch.setattr(Request, "replace_output", replace_output)
    monkeypatch.setattr(runner, "batch_forward", batch_forward)
    out = llm.generate(PERSON_PROMPT, SamplingParams(json_schema=PERSON_SCHEMA, max_tokens=60))[0]
    monkeypatch.undo()

    assert out.error is None, out.error
    jumps = [i for i, e in enumerate(events) if e[0] == "jump"]
    assert len(jumps) >= 3 and out.jump_forward_tokens > 0
    checked = 0
    for i in jumps:
        if i + 1 < len(events) and events[i + 1][0] == "forward":
            _, fed, full, logits = events[i + 1]
            assert fed == events[i][1]
            torch.testing.assert_close(logits, _from_scratch(runner, full), atol=ATOL, rtol=0)
            checked += 1
    assert checked >= 2
    # A jump-forward extend feeds more than one token in one pass.
    decode_or_extend = [e[1] for e in events if e[0] == "forward"][1:]  # after the prefill
    assert max(decode_or_extend) > 1
