"""``n > 1`` (:mod:`leapgen.engine.parallel_sampling`): each sample has its own
matcher and seed stream (sample ``i`` of seed ``s`` is the request of seed
``s + i``), the prompt is prefilled once, every grammar and streaming work."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from leapgen.engine import SamplingParams

pytestmark = pytest.mark.model

PROMPT = "Write a short product code and a price for a red umbrella."


def _prefilled(llm, fn) -> int:
    before = llm.stats.prefill_tokens
    fn()
    return llm.stats.prefill_tokens - before


def test_sample_i_is_the_request_of_seed_plus_i_and_the_prompt_is_prefilled_once(llm):
    regex = r"[A-Z]{2}-[0-9]{3} costs \$[0-9]{1,3}\.[0-9]{2}"
    params = SamplingParams(regex=regex, temperature=1.0, seed=40, max_tokens=24, n=3)
    llm.prefix_cache.clear()
    grouped: list = []
    shared = _prefilled(llm, lambda: grouped.extend(llm.generate(PROMPT, params)))
    assert [o.index for o in grouped] == [0, 1, 2]
    singles = []
    llm.prefix_cache.clear()
    alone = _prefilled(llm, lambda: singles.extend(
        llm.generate([PROMPT] * 3, [SamplingParams(regex=regex, temperature=1.0, seed=40 + i, max_tokens=24)
                                    for i in range(3)])))
    assert [o.text for o in grouped] == [o.text for o in singles]
    assert len({o.text for o in grouped}) > 1  # three seeds, not one stream
    prompt_tokens = grouped[0].prompt_tokens
    assert shared <= prompt_tokens + 2 < alone  # once (+ the last prompt token of a follower at most)
    assert [o.cached_prompt_tokens >= prompt_tokens - 1 for o in grouped] == [False, True, True]
    for o in grouped:
        assert o.finish_reason in ("stop", "grammar") and re.fullmatch(regex, o.text), o.text


@pytest.mark.parametrize("grammar", [
    {"json_schema": {"type": "object", "properties": {"code": {"type": "string", "maxLength": 6},
                                                       "price": {"type": "number"}},
                     "required": ["code", "price"], "additionalProperties": False}},
    {"choice": ("small", "medium", "large")},
    {"ebnf": 'root ::= "size: " ("S" | "M" | "L")'},
    {"json_object": True},
], ids=["json_schema", "choice", "ebnf", "json_object"])
def test_every_grammar_with_n_samples(llm, grammar):
    outs = llm.generate(PROMPT, SamplingParams(temperature=0.9, seed=7, max_tokens=40, n=3, logprobs=0, **grammar))
    assert len(outs) == 3
    for o in outs:
        assert [e.token_id for e in o.logprobs] == list(o.token_ids)
        if o.finish_reason == "length":
            continue
        if "json_schema" in grammar:
            doc = json.loads(o.text)
            assert set(doc) == {"code", "price"} and len(doc["code"]) <= 6
        elif "choice" in grammar:
            assert o.text in grammar["choice"]
        elif "ebnf" in grammar:
            assert re.fullmatch(r"size: [SML]", o.text)
        else:
            assert isinstance(json.loads(o.text), dict)


def test_stream_events_name_their_sample_and_add_up(llm):
    from leapgen.engine.async_llm import AsyncLLM

    engine = AsyncLLM(llm)
    engine.start()

    async def run():
        stream = engine.submit(PROMPT, SamplingParams(max_tokens=10, temperature=1.0, seed=3, n=2), chat=True)
        texts, finals = ["", ""], [None, None]
        while None in finals:
            event = await stream.get()
            texts[event.index] += event.delta
            if event.output is not None:
                finals[event.index] = event.output
        return texts, finals

    try:
        texts, finals = asyncio.run(run())
    finally:
        engine.stop()
    assert [o.index for o in finals] == [0, 1]
    assert texts == [o.text for o in finals]


def test_n_must_be_positive_and_add_request_takes_one_sample(llm):
    with pytest.raises(ValueError, match="n must be >= 1"):
        SamplingParams(n=0)
    with pytest.raises(ValueError, match="add_requests"):
        llm.add_request("hi", SamplingParams(n=2))
