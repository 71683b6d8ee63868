"""Continuous batching: one forward pass over several sequences gives each
the logits it gets alone (and the ones transformers gives), requests join and
leave between steps, a compiling grammar does not stall the others, limits
hold."""

from __future__ import annotations

import threading

import pytest
import torch

from leapgen.engine import SamplingParams
from leapgen.engine.model_runner import ModelRunner
from leapgen.engine.scheduler import Scheduler

pytestmark = pytest.mark.model

ATOL = 1e-4


def test_batched_logits_equal_per_request_logits(loaded_model):
    tok, model = loaded_model.tokenizer, loaded_model.model
    runner = ModelRunner(model)
    seqs = [tok.encode(t) for t in ("Hello there, how are you?", "The capital of France is", "1, 2, 3, 4")]
    # Mixed shapes in one pass: a prefill, an extend of 3 and a decode of 1.
    caches = [runner.new_cache() for _ in seqs]
    runner.forward(caches[1], seqs[1][:-3])
    runner.forward(caches[2], seqs[2][:-1])
    batch = runner.batch_forward(caches, [seqs[0], seqs[1][-3:], seqs[2][-1:]])  # (3, V)
    assert runner.last_num_tokens == len(seqs[0]) + 3 + 1
    for row, ids in zip(batch, seqs):
        alone = runner.forward(runner.new_cache(), ids)
        with torch.no_grad():
            reference = model(torch.tensor([ids])).logits[0, -1].float()
        torch.testing.assert_close(row, alone, atol=ATOL, rtol=0)
        torch.testing.assert_close(row, reference, atol=ATOL, rtol=0)


def test_batched_generation_equals_one_by_one(llm):
    prompts = ["What is the capital of France?", "Say hi.", "Give me a phone number."]
    params = [SamplingParams(max_tokens=12), SamplingParams(max_tokens=5, temperature=1.0, seed=3),
              SamplingParams(regex=r"[0-9]{3}-[0-9]{4}")]
    together = llm.generate(prompts, params)
    alone = [llm.generate(p, sp)[0] for p, sp in zip(prompts, params)]
    assert [o.token_ids for o in together] == [o.token_ids for o in alone]
    assert llm.stats.batched_sequences > llm.stats.forward_passes  # batches of more than one


def test_requests_join_between_steps(llm):
    first = llm.add_request("Count to twenty.", SamplingParams(max_tokens=30))
    for _ in range(3):
        llm.step()
    second = llm.add_request("Say hi.", SamplingParams(max_tokens=2))
    while not second.is_finished:
        llm.step()
    assert not first.is_finished  # the late one finished first
    while llm.has_unfinished_requests():
        llm.step()
    assert first.finish_reason is not None


def test_a_compiling_grammar_waits_aside(llm, monkeypatch):
    release = threading.Event()
    real_compile = llm.grammar.compile

    def slow_compile(params):
        release.wait(30)
        return real_compile(params)

    monkeypatch.setattr(llm.grammar, "compile", slow_compile)
    slow = llm.add_request("Name?", SamplingParams(regex="[A-Z][a-z]{2,5}", max_tokens=8))
    free = llm.add_request("Say hi.", SamplingParams(max_tokens=4))
    while not free.is_finished:
        llm.step()
    assert not slow.is_finished and slow.stored_logits is not None  # prefilled, waiting
    assert slow.num_forwards == 1
    release.set()
    while llm.has_unfinished_requests():
        llm.step()
    assert slow.error is None and slow.finish_reason is not None


def test_stop_strings_and_abort(llm):
    out = llm.generate("Count: 1, 2, 3,", SamplingParams(max_tokens=20, stop=(" 6",)), chat=False)[0]
    assert out.finish_reason == "stop" and " 6" not in out.text and out.text.endswith("5,")
    req = llm.add_request("Tell me a story.", SamplingParams(max_tokens=50))
    llm.step()
    assert llm.num_kv_tokens > 0
    llm.abort_request(req)
    assert req.finish_reason == "abort" and llm.num_kv_tokens == 0 and not llm.has_unfinished_requests()


def test_scheduler_limits():
    from leapgen.engine.request import Request

    def req(n_prompt, max_tokens):
        return Request(request_id=0, prompt="", prompt_ids=[1] * n_prompt,
                       params=SamplingParams(max_tokens=max_tokens), stop_token_ids=frozenset(), generator=None)

    sched = Scheduler(max_running=2, kv_token_budget=100)
    a, b, c, big = req(10, 30), req(10, 30), req(10, 30), req(200, 10)
    for r in (a, b, c):
        sched.add(r)
    assert sched.admit() == [a, b]  # the running limit
    sched.remove([a, b])
    sched.add(big)
    assert sched.admit() == [c]  # big does not fit next to c
    sched.remove([c])
    assert sched.admit() == [big]  # alone, even over the budget
    with pytest.raises(ValueError):
        Scheduler(max_running=0)


def test_the_mask_fill_overlaps_the_forward(llm):
    """The step trace: the bitmask fill of a constrained batch starts on the
    mask worker before that step's forward pass ends (it is not serialized
    after it)."""
    llm.step_trace.clear()
    params = [SamplingParams(regex=r"[a-z]{4,12}", max_tokens=6),
              SamplingParams(json_schema={"type": "object", "properties": {"a": {"type": "integer"}}},
                             max_tokens=8),
              SamplingParams(max_tokens=6)]
    llm.generate(["Say a word.", "Give JSON.", "Say hi."], params)
    masked = [t for t in llm.step_trace if t["num_masked"]]
    assert masked, list(llm.step_trace)
    for t in masked:
        assert t["forward_start"] <= t["forward_end"]
        assert t["fill_start"] <= t["fill_end"]
        assert t["fill_start"] < t["forward_end"], t  # the fill ran during (or before) the forward
    # Over the run, the fills and the forwards genuinely overlap in time.
    assert any(t["fill_start"] < t["forward_end"] and t["fill_end"] > t["forward_start"] for t in masked)
