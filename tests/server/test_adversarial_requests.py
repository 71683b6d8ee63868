"""Hostile HTTP requests (raw bodies, through httpx): every bad one is an
OpenAI-shaped 4xx naming the field and where, none takes the engine down, and
a client that leaves a non-streamed request frees its KV at once.

Here rather than in tests/adversarial/ to share this directory's one server
(a second session-scoped server would load the model twice)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

pytestmark = pytest.mark.model


def _post(base: str, path: str, body: bytes | dict, timeout: float = 120) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(base + path, content=content, headers={"content-type": "application/json"}, timeout=timeout)


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    return err


def _still_serving(base: str) -> None:
    r = _post(base, "/v1/completions", {"prompt": "Number:", "max_tokens": 4, "temperature": 0,
                                         "regex": "[0-9]{3}"})
    assert r.status_code == 200, r.text
    assert len(r.json()["choices"][0]["text"]) == 3


# JSON bodies spelled by hand: a lone surrogate is valid JSON ("\ud800") but has no UTF-8 form.
SURROGATE_PROMPT = b'{"prompt": "x\\ud800", "max_tokens": 3}'
SURROGATE_CHAT = b'{"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "\\udfff"}]}'


def test_lone_surrogate_prompt_is_a_400_and_the_engine_survives(server):
    base, engine = server
    # It used to raise a TypeError in the tokenizer on the engine thread, killing it: every later request hung.
    err = _error(_post(base, "/v1/completions", SURROGATE_PROMPT), 400)
    assert "surrogate" in err["message"] and "character 1" in err["message"]
    err = _error(_post(base, "/v1/chat/completions", SURROGATE_CHAT), 400)
    assert "messages[1].content" in err["message"]
    assert engine._thread.is_alive()
    _still_serving(base)


@pytest.mark.parametrize("body, param, where", [
    (b'{"prompt": "x", "max_tokens": 3, "json_schema": {"type": "object", "properties": {"a": {"const": "\\ud800"}}}}',
     "json_schema", "JSON pointer /properties/a/const"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 3, "response_format": {"type": "json_schema",'
     b' "json_schema": {"name": "x", "schema": {"enum": ["ok", "\\udc00"]}}}}',
     "response_format.json_schema.schema", "JSON pointer /enum/1"),
    (b'{"prompt": "x", "max_tokens": 3, "regex": "ab\\ud800"}', "regex", "offset 2"),
    (b'{"prompt": "x", "max_tokens": 3, "ebnf": "root ::= \\"\\ud800\\""}', "ebnf", "line 1:11"),
], ids=["json_schema", "response_format", "regex", "ebnf"])
def test_lone_surrogate_in_a_grammar_is_a_400_naming_where(server, body, param, where):
    err = _error(_post(server[0], "/v1/chat/completions" if b"messages" in body else "/v1/completions", body), 400)
    assert err["param"] == param and err["code"] == "invalid_grammar"
    assert where in err["message"], err


def test_too_deep_schema_is_a_400_not_a_500(server):
    # 900 levels parse as JSON but could not be pickled to the compile worker (RecursionError -> 500).
    body = ('{"prompt": "x", "max_tokens": 3, "json_schema": ' + '{"items": ' * 900 + "{}" + "}" * 900 + "}").encode()
    err = _error(_post(server[0], "/v1/completions", body), 400)
    assert err["param"] == "json_schema" and "deep" in err["message"]
    _still_serving(server[0])


@pytest.mark.parametrize("path, body, status, param, needle", [
    ("/v1/chat/completions", b"{not json", 400, None, "not valid JSON"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\xff"}]}', 400, None, "parsing the body"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages.0.role", "'user'"),
    ("/v1/chat/completions", {"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}, 404, "model",
     "gpt-9"),
    ("/v1/completions", {"prompt": "x", "seed": 2 ** 70}, 400, "seed", "less than"),
    ("/v1/completions", {"prompt": "x", "stop": ["\ud800"]}, 400, None, "surrogate"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "response_format": {"type": "json_schema", "json_schema": {"schema": 5}}},
     400, "response_format.json_schema.schema", "dictionary"),
    ("/v1/nothing", {}, 404, None, "Not Found"),
], ids=["bad-json", "bad-utf8", "role", "unknown-model", "seed", "stop-surrogate", "schema-type", "route"])
def test_malformed_requests_are_openai_shaped(server, path, body, status, param, needle):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    err = _error(_post(server[0], path, content), status)
    assert err["param"] == param and needle in err["message"], err


def test_client_leaving_a_non_streamed_request_frees_the_kv(server):
    base, engine = server
    llm = engine.llm
    body = {"prompt": "x", "max_tokens": 400, "temperature": 0, "regex": "(ab)+"}
    _post(base, "/v1/completions", dict(body, max_tokens=2))  # compiled: the next one decodes at once
    aborts = llm.stats.requests_finished["abort"]
    with pytest.raises(httpx.ReadTimeout):
        _post(base, "/v1/completions", body, timeout=2.0)
    # Deltas arrive every step; the disconnect check used to run only when none came for 0.25 s, so the
    # request decoded all 400 tokens (tens of seconds here) for nobody.
    deadline = time.time() + 5
    while llm.stats.requests_finished["abort"] == aborts and time.time() < deadline:
        time.sleep(0.1)
    assert llm.stats.requests_finished["abort"] == aborts + 1
    while llm.num_kv_tokens and time.time() < deadline:
        time.sleep(0.1)
    assert llm.num_kv_tokens == 0


def test_bad_requests_mixed_into_a_batch_do_not_lose_good_ones(server):
    base, engine = server
    bodies = []
    for i in range(12):
        if i % 4 == 1:
            bodies.append(SURROGATE_PROMPT)
        elif i % 4 == 3:
            bodies.append(b'{"prompt": "x", "max_tokens": 3, "json_schema": {"const": "\\ud800"}}')
        else:
            bodies.append({"prompt": f"Number {i}:", "max_tokens": 6, "temperature": 0, "regex": "[0-9]{3}"})
    results: dict[int, httpx.Response] = {}

    def run(i):
        results[i] = _post(base, "/v1/completions", bodies[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for i, r in sorted(results.items()):
        if isinstance(bodies[i], bytes):
            _error(r, 400)
        else:
            assert r.status_code == 200, r.text
            assert len(r.json()["choices"][0]["text"]) == 3
    assert len(results) == len(bodies)
    deadline = time.time() + 5
    while (engine.num_requests or engine.llm.num_kv_tokens) and time.time() < deadline:
        time.sleep(0.05)
    assert engine.num_requests == 0 and engine.llm.num_kv_tokens == 0
