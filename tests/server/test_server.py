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


def _grammar_accepts(engine, params, text: str, finished: bool) -> bool:
    """Whether the server engine's compiled grammar of ``params`` accepts
    ``text`` whole (``finished``) or as a prefix (an output cut by max_tokens)."""
    import leapgen

    compiled, _ = engine.llm.grammar.compile(params)
    matcher = leapgen.GrammarMatcher(compiled)
    return matcher.accept_string(text) and (matcher.is_completed() or not finished)


def test_concurrent_mixed_requests(server, client):
    """32 concurrent requests on this 2-core machine (16 run at a time):
    json_schema, regex, unconstrained, and one bad schema. Every constrained
    output is in its grammar (as a prefix when max_tokens cut it)."""
    import jsonschema

    from leapgen.engine import SamplingParams

    n = 32
    results: dict[int, object] = {}
    regex = r"[0-9]{3}-[0-9]{4}"

    def run(i: int) -> None:
        kind = i % 4
        try:
            if kind == 0:
                r = client.chat.completions.create(model="default", messages=[{"role": "user", "content": PROMPT}],
                                                   max_tokens=8 + i % 9, temperature=0.7, seed=i,
                                                   response_format=_json_schema_format(PERSON_SCHEMA))
                results[i] = ("json", r.choices[0].message.content, r.choices[0].finish_reason)
            elif kind == 1:
                r = client.completions.create(model="default", prompt="Phone:", max_tokens=8 + i % 9,
                                              temperature=0.7, seed=i, extra_body={"regex": regex})
                results[i] = ("regex", r.choices[0].text, r.choices[0].finish_reason)
            elif kind == 2:
                r = client.completions.create(model="default", prompt="Once upon a time", max_tokens=8,
                                              temperature=0.7, seed=i)
                results[i] = ("free", r.choices[0].text, r.choices[0].finish_reason)
            elif i == 3:
                client.completions.create(model="default", prompt="x", max_tokens=8,
                                          extra_body={"json_schema": {"type": "objec"}})
            else:
                r = client.completions.create(model="default", prompt="Yes or no?", max_tokens=8, seed=i,
                                              extra_body={"regex": "yes|no"})
                results[i] = ("yesno", r.choices[0].text, r.choices[0].finish_reason)
        except openai.BadRequestError as exc:
            results[i] = ("400", exc.body["message"], None)
        except Exception as exc:  # noqa: BLE001 - reported by the asserts below
            results[i] = ("exception", repr(exc), None)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == n
    engine = server[1]
    json_params = SamplingParams(json_schema=PERSON_SCHEMA)
    for i, (kind, text, finish) in sorted(results.items()):
        if kind == "json":
            assert finish in ("stop", "length"), (i, finish)
            if finish == "stop":
                doc = json.loads(text)
                jsonschema.validate(doc, PERSON_SCHEMA)
            assert _grammar_accepts(engine, json_params, text, finish == "stop"), (i, text)
        elif kind == "regex":
            assert finish in ("stop", "length"), (i, finish)
            if finish == "stop":
                assert re.fullmatch(regex, text), text
            assert _grammar_accepts(engine, SamplingParams(regex=regex), text, finish == "stop"), (i, text)
        elif kind == "free":
            assert text, i
        elif kind == "yesno":
            assert text in ("yes", "no") and finish == "stop", (i, text, finish)
        else:
            assert kind == "400" and i == 3, (i, kind, text)


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
        # Forced text (the leading " ") may stream before the prefill; a digit was sampled, so the KV exists.
        for line in r.iter_lines():
            if line.startswith("data:") and any(ch.isdigit() for ch in line.partition('"text": "')[2][:8]):
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
    # A repeated long prompt reuses the first one's prompt KV (the prefix cache).
    long_prompt = "The quick brown fox jumps over the lazy dog. " * 4
    for _ in range(2):
        client.completions.create(model="default", prompt=long_prompt, max_tokens=1, temperature=0)
    last = scrape()
    assert last["leapgen_prefix_cache_hit_tokens_total"] >= after["leapgen_prefix_cache_hit_tokens_total"] + 16
    assert last["leapgen_prefix_cache_hits_total"] > after["leapgen_prefix_cache_hits_total"]
    assert last["leapgen_prefix_cache_tokens"] > 0 and last["leapgen_prefill_tokens_total"] > 0
