"""Structural tags in the engine with the embedded model: ``SamplingParams(structural_tag=...)`` in
both forms, tool calls whose arguments follow their schema, reasoning then an answer, jump-forward
inside tags, the tag's content streamed as text, a bad tag failing its request alone."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from leapgen.engine import FinishReason, SamplingParams

pytestmark = pytest.mark.model

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
           "required": ["city", "days"]}
BEGIN = '<tool_call>\n{"name": "get_weather", "arguments": '
ONE_CALL = {"type": "structural_tag", "format": {
    "type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True, "stop_after_first": True,
    "tags": [{"begin": BEGIN, "content": {"type": "json_schema", "json_schema": WEATHER}, "end": "}\n</tool_call>"}]}}
LEGACY = {"type": "structural_tag", "triggers": ["<tool_call>"],
          "structures": [{"begin": BEGIN, "schema": WEATHER, "end": "}\n</tool_call>"}]}
PROMPT = "What is the weather in Paris for the next 3 days? Call the get_weather tool."
CALL_RE = re.compile(r'<tool_call>\n\{"name": "get_weather", "arguments": (\{.*\})\}\n</tool_call>', re.S)


def test_a_forced_tool_call_follows_its_schema_with_jump_forward(llm):
    import jsonschema

    out, legacy = llm.generate([PROMPT] * 2, [SamplingParams(structural_tag=ONE_CALL, max_tokens=60),
                                              SamplingParams(structural_tag=json.dumps(LEGACY), max_tokens=120)])
    assert out.error is None and out.finish_reason == FinishReason.GRAMMAR, out
    call = CALL_RE.fullmatch(out.text)
    assert call, out.text
    jsonschema.validate(json.loads(call.group(1)), WEATHER)
    assert out.text.startswith(BEGIN + '{"city": "')  # the begin and the first key: forced, not sampled
    assert out.jump_forward_tokens >= len(llm.tokenizer.encode(BEGIN, add_special_tokens=False))
    assert llm.tokenizer.decode(out.token_ids) == out.text
    # the legacy form allows free text before the call (and after it, until the model stops)
    assert legacy.error is None and legacy.finish_reason in (FinishReason.STOP, FinishReason.LENGTH), legacy
    found = CALL_RE.search(legacy.text)
    assert found is None or json.loads(found.group(1))


def test_reasoning_then_an_answer(llm):
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "max_chars": 40}, "end": "</think>"},
        {"type": "const_string", "value": "\nAnswer: "}, {"type": "regex", "pattern": "[0-9]{1,3}"}]}}
    out = llm.generate("What is 12 + 30?", SamplingParams(structural_tag=tag, max_tokens=60))[0]
    assert out.error is None and out.finish_reason == FinishReason.GRAMMAR, out
    assert re.fullmatch(r"<think>[\s\S]{0,40}</think>\nAnswer: [0-9]{1,3}", out.text), out.text


def test_the_tags_content_streams_as_text(llm):
    from leapgen.engine.async_llm import AsyncLLM

    async def run():
        engine = AsyncLLM(llm)
        engine.start()
        try:
            stream = engine.submit(PROMPT, SamplingParams(structural_tag=ONE_CALL, max_tokens=60))
            chunks = []
            while True:
                event = await stream.get()
                if event.delta:
                    chunks.append(event.delta)
                if event.output is not None:
                    return chunks, event.output
        finally:
            engine.stop()

    chunks, final = asyncio.run(run())
    assert final is not None and final.error is None
    assert "".join(chunks) == final.text and len(chunks) > 2
    assert CALL_RE.fullmatch(final.text)


def test_a_bad_structural_tag_fails_its_request_alone(llm):
    bad_format = {"type": "structural_tag", "format": {"type": "any_text", "excludes": "</a>"}}
    bad_schema = {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"type": "nope"}}}
    outs = llm.generate(["Hi.", "Hi.", "What is the capital of France?"],
                        [SamplingParams(structural_tag=bad_format), SamplingParams(structural_tag=bad_schema),
                         SamplingParams(max_tokens=12)])
    for out, where in zip(outs[:2], ("/format/excludes", "/format/json_schema/type")):
        assert out.finish_reason == FinishReason.ERROR and out.error_type == "StructuralTagError", out
        assert where in out.error
    assert outs[2].error is None and "Paris" in outs[2].text


def test_sampling_params_validate_the_tag_field():
    with pytest.raises(ValueError, match="structural_tag must be"):
        SamplingParams(structural_tag=3)
    with pytest.raises(ValueError, match="at most one grammar"):
        SamplingParams(structural_tag=ONE_CALL, regex="a")
    with pytest.raises(ValueError, match="json_indent"):
        SamplingParams(structural_tag=ONE_CALL, json_indent=2)
    assert SamplingParams(structural_tag=ONE_CALL).constrained
