"""The field matrix's probes of ``POST /v1/responses`` (used by
``test_field_matrix.py``): the SDK's ``ResponseCreateParams`` fields, how to
send a request through ``client.responses.create`` and each field's probe
``field -> (body fields, check(c, send, response))``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import response_create_params

RESPONSES = "/v1/responses"
SDK_RESPONSES = set(response_create_params.ResponseCreateParamsBase.__annotations__) | {"stream"}
NESTED = {"text.format", "text.verbosity"}  # sub-fields with rows of their own
ONE_KEY = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["a"],
           "additionalProperties": False}
LOGPROBS = ["message.output_text.logprobs"]


def nest(body: dict) -> dict:
    """``{"text.verbosity": v}`` -> ``{"text": {"verbosity": v}}`` (the rows of nested fields)."""
    out: dict = {}
    for key, value in body.items():
        head, _, tail = key.partition(".")
        if tail:
            out.setdefault(head, {})[tail] = value
        else:
            out[key] = value
    return out


def send_responses(client, **body) -> Any:
    """One ``client.responses.create`` call (SDK fields as arguments, others in ``extra_body``)."""
    body = nest({"model": "default", "input": "Count from 1 to 9.", "max_output_tokens": 4, "temperature": 0,
                 **body})
    sdk = {k: v for k, v in body.items() if k in SDK_RESPONSES}
    extra = {k: v for k, v in body.items() if k not in SDK_RESPONSES}
    return client.responses.create(**sdk, extra_body=extra or None)


def _text(r) -> str:
    return r.output_text


def _check_temperature(c, send, r):
    greedy = _text(send(temperature=0))
    assert any(_text(x) != greedy for x in (r, send(), send())), "temperature 2 sampled the greedy text thrice"


def _check_json(schema):
    def check(c, send, r):
        import jsonschema

        jsonschema.validate(json.loads(_text(r)), schema)
    return check


def _check_stream(c, send, r):
    events = list(r)
    assert events[0].type == "response.created" and events[-1].type in ("response.completed", "response.incomplete")
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == _text(send(stream=False)) == events[-1].response.output_text


def _check_logprobs(num_top):
    def check(c, send, r):
        entries = r.output[0].content[0].logprobs
        assert len(entries) == r.usage.output_tokens and all(len(e.top_logprobs) == num_top for e in entries)
    return check


def _check_differs(**other):
    def check(c, send, r):
        assert r.usage.input_tokens != send(**other).usage.input_tokens
    return check


PROBES: dict[str, tuple[dict, Any]] = {
    "model": ({"model": "gpt-9"}, "404"),
    "input": ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "Say "},
                                                      {"type": "input_text", "text": "hi"}]}]},
              _check_differs(input="Count from 1 to 9.")),
    "instructions": ({"instructions": "Be brief."}, _check_differs(instructions=None)),
    "max_output_tokens": ({"max_output_tokens": 2}, lambda c, send, r: r.usage.output_tokens == 2
                          or pytest.fail("not 2 tokens")),
    "temperature": ({"temperature": 2.0}, _check_temperature),
    "top_p": ({"top_p": 1e-9, "temperature": 2.0},
              lambda c, send, r: _text(r) == _text(send(top_p=1.0, temperature=0)) or pytest.fail("top_p")),
    "stream": ({"stream": True}, _check_stream),
    "text": ({"text": {"format": {"type": "json_object"}}, "max_output_tokens": 6},
             lambda c, send, r: _text(r).startswith("{") or pytest.fail(_text(r))),
    "text.format": ({"text.format": {"type": "json_schema", "name": "a", "schema": ONE_KEY},
                     "max_output_tokens": 20}, _check_json(ONE_KEY)),
    "include": ({"include": LOGPROBS}, _check_logprobs(0)),
    "top_logprobs": ({"include": LOGPROBS, "top_logprobs": 3}, _check_logprobs(3)),
    "metadata": ({"metadata": {"k": "v"}}, lambda c, send, r: r.metadata == {"k": "v"} or pytest.fail("echo")),
    "safety_identifier": ({"safety_identifier": "abc"}, None),
    "prompt_cache_key": ({"prompt_cache_key": "key"}, None),
    "user": ({"user": "someone"}, None),
}
PROBES.update({field: ({field: value}, None) for field, value in {
    "text.verbosity": "low", "stream_options": {"include_obfuscation": True}, "background": True, "store": True,
    "parallel_tool_calls": False, "tools": [{"type": "function", "name": "f", "parameters": {}}],
    "tool_choice": "auto", "truncation": "auto", "service_tier": "flex", "prompt_cache_retention": "24h",
    "prompt_cache_options": {"mode": "explicit"}, "context_management": [{"type": "compaction"}],
    "reasoning": {"effort": "low"}, "conversation": "conv_1", "previous_response_id": "resp_1",
    "prompt": {"id": "pmpt_1"}, "max_tool_calls": 3, "background_options": {"completion_window": "2h"},
    "moderation": {"model": "omni-moderation-latest"}, "access_programs": {"cyber": "standard"},
    "image": {"context_compression": "enabled"}}.items()})
