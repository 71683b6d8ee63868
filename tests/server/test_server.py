"""The HTTP server through the real ``openai`` client: grammars, streaming,
errors, concurrency, cancellation, metrics."""

from __future__ import annotations

import json
import re
import threading
import time

import httpx
import openai
import pytest

pytestmark = pytest.mark.model

PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
PROMPT = "Marie is 34. Describe her as JSON."


def _json_schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}


def test_models_and_health(server, client):
    assert [m.id for m in client.models.list().data] == ["default"]
    assert httpx.get(server[0] + "/health").json()["status"] == "ok"


def test_json_schema_response_validates(client):
    import jsonschema

    r = client.chat.completions.create(model="default", messages=[{"role": "user", "content": PROMPT}],
                                       temperature=0, max_tokens=40, response_format=_json_schema_format(PERSON_SCHEMA))
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON_SCHEMA)
    assert r.choices[0].finish_reason == "stop"
    usage = r.usage.model_dump()
    assert usage["completion_tokens"] > 0 and 0 < usage["jump_forward_tokens"] <= usage["completion_tokens"]


def test_json_object_and_ebnf(client):
    r = client.chat.completions.create(model="default", messages=[{"role": "user", "content": PROMPT}],
                                       temperature=0, max_tokens=30, response_format={"type": "json_object"})
    if r.choices[0].finish_reason == "stop":
        json.loads(r.choices[0].message.content)
    r = client.completions.create(model="default", prompt="The answer is", max_tokens=5, temperature=0,
                                  extra_body={"ebnf": 'root ::= "yes" | "no"'})
    assert r.choices[0].text in ("yes", "no")


def test_stream_equals_non_stream(client):
    kwargs = dict(model="default", messages=[{"role": "user", "content": PROMPT}], temperature=0, seed=7,
                  max_tokens=30, response_format=_json_schema_format(PERSON_SCHEMA))
    full = client.chat.completions.create(**kwargs).choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_bad_schema_is_a_400_naming_the_pointer(client):
    bad = {"type": "object", "properties": {"age": {"type": "integer", "minimum": "zero"}}}
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "hi"}],
                                       response_format=_json_schema_format(bad), max_tokens=5)
    body = err.value.body
    assert "/properties/age" in body["message"], body
    assert body["param"] == "response_format.json_schema.schema"
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="default", prompt="x", max_tokens=5, extra_body={"regex": "(ab"})
    assert "offset" in err.value.body["message"]
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="default", prompt="x", max_tokens=5,
                                  extra_body={"regex": "a", "ebnf": 'root ::= "a"'})


def test_concurrent_mixed_requests(client):
    """12 concurrent requests on this 2-core machine: json_schema, regex,
    unconstrained, and one bad schema."""
    results: dict[int, object] = {}

    def run(i: int) -> None:
        kind = i % 4
        try:
            if kind == 0:
                r = client.chat.completions.create(model="default", messages=[{"role": "user", "content": PROMPT}],
                                                   max_tokens=40, temperature=0.7, seed=i,
                                                   response_format=_json_schema_format(PERSON_SCHEMA))
                results[i] = ("json", r.choices[0].message.content, r.choices[0].finish_reason)
            elif kind == 1:
                r = client.completions.create(model="default", prompt="Phone:", max_tokens=12, temperature=0.7,
                                              seed=i, extra_body={"regex": r"[0-9]{3}-[0-9]{4}"})
                results[i] = ("regex", r.choices[0].text, r.choices[0].finish_reason)
            elif kind == 2:
                r = client.completions.create(model="default", prompt="Once upon a time", max_tokens=8,
                                              temperature=0.7, seed=i)
                results[i] = ("free", r.choices[0].text, r.choices[0].finish_reason)
            elif i == 3:
                client.completions.create(model="default", prompt="x", max_tokens=5,
                                          extra_body={"json_schema": {"type": "objec"}})
            else:
                r = client.completions.create(model="default", prompt="Yes or no?", max_tokens=4,
                                              extra_body={"regex": "yes|no"})
                results[i] = ("yesno", r.choices[0].text, r.choices[0].finish_reason)
        except openai.BadRequestError as exc:
            results[i] = ("400", exc.body["message"], None)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 12
    for i, (kind, text, finish) in sorted(results.items()):
        if kind == "json" and finish == "stop":
            assert set(json.loads(text)) == {"name", "age"}
        elif kind == "regex":
            assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", text), text
        elif kind == "free":
            assert text
        elif kind == "yesno":
            assert text in ("yes", "no")
        else:
            assert kind == "400" and i == 3


def test_late_request_starts_before_the_first_finishes(client):
    order: list[str] = []

    def long() -> None:
        client.completions.create(model="default", prompt="Count: 1, 2, 3,", max_tokens=60, temperature=0,
                                  extra_body={"regex": "( [0-9]+,){60}"})
        order.append("long done")

    t = threading.Thread(target=long)
    t.start()
    time.sleep(1.0)
    stream = client.completions.create(model="default", prompt="Hello", max_tokens=3, temperature=0, stream=True)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].text:
            order.append("short started")
            break
    stream.close()
    t.join(120)
    assert order[0] == "short started", order


def test_cancellation_frees_the_kv(server):
    base, engine = server
    body = {"model": "default", "prompt": "Count: 1, 2, 3,", "max_tokens": 200, "temperature": 0, "stream": True,
            "regex": "( [0-9]+,){200}"}
    with httpx.stream("POST", base + "/v1/completions", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data:") and '"text": "' in line:
                break
        assert engine.llm.num_kv_tokens > 0
    deadline = time.time() + 20
    while engine.llm.num_kv_tokens and time.time() < deadline:
        time.sleep(0.1)
    assert engine.llm.num_kv_tokens == 0
    assert engine.llm.stats.requests_finished["abort"] >= 1


def test_metrics_move(server, client):
    def scrape() -> dict:
        text = httpx.get(server[0] + "/metrics").text
        return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if not line.startswith("#")}

    before = scrape()
    client.completions.create(model="default", prompt="x", max_tokens=6, temperature=0,
                              extra_body={"regex": "id = [0-9]{2}"})
    after = scrape()
    for name in ("leapgen_completion_tokens_total", "leapgen_jump_forward_tokens_total",
                 "leapgen_mask_steps_total", "leapgen_forward_passes_total"):
        assert after[name] > before[name], name
    assert 0.0 <= after["leapgen_mask_cache_hit_rate"] <= 1.0
