"""``POST /v1/responses`` through the real ``openai`` SDK: ``responses.create``
(plain, JSON Schema, streamed), ``responses.parse(text_format=...)`` and the
``responses.stream`` helper; outputs checked with ``jsonschema`` and pydantic
(the SDK's own parsing). The field-by-field policy is in
``test_field_matrix.py``."""

from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

pytestmark = pytest.mark.model

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
STREAM_EVENTS = ["response.created", "response.in_progress", "response.output_item.added",
                 "response.content_part.added"]
STREAM_END = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]


class Person(BaseModel):
    name: str = Field(max_length=12)
    age: int = Field(ge=0, le=120)


def ask(client, **kwargs):
    return client.responses.create(**{"model": "default", "temperature": 0, "max_output_tokens": 40, **kwargs})


def test_plain_create(client):
    r = ask(client, input="Say hello in one short sentence.", max_output_tokens=12)
    assert r.object == "response" and r.id.startswith("resp_") and r.status in ("completed", "incomplete")
    (item,) = r.output
    assert item.type == "message" and item.role == "assistant" and item.id.startswith("msg_")
    (part,) = item.content
    assert part.type == "output_text" and part.annotations == [] and part.text == r.output_text != ""
    assert 0 < r.usage.output_tokens <= 12 and r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.model_extra["jump_forward_tokens"] == 0


def test_json_schema_output_is_valid_and_jump_forwarded(client):
    r = ask(client, input="Ada Lovelace was 36. Give her as JSON.",
            text={"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}})
    assert r.status == "completed"
    jsonschema.validate(json.loads(r.output_text), PERSON)
    assert r.text.format.type == "json_schema" and r.text.format.schema_ == PERSON
    assert 0 < r.usage.model_extra["jump_forward_tokens"] < r.usage.output_tokens


def test_json_object(client):
    r = ask(client, input="A JSON object with a key a.", text={"format": {"type": "json_object"}},
            max_output_tokens=20)
    assert r.output_text.startswith("{")


def test_input_items_and_instructions_render_as_the_chat_messages_do(client):
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Name a colour."}]},
             {"role": "assistant", "content": "Blue."},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Another"},
                                                              {"type": "input_text", "text": " one?"}]}]
    messages = [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
                {"role": "user", "content": "Another one?"}]
    for instructions in (None, "Answer in French."):
        r = ask(client, input=items, instructions=instructions, max_output_tokens=6)
        head = [{"role": "system", "content": instructions}] if instructions else []
        chat = client.chat.completions.create(model="default", messages=head + messages, temperature=0, max_tokens=6)
        assert r.instructions == instructions
        assert r.usage.input_tokens == chat.usage.prompt_tokens and r.output_text == chat.choices[0].message.content


def test_max_output_tokens_makes_it_incomplete(client):
    r = ask(client, input="Count from one to twenty.", max_output_tokens=3)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.output[0].status == "incomplete" and r.usage.output_tokens == 3


def test_logprobs_with_include(client):
    r = ask(client, input="Say hi.", max_output_tokens=5, include=["message.output_text.logprobs"], top_logprobs=2)
    entries = r.output[0].content[0].logprobs
    assert len(entries) == r.usage.output_tokens and all(len(e.top_logprobs) == 2 for e in entries)
    assert "".join(e.token for e in entries) == r.output_text


def test_streaming_events_as_the_sdk_expects(client):
    kwargs = dict(input="Ada Lovelace was 36. Give her as JSON.",
                  text={"format": {"type": "json_schema", "name": "person", "schema": PERSON}})
    events = list(ask(client, stream=True, **kwargs))
    kinds = [e.type for e in events]
    assert kinds[:4] == STREAM_EVENTS and kinds[-4:] == STREAM_END + ["response.completed"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = events[-1].response
    assert text == events[-4].text == done.output_text == ask(client, **kwargs).output_text
    jsonschema.validate(json.loads(text), PERSON)
    assert events[0].response.id == done.id and events[2].item.id == done.output[0].id
    assert done.usage.model_extra["jump_forward_tokens"] > 0


def test_a_stream_cut_by_max_output_tokens_ends_incomplete(client):
    events = list(ask(client, input="Count from one to twenty.", max_output_tokens=3, stream=True))
    assert events[-1].type == "response.incomplete" and events[-1].response.status == "incomplete"


def test_parse_with_a_pydantic_model(client):
    r = client.responses.parse(model="default", input="Ada Lovelace was 36. Give her as JSON.", text_format=Person,
                               temperature=0, max_output_tokens=60)
    assert isinstance(r.output_parsed, Person)
    jsonschema.validate(json.loads(r.output_text), Person.model_json_schema())


def test_the_stream_helper_parses_too(client):
    with client.responses.stream(model="default", input="Grace Hopper was 85. Give her as JSON.",
                                 text_format=Person, temperature=0, max_output_tokens=60) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert isinstance(final.output_parsed, Person) and "".join(deltas) == final.output_text


@pytest.mark.parametrize("body, param", [
    ({"tools": [{"type": "function", "name": "f", "parameters": {}}]}, "tools"),
    ({"input": [{"type": "function_call", "call_id": "1", "name": "f", "arguments": "{}"}]}, "input[0]"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
    ({"input": [{"role": "user", "content": "hi", "colour": 1}]}, "input[0].colour"),
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "nope"}}}}, "text.format.schema"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "nope"}}}, "stream": True},
     "text.format.schema"),
    ({"max_output_tokens": "8"}, "max_output_tokens"),
    ({"include": ["file_search_call.results"]}, "include[0]"),
])
def test_refusals_name_the_field(server, body, param):
    r = httpx.post(server[0] + "/v1/responses", json={"input": "hi", **body}, timeout=60)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.json()


def test_an_sdk_error_is_raised_for_a_refusal(client):
    with pytest.raises(openai.BadRequestError, match="not supported: tools"):
        ask(client, input="hi", tools=[{"type": "function", "name": "f", "parameters": {}}])
