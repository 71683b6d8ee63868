"""What chat and text completions share: submit to the engine, wait for the
grammar, answer in full or stream Server-Sent Events, map errors, cancel on
disconnect.

One responsibility: the life of one HTTP completion request. The endpoint
modules only say how a response and a stream chunk look.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator

from fastapi import Request as HttpRequest
from fastapi.responses import JSONResponse, Response, StreamingResponse

from leapgen.engine.async_llm import AsyncLLM, RequestStream, StreamEvent
from leapgen.server.protocol import error_body, finish_reason_of, usage_of

#: Seconds between checks that a non-streaming client is still connected.
DISCONNECT_POLL_S = 0.25


class ClientGone(Exception):
    """The HTTP client disconnected while its request ran."""


class Renderer:
    """How one endpoint shapes its responses (subclassed per endpoint).

    Parameters
    ----------
    response_id : str
    model : str
    created : int
    """

    def __init__(self, response_id: str, model: str, created: int):
        self.response_id = response_id
        self.model = model
        self.created = created

    def full(self, out: Any) -> dict:
        """The non-streamed response body of the finished ``out``."""
        raise NotImplementedError

    def chunk(self, delta: str | None, finish_reason: str | None) -> dict:
        """One stream chunk: text ``delta`` (None on the last chunk) and the
        finish reason (None until the last chunk)."""
        raise NotImplementedError

    def usage_chunk(self, out: Any) -> dict:
        """The trailing chunk with ``usage`` (``stream_options.include_usage``)."""
        body = self.chunk(None, None)
        body["choices"] = []
        body["usage"] = usage_of(out)
        return body


async def serve_completion(http: HttpRequest, engine: AsyncLLM, prompt: Any, params: Any, *, chat: bool,
                           grammar_field: str | None, stream: bool, include_usage: bool,
                           renderer: Renderer) -> Any:
    """Run one completion and answer it.

    Returns
    -------
    JSONResponse or StreamingResponse
        400 (OpenAI-shaped, naming the field and where in the grammar) when
        the grammar or the prompt is bad, before any streaming starts; 500
        for an engine failure.
    """
    handle = engine.submit(prompt, params, chat=chat)
    try:
        first = await _next_event(handle, http)
        if first.output is not None and first.output.finish_reason == "error":
            return error_response(first.output, grammar_field)
        if not stream:
            event = first
            while event.output is None:
                event = await _next_event(handle, http)
            if event.output.finish_reason == "error":
                return error_response(event.output, grammar_field)
            return JSONResponse(renderer.full(event.output))
    except ClientGone:
        handle.cancel()  # frees the KV; nobody is left to read an answer
        return Response(status_code=499)
    except asyncio.CancelledError:
        handle.cancel()
        raise
    return StreamingResponse(_sse(handle, first, renderer, include_usage), media_type="text/event-stream")


async def _next_event(handle: RequestStream, http: HttpRequest) -> StreamEvent:
    """The next event, checking the client connection at most every
    ``DISCONNECT_POLL_S`` seconds, also while events keep arriving (a
    non-streamed request gets a delta every decode step: checking only when
    none came in time never noticed a client that left mid-generation)."""
    task = asyncio.ensure_future(handle.get())
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            now = time.monotonic()
            if now - getattr(handle, "disconnect_checked_at", 0.0) >= DISCONNECT_POLL_S:
                handle.disconnect_checked_at = now
                if await http.is_disconnected():
                    raise ClientGone()
            if done:
                return task.result()
    finally:
        if not task.done():
            task.cancel()


async def _sse(handle: RequestStream, first: StreamEvent, renderer: Renderer,
               include_usage: bool) -> AsyncIterator[str]:
    """Server-Sent Events of one request (text as it is appended, forced text
    included); cancels the request if the client goes away."""
    try:
        event = first
        while True:
            if event.delta:
                yield _data(renderer.chunk(event.delta, None))
            if event.output is not None:
                break
            event = await handle.get()
        out = event.output
        if out.finish_reason == "error":
            yield _data(error_body(out.error or "the request failed", type_="server_error"))
        else:
            yield _data(renderer.chunk(None, finish_reason_of(out)))
            if include_usage:
                yield _data(renderer.usage_chunk(out))
        yield "data: [DONE]\n\n"
    finally:
        handle.cancel()  # a no-op once finished; frees the KV on disconnect


def _data(body: dict) -> str:
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def error_response(out: Any, grammar_field: str | None) -> JSONResponse:
    """The HTTP error of a failed request: 400 for a bad grammar or prompt
    (naming the field; the message says where in the grammar), 500 else."""
    if is_client_error(out.error_type):
        is_grammar = out.error_type not in ("ValueError",)
        return JSONResponse(error_body(out.error or "invalid request", param=grammar_field if is_grammar else None,
                                       code="invalid_grammar" if is_grammar else None), status_code=400)
    return JSONResponse(error_body(out.error or "the request failed", type_="server_error"), status_code=500)


def is_client_error(error_type: str | None) -> bool:
    """Whether an error class name (``RequestOutput.error_type``) means the
    caller's fault: a GrammarError subclass, or a ValueError on input."""
    import leapgen.errors

    if error_type == "ValueError":
        return True
    cls = getattr(leapgen.errors, error_type or "", None)
    return isinstance(cls, type) and issubclass(cls, leapgen.errors.GrammarError)

