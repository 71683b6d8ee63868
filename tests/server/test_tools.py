"""Tool calling through the real ``openai`` client against the server on the
embedded SmolLM2 (whose chat template does not render tools: the server adds
the Hermes system message): ``tool_choice`` required / named / none, parallel
calls, sampled calls whose arguments all validate (``jsonschema``), the
stream rebuilt by ``client.chat.completions.stream``, ``parse`` with
``openai.pydantic_function_tool``, a conversation with a tool call and its
result, 400s that name the field, and structural tags served as
constraints."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pydantic
import pytest

pytestmark = pytest.mark.model

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a timezone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 24}},
                   "required": ["timezone"], "additionalProperties": False}}}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris and in Tokyo right now?"}]


def _validate_calls(message) -> None:
    import jsonschema

    assert message.tool_calls, message
    for call in message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_required_calls_a_tool_and_finishes_with_tool_calls(client):
    r = client.chat.completions.create(model="default", messages=ASK, tools=TOOLS, tool_choice="required",
                                       temperature=0, max_tokens=200)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None
    _validate_calls(choice.message)
    assert r.usage.jump_forward_tokens > 0  # the wrapper, the names once decided, the keys


def test_a_named_function_is_the_only_one_called(client):
    r = client.chat.completions.create(model="default", messages=ASK, tools=TOOLS, temperature=0.8, seed=3,
                                       tool_choice={"type": "function", "function": {"name": "get_time"}},
                                       max_tokens=120)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [c.function.name for c in choice.message.tool_calls] == ["get_time"]
    _validate_calls(choice.message)


def test_none_answers_in_text(client):
    r = client.chat.completions.create(model="default", messages=ASK, tools=TOOLS, tool_choice="none",
                                       temperature=0, max_tokens=12)
    choice = r.choices[0]
    assert choice.message.tool_calls is None and choice.message.content
    assert choice.finish_reason in ("stop", "length")


def test_parallel_calls_and_parallel_tool_calls_false(client):
    # greedy, the embedded model calls get_weather for Paris, then again (parallel calls allowed)
    many = client.chat.completions.create(model="default", messages=ASK, tools=TOOLS, tool_choice="required",
                                          temperature=0, max_tokens=200)
    assert len(many.choices[0].message.tool_calls) >= 2, many.choices[0].message
    one = client.chat.completions.create(model="default", messages=ASK, tools=TOOLS, tool_choice="required",
                                         parallel_tool_calls=False, temperature=0, max_tokens=200)
    assert len(one.choices[0].message.tool_calls) == 1 and one.choices[0].finish_reason == "tool_calls"
    assert one.choices[0].message.tool_calls[0].function.arguments == \
        many.choices[0].message.tool_calls[0].function.arguments


def _sampled_calls(client, count: int) -> list:
    def run(i: int):
        choice = [{"type": "function", "function": {"name": "get_weather"}}, "required"][i % 2]
        r = client.chat.completions.create(model="default", messages=ASK, tools=TOOLS, tool_choice=choice,
                                           temperature=0.8, seed=100 + i, max_tokens=256)
        return r.choices[0]

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(run, range(count)))


def _check_sampled(choices) -> None:
    import jsonschema

    calls = 0
    for choice in choices:
        assert choice.finish_reason == "tool_calls", choice
        for call in choice.message.tool_calls:
            jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
            calls += 1
    assert calls >= len(choices)


def test_sampled_calls_validate(client):
    _check_sampled(_sampled_calls(client, 8))


@pytest.mark.slow
def test_sixty_four_sampled_calls_validate(client):
    """The acceptance run: 64 requests at temperature 0.8, every call's
    arguments valid against its schema and every finish_reason tool_calls."""
    _check_sampled(_sampled_calls(client, 64))


def test_the_stream_helper_rebuilds_the_calls(client):
    kwargs = dict(model="default", messages=ASK, tools=TOOLS, tool_choice="required", temperature=0, seed=5,
                  max_tokens=200)
    full = client.chat.completions.create(**kwargs).choices[0]
    with client.chat.completions.stream(**kwargs) as stream:
        events = list(stream)
        final = stream.get_final_completion().choices[0]
    assert final.finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in final.message.tool_calls] == \
        [(c.function.name, c.function.arguments) for c in full.message.tool_calls]
    fragments = [e for e in events if e.type == "tool_calls.function.arguments.delta" and e.arguments_delta]
    assert len(fragments) > 3 * len(final.message.tool_calls)  # arguments arrive in pieces
    done = [e for e in events if e.type == "tool_calls.function.arguments.done"]
    assert [e.name for e in done] == [c.function.name for c in final.message.tool_calls]


class Weather(pydantic.BaseModel):
    city: str = pydantic.Field(max_length=20)
    unit: str


def test_parse_with_a_pydantic_function_tool(client):
    r = client.chat.completions.parse(model="default", messages=ASK, temperature=0, max_tokens=120,
                                      tools=[openai.pydantic_function_tool(Weather)], tool_choice="required",
                                      parallel_tool_calls=False)
    call = r.choices[0].message.tool_calls[0]
    assert isinstance(call.function.parsed_arguments, Weather), call
    assert call.function.parsed_arguments.city


def test_a_conversation_with_a_tool_call_and_its_result_gets_an_answer(client):
    first = client.chat.completions.create(model="default", messages=ASK, tools=[WEATHER], tool_choice="required",
                                           parallel_tool_calls=False, temperature=0, max_tokens=120)
    message = first.choices[0].message
    messages = ASK + [message, {"role": "tool", "tool_call_id": message.tool_calls[0].id,
                                "content": json.dumps({"temperature": 21, "sky": "sunny"})}]
    answer = client.chat.completions.create(model="default", messages=messages, tools=[WEATHER], temperature=0,
                                            max_tokens=40)
    choice = answer.choices[0]
    assert choice.message.content and not choice.message.tool_calls, choice
    # the call and its result are in the prompt: it is longer than the first turn's
    assert answer.usage.prompt_tokens > first.usage.prompt_tokens + 10


def test_bad_tools_are_400s_naming_the_field(server):
    def post(**body):
        r = httpx.post(server[0] + "/v1/chat/completions",
                       json={"model": "default", "messages": ASK, "max_tokens": 5, **body}, timeout=60)
        assert r.status_code == 400, r.text
        return r.json()["error"]

    bad = json.loads(json.dumps(TOOLS))
    bad[1]["function"]["parameters"]["properties"]["timezone"]["maxLength"] = "long"
    error = post(tools=bad, tool_choice="required")
    assert error["param"] == "tools[1].function.parameters"
    assert "/properties/timezone/maxLength" in error["message"], error
    error = post(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_stock"}})
    assert error["param"] == "tool_choice.function.name" and "get_stock" in error["message"]
    error = post(tools=TOOLS, tool_choice="required", response_format={"type": "json_object"})
    assert error["param"] == "response_format"
    error = post(tools=[{"type": "function", "function": {"name": "has space"}}])
    assert error["param"] == "tools[0].function.name"
    error = post(messages=[{"role": "tool", "content": "x"}])
    assert error["param"] == "messages[0].tool_call_id"


def test_unparsable_calls_are_content_and_logged(client, caplog):
    # a call cut by max_tokens cannot be parsed: it is returned as text, the request does not fail
    with caplog.at_level("WARNING", logger="leapgen.engine"):
        r = client.chat.completions.create(model="default", messages=ASK, tools=TOOLS, tool_choice="required",
                                           temperature=0, max_tokens=14)
    choice = r.choices[0]
    assert choice.finish_reason == "length" and not choice.message.tool_calls
    assert choice.message.content.startswith('<tool_call>\n{"name": "get_weather"'), choice.message.content
    assert any("tool call" in rec.getMessage() for rec in caplog.records)


TAG = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
    {"type": "const_string", "value": "Answer: "}, {"type": "regex", "pattern": "[0-9]{2}"}]}}
LEGACY = {"type": "structural_tag", "triggers": ["<a>"],
          "structures": [{"begin": "<a>", "schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                                                     "required": ["n"]}, "end": "</a>"}]}


def test_structural_tags_as_constraints(server, client):
    messages = [{"role": "user", "content": "How old is the universe, in billions of years?"}]
    r = client.chat.completions.create(model="default", messages=messages, max_tokens=10, temperature=0,
                                       response_format=TAG)
    assert re.fullmatch(r"Answer: [0-9]{2}", r.choices[0].message.content), r.choices[0].message.content
    r = client.chat.completions.create(model="default", messages=messages, max_tokens=10, temperature=0,
                                       extra_body={"structured_outputs": {"structural_tag": json.dumps(TAG)}})
    assert re.fullmatch(r"Answer: [0-9]{2}", r.choices[0].message.content)
    chunks = list(client.chat.completions.create(model="default", messages=messages, max_tokens=10, temperature=0,
                                                 stream=True, response_format=TAG))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == r.choices[0].message.content
    r = client.chat.completions.create(model="default", messages=messages, max_tokens=30, temperature=0,
                                       response_format=LEGACY)
    found = re.search(r"<a>(.*?)</a>", r.choices[0].message.content or "", re.S)
    assert found is None or isinstance(json.loads(found.group(1))["n"], int)
    g = httpx.post(server[0] + "/generate", json={"text": "The universe is", "sampling_params": {
        "max_new_tokens": 10, "temperature": 0, "structural_tag": json.dumps(TAG)}}, timeout=60).json()
    assert re.fullmatch(r"Answer: [0-9]{2}", g["text"]), g
    bad = httpx.post(server[0] + "/v1/chat/completions", json={"messages": messages, "response_format": {
        "type": "structural_tag", "format": {"type": "regex", "pattern": "(a"}}}, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "response_format"
    assert "/format" in bad.json()["error"]["message"], bad.json()


@pytest.fixture(scope="module")
def reasoning_client():
    """A client of a second server, started with ``--reasoning-parser deepseek_r1``: SmolLM2 never
    closes a think block, so its thinking ends where ``max_reasoning_tokens`` makes the server end it."""
    from tests.server.helpers import running_server

    servers = running_server(reasoning_parser="deepseek_r1")
    base, _ = next(servers)
    yield openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
    next(servers, None)


def test_reasoning_content_apart_from_the_constrained_answer(reasoning_client):
    import jsonschema

    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
              "additionalProperties": False}
    kwargs = dict(model="default", messages=[{"role": "user", "content": "What is 6 times 7?"}], temperature=0,
                  max_tokens=40, response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
                  extra_body={"max_reasoning_tokens": 6})
    message = reasoning_client.chat.completions.create(**kwargs).choices[0].message
    reasoning = message.model_extra["reasoning_content"]
    assert reasoning and "</think>" not in reasoning and "</think>" not in message.content, message
    jsonschema.validate(json.loads(message.content), schema)
    chunks = list(reasoning_client.chat.completions.create(stream=True, **kwargs))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas) == reasoning
    assert "".join(d.content or "" for d in deltas) == message.content
    off = reasoning_client.chat.completions.create(**{**kwargs, "extra_body": {
        "chat_template_kwargs": {"enable_thinking": False}}}).choices[0].message
    assert off.model_extra["reasoning_content"] is None  # the prompt closed the block: the schema from the start
    jsonschema.validate(json.loads(off.content), schema)


def test_n_samples_stream_their_calls_per_choice(client):
    kwargs = dict(model="default", messages=ASK, tools=TOOLS, tool_choice="required", temperature=0.8, seed=11, n=2,
                  max_tokens=160)
    full = client.chat.completions.create(**kwargs)
    calls: dict[int, dict[int, list]] = {0: {}, 1: {}}
    reasons = {}
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                entry = calls[choice.index].setdefault(delta.index, [None, ""])
                if delta.function.name:
                    entry[0] = delta.function.name
                entry[1] += delta.function.arguments or ""
            if choice.finish_reason:
                reasons[choice.index] = choice.finish_reason
    for choice in full.choices:
        want = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls]
        assert [tuple(calls[choice.index][k]) for k in sorted(calls[choice.index])] == want
        assert reasons[choice.index] == choice.finish_reason == "tool_calls"


def test_auto_answers_text_or_calls_and_streams_the_same(client):
    # (whether the 135M model triggers is its choice; tests/engine/test_chat.py feeds the triggers)
    kwargs = dict(model="default", messages=ASK, tools=TOOLS, temperature=0, max_tokens=24)
    choice = client.chat.completions.create(**kwargs).choices[0]
    if choice.message.tool_calls:
        assert choice.finish_reason == "tool_calls"
        _validate_calls(choice.message)
    else:
        assert choice.message.content and choice.finish_reason in ("stop", "length")
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (choice.message.content or "")
