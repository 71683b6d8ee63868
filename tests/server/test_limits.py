"""The server's limits over real HTTP: 401 without the API key on every route
but /health (routes that do not exist yet included), 413 past the body limit
(declared or chunked), 429 with Retry-After past the queue, and their
counters in /metrics; a grammar over the per-grammar size limit is a 400
naming its field; the engine keeps serving after each refusal."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from tests.server.helpers import needs_server_stack, new_engine, run_server

pytestmark = pytest.mark.model

KEY = "sekret-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
BODY_LIMIT = 64 * 1024
GRAMMAR_LIMIT = 16 << 20
SMALL = {"model": "default", "prompt": "The answer is", "max_tokens": 2, "temperature": 0}


@pytest.fixture(scope="module")
def limited():
    """(base_url, engine) of a server with an API key, a 64 KiB body limit, one running request and one queued."""
    needs_server_stack()
    from leapgen.server.app import create_app
    from leapgen.server.limits import ServeLimits

    engine = new_engine(max_running=1, max_grammar_bytes=GRAMMAR_LIMIT)
    engine.llm.grammar.prepare()  # as serve() does: the compile worker set up, so compiles run in it
    app = create_app(engine, limits=ServeLimits(api_key=KEY, max_request_bytes=BODY_LIMIT, max_queued_requests=1))
    url, stop = run_server(app)
    yield url, engine
    stop()
    engine.stop()
    engine.llm.close()


def _refusals(url: str) -> dict[str, int]:
    text = httpx.get(url + "/metrics", headers=AUTH).text
    return {code: int(n) for code, n in re.findall(r'leapgen_http_refusals_total\{code="(\d+)"\} (\d+)', text)}


@pytest.mark.parametrize("method, path", [("POST", "/v1/chat/completions"), ("POST", "/v1/completions"),
                                          ("GET", "/v1/models"), ("GET", "/metrics"), ("POST", "/generate"),
                                          ("POST", "/v1/responses"), ("GET", "/get_model_info"), ("GET", "/nowhere")])
def test_every_route_but_health_needs_the_key(limited, method, path):
    url, _ = limited
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        r = httpx.request(method, url + path, json=SMALL, headers=headers)
        assert r.status_code == 401, (path, headers, r.text)
        assert r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(url + "/health").status_code == 200


def test_the_key_opens_the_routes(limited):
    url, _ = limited
    assert httpx.get(url + "/v1/models", headers=AUTH).status_code == 200
    r = httpx.post(url + "/v1/completions", json=SMALL, headers=AUTH, timeout=120)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
    assert _refusals(url)["401"] >= 3


def test_a_body_over_the_limit_is_a_413(limited):
    url, _ = limited
    before = _refusals(url)["413"]
    big = dict(SMALL, prompt="x" * (BODY_LIMIT + 1))
    r = httpx.post(url + "/v1/completions", json=big, headers=AUTH)  # Content-Length declared
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    assert str(BODY_LIMIT) in r.json()["error"]["message"]

    def chunks():  # no Content-Length: found while reading
        yield b'{"prompt": "'
        for _ in range(20):
            yield b"y" * 8192
        yield b'"}'

    r = httpx.post(url + "/v1/completions", content=chunks(), headers=dict(AUTH, **{"content-type": "application/json"}))
    assert r.status_code == 413
    assert _refusals(url)["413"] == before + 2
    ok = httpx.post(url + "/v1/completions", json=dict(SMALL, prompt="y" * 1000), headers=AUTH, timeout=120)
    assert ok.status_code == 200  # a body under the limit passes whole


def test_past_the_queue_is_a_429_with_retry_after(limited):
    url, engine = limited
    before = _refusals(url)["429"]

    async def burst():
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=300) as client:
            body = dict(SMALL, max_tokens=24, temperature=1.0)
            return await asyncio.gather(*(client.post("/v1/completions", json=body) for _ in range(6)))

    answers = asyncio.run(burst())
    codes = sorted(r.status_code for r in answers)
    refused = [r for r in answers if r.status_code == 429]
    # one runs, one waits: of six sent at once at least four are refused, and every accepted one answers
    assert len(refused) >= 4 and set(codes) <= {200, 429}, codes
    assert all(int(r.headers["retry-after"]) >= 1 and r.json()["error"]["code"] == "queue_full" for r in refused)
    assert _refusals(url)["429"] == before + len(refused)
    assert engine.num_queued == 0
    assert httpx.post(url + "/v1/completions", json=SMALL, headers=AUTH, timeout=120).status_code == 200


def test_a_grammar_over_the_size_limit_is_a_400_naming_its_field(limited):
    url, _ = limited
    heavy = "(m|n)*m(m|n){15}"  # 65,540 DFA states: about 66 MiB
    r = httpx.post(url + "/v1/completions", json=dict(SMALL, regex=heavy), headers=AUTH, timeout=120)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "regex" and "16.0 MiB per grammar" in error["message"], error
    light = httpx.post(url + "/v1/completions", json=dict(SMALL, regex="(m|n)*m(m|n){3}"), headers=AUTH, timeout=120)
    assert light.status_code == 200


def test_prompts_are_tokenized_off_the_engine_thread(limited, monkeypatch):
    import threading

    url, engine = limited
    seen = []
    prepare = engine.llm.prepare_prompt

    def recording(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return prepare(*args, **kwargs)

    monkeypatch.setattr(engine.llm, "prepare_prompt", recording)
    assert httpx.post(url + "/v1/completions", json=SMALL, headers=AUTH, timeout=120).status_code == 200
    assert seen and all(name.startswith("leapgen-tokenize") for name in seen), seen


def test_metrics_export_the_compile_histogram_and_the_cache_bytes(limited):
    url, _ = limited
    r = httpx.post(url + "/v1/completions", json=dict(SMALL, regex="(yes|no)"), headers=AUTH, timeout=120)
    assert r.status_code == 200
    text = httpx.get(url + "/metrics", headers=AUTH).text
    buckets = [int(n) for n in re.findall(r'leapgen_grammar_compile_seconds_bucket\{le="[^"]+"\} (\d+)', text)]
    count = int(re.search(r"leapgen_grammar_compile_seconds_count (\d+)", text).group(1))
    assert buckets == sorted(buckets) and buckets[-1] == count >= 1  # cumulative, +Inf last
    memory = int(re.search(r'leapgen_grammar_cache_bytes\{process="engine",where="memory"\} (\d+)', text).group(1))
    worker = int(re.search(r'leapgen_grammar_cache_bytes\{process="compile_worker",where="memory"\} (\d+)',
                           text).group(1))
    disk = int(re.search(r'leapgen_grammar_cache_bytes\{where="disk"\} (\d+)', text).group(1))
    assert memory > 0 and worker > 0 and disk > 0
    assert re.search(r"leapgen_queued_requests \d+", text)
