"""The body limit of :class:`leapgen.server.limits.RequestLimits` at the ASGI level, where the server's way
of handing over a body (one message or many) is set by the test instead of by socket timing."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("fastapi", reason="needs the server stack: pip install 'leapgen[server]'")

from leapgen.server.limits import Refusals, RequestLimits, ServeLimits  # noqa: E402

BOUND = 1000


def _run(messages: list[dict], headers: list | None = None) -> list[dict]:
    """Drive the middleware with ``messages`` as the body (then a receive that, like uvicorn's after a
    body's end, waits for the client to disconnect); return what it sent."""

    async def app(scope, receive, send):  # an app that answers 200 with the body it was given
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    queue = list(messages)
    sent: list[dict] = []

    async def receive():
        if queue:
            return queue.pop(0)
        await asyncio.sleep(3600)  # no more body: only a disconnect would come

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": "/v1/completions", "method": "POST", "headers": headers or []}
    middleware = RequestLimits(app, limits=ServeLimits(max_request_bytes=BOUND), refusals=Refusals())
    asyncio.run(asyncio.wait_for(middleware(scope, receive, send), timeout=10))
    return sent


def _status(sent: list[dict]) -> int:
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def test_a_chunked_body_handed_over_whole_past_the_bound_is_a_413_at_once():
    # uvicorn gives a body that arrived before the app read it as one message: reading on would hang.
    sent = _run([{"type": "http.request", "body": b"x" * (BOUND + 1), "more_body": False}])
    assert _status(sent) == 413


def test_a_chunked_body_past_the_bound_in_pieces_is_drained_then_a_413():
    pieces = [{"type": "http.request", "body": b"x" * 400, "more_body": True} for _ in range(5)]
    sent = _run(pieces + [{"type": "http.request", "body": b"", "more_body": False}])
    assert _status(sent) == 413
    assert (b"connection", b"close") not in sent[0]["headers"]  # drained to its end: the connection stays


def test_a_body_within_the_bound_reaches_the_app_whole():
    pieces = [{"type": "http.request", "body": b"ab", "more_body": True},
              {"type": "http.request", "body": b"cd", "more_body": False}]
    sent = _run(pieces)
    assert _status(sent) == 200 and sent[1]["body"] == b"abcd"
