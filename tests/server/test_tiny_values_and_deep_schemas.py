"""Issue 15, faults 5 and 6, over HTTP: tiny sampling values sample (they were a 500 "dead end"), and a
deep schema sent as JSON text is a 400 with a JSON pointer, as the same schema sent as an object is."""

from __future__ import annotations

import json

import httpx
import pytest

pytestmark = pytest.mark.model

DEPTH = 900


def _post(base: str, body: dict) -> httpx.Response:
    return httpx.post(base + "/v1/completions", content=json.dumps(body).encode(),
                      headers={"content-type": "application/json"}, timeout=120)


@pytest.mark.parametrize("values", [{"temperature": 1e-38}, {"temperature": 1e-39}, {"temperature": 5e-324},
                                    {"temperature": 1.0, "top_p": 1e-300}, {"temperature": 1e-39, "top_p": 1e-300}])
@pytest.mark.parametrize("grammar", [{}, {"regex": "[0-9]{3}"}], ids=["free", "regex"])
def test_tiny_sampling_values_sample_greedily(server, values, grammar):
    body = {"prompt": "Number:", "max_tokens": 4, "seed": 1, **values, **grammar}
    r = _post(server[0], body)
    assert r.status_code == 200, r.text
    greedy = _post(server[0], {**body, "temperature": 0, "top_p": 1.0})
    assert r.json()["choices"][0]["text"] == greedy.json()["choices"][0]["text"]


def _deep_schema_text(depth: int) -> str:
    """``{"items": {"items": ... {}}}``, ``depth`` levels: the request body still parses (about 1,000 levels
    is Python's limit), the schema's own parse or compile runs out of recursion."""
    return '{"items": ' * depth + "{}" + "}" * depth


@pytest.mark.parametrize("field, form", [("json_schema", "text"), ("json_schema", "object"),
                                         ("response_format", "object")])  # response_format: objects (OpenAI)
def test_deep_schema_is_a_400_with_a_json_pointer(server, field, form):
    text = _deep_schema_text(DEPTH)
    raw = json.dumps(text) if form == "text" else text  # the body is written by hand: json.dumps would recurse
    if field == "json_schema":
        body, path = '{"prompt": "x", "max_tokens": 3, "json_schema": ' + raw + "}", "/v1/completions"
    else:
        body = ('{"messages": [{"role": "user", "content": "x"}], "max_tokens": 3, "response_format": '
                '{"type": "json_schema", "json_schema": {"name": "deep", "schema": ' + raw + "}}}")
        path = "/v1/chat/completions"
    r = httpx.post(server[0] + path, content=body.encode(), headers={"content-type": "application/json"},
                   timeout=120)
    assert r.status_code == 400, r.text[:500]
    err = r.json()["error"]
    assert "JSON pointer /items/items/items" in err["message"] and "deep" in err["message"], err["message"][:500]
    assert len(err["message"]) < 1000 and err["code"] == "invalid_grammar"
