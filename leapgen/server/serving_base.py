"""What every completion endpoint shares: submit a request's prompts to the
engine, wait for their grammar, answer in full or stream Server-Sent
Events, map errors, cancel on disconnect.

One responsibility: the life of one HTTP completion request, which may hold
several prompts (a batch) of ``n`` samples each. Its *choices* are numbered
prompt-major: choice ``p * n + i`` is sample ``i`` of prompt ``p``. The
endpoint modules only say how a response and a stream chunk look
(:class:`Renderer`).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator, Sequence

from fastapi import Request as HttpRequest
from fastapi.responses import JSONResponse, Response, StreamingResponse

from leapgen.engine.async_llm import AsyncLLM, StreamEvent
from leapgen.server.protocol import error_body

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
    token_bytes : sequence of bytes or None
        Each token id's bytes (for log-probability entries).
    """

    def __init__(self, response_id: str, model: str, created: int, token_bytes: Sequence[bytes] | None = None):
        self.response_id = response_id
        self.model = model
        self.created = created
        self.token_bytes = token_bytes

    def full(self, outs: list) -> dict:
        """The non-streamed response body of the finished outputs (one per
        choice, in choice order)."""
        raise NotImplementedError

    def chunk(self, index: int, delta: str | None, finish_reason: str | None, logprobs: tuple = ()) -> dict:
        """One stream chunk of choice ``index``: text ``delta`` (None on its
        last chunk), the finish reason (None until then) and the log-prob
        entries of the tokens it completes."""
        raise NotImplementedError

    def final_chunks(self, index: int, out: Any) -> list[dict]:
        """The chunks that end choice ``index`` (its finish reason), once
        its output ``out`` is complete."""
        from leapgen.server.protocol import finish_reason_of

        return [self.chunk(index, None, finish_reason_of(out))]

    def usage_chunk(self, outs: list) -> dict:
        """The trailing chunk with ``usage`` (``stream_options.include_usage``)."""
        from leapgen.server.protocol import usage_of

        body = self.chunk(0, None, None)
        body["choices"] = []
        body["usage"] = usage_of(outs)
        return body

    def token_text(self, token_id: int) -> tuple[str, list[int]]:
        """A token's text (undecodable bytes replaced) and its bytes."""
        data = self.token_bytes[token_id] if self.token_bytes is not None else b""
        return data.decode("utf-8", "replace"), list(data)


class RequestGroup:
    """The engine streams of one HTTP request (one per prompt), read as one
    sequence of ``(choice index, StreamEvent)``.

    Parameters
    ----------
    engine : AsyncLLM
    prompts : sequence
        Each a str, a conversation or token ids.
    params : sequence of SamplingParams
        One per prompt.
    chat : bool
    """

    def __init__(self, engine: AsyncLLM, prompts: Sequence[Any], params: Sequence[Any], *, chat: bool):
        self.handles: list = []
        try:
            for p, sp in zip(prompts, params):
                self.handles.append(engine.submit(p, sp, chat=chat))
        except Exception:  # the queue is full (a 429): the prompts already queued are not left running
            for handle in self.handles:
                handle.cancel()
            raise
        self.offsets, total = [], 0
        for sp in params:
            self.offsets.append(total)
            total += sp.n
        self.num_choices = total
        self._queue: asyncio.Queue = asyncio.Queue()
        self._tasks = [asyncio.ensure_future(self._pump(k, h, sp.n))
                       for k, (h, sp) in enumerate(zip(self.handles, params))]
        self._finals = 0
        self._checked_at = 0.0  # the last disconnect check (time.monotonic)

    async def _pump(self, k: int, handle: Any, n: int) -> None:
        finals = 0
        while finals < n:
            event = await handle.get()
            finals += event.output is not None
            await self._queue.put((self.offsets[k] + event.index, event))

    @property
    def done(self) -> bool:
        """Whether every choice's final event was read."""
        return self._finals >= self.num_choices

    async def next(self, http: HttpRequest | None) -> tuple[int, StreamEvent]:
        """The next event, checking the client connection at most every
        ``DISCONNECT_POLL_S`` seconds while waiting (also while events keep
        arriving: a non-streamed request gets one every decode step).

        Raises
        ------
        ClientGone
            The client disconnected.
        """
        task = asyncio.ensure_future(self._queue.get())
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
                if http is not None:
                    now = time.monotonic()
                    if now - self._checked_at >= DISCONNECT_POLL_S:
                        self._checked_at = now
                        if await http.is_disconnected():
                            raise ClientGone()
                if done:
                    index, event = task.result()
                    self._finals += event.output is not None
                    return index, event
        finally:
            if not task.done():
                task.cancel()

    def cancel(self) -> None:
        """Abort every prompt's request (a no-op for finished ones) and stop reading."""
        for handle in self.handles:
            handle.cancel()
        for task in self._tasks:
            task.cancel()


async def serve_completion(http: HttpRequest, engine: AsyncLLM, prompts: Sequence[Any], params: Sequence[Any], *,
                           chat: bool, grammar_field: str | None, renderer: Any, stream_body: Any = None) -> Any:
    """Run one HTTP completion request (all its prompts) and answer it.

    Parameters
    ----------
    http : fastapi.Request
    engine : AsyncLLM
    prompts : sequence
        Each a str, a conversation or token ids.
    params : sequence of SamplingParams
        One per prompt.
    chat : bool
        Apply the chat template.
    grammar_field : str or None
        The request field holding the constraint (named by a grammar's 400).
    renderer : Renderer
        Shapes the full response (``renderer.full``).
    stream_body : callable or None
        ``stream_body(group, buffered) -> async iterator of str``, the SSE
        body; None answers in full.

    Returns
    -------
    JSONResponse or StreamingResponse
        400 (OpenAI-shaped, naming the field and where in the grammar) when
        the grammar or a prompt is bad, before any streaming starts; 500 for
        an engine failure.
    """
    group = RequestGroup(engine, prompts, params, chat=chat)
    buffered: list[tuple[int, StreamEvent]] = []
    try:
        seen: set[int] = set()
        while len(seen) < len(group.handles):  # each prompt's first event: ready, or its failure
            index, event = await group.next(http)
            buffered.append((index, event))
            prompt = max(k for k, off in enumerate(group.offsets) if off <= index)
            seen.add(prompt)
            if event.output is not None and event.output.finish_reason == "error":
                group.cancel()
                return error_response(event.output, grammar_field)
        if stream_body is None:
            outs: list = [None] * group.num_choices
            pending = list(buffered)
            while pending or not group.done:
                index, event = pending.pop(0) if pending else await group.next(http)
                if event.output is not None:
                    if event.output.finish_reason == "error":
                        group.cancel()
                        return error_response(event.output, grammar_field)
                    outs[index] = event.output
            return JSONResponse(renderer.full(outs))
    except ClientGone:
        group.cancel()  # frees the KV; nobody is left to read an answer
        return Response(status_code=499)
    except asyncio.CancelledError:
        group.cancel()
        raise
    body = stream_body(group, buffered)
    return StreamingResponse(_cancelling(body, group), media_type="text/event-stream")


async def _cancelling(body: AsyncIterator[str], group: RequestGroup) -> AsyncIterator[str]:
    try:
        async for part in body:
            yield part
    finally:
        group.cancel()  # a no-op once finished; frees the KV on disconnect


async def events_of(group: RequestGroup, buffered: list) -> AsyncIterator[tuple[int, StreamEvent]]:
    """The buffered events, then the rest until every choice is final."""
    for item in buffered:
        yield item
    while not group.done:
        yield await group.next(None)


async def openai_sse(group: RequestGroup, buffered: list, renderer: Any, *, include_usage: bool) -> AsyncIterator[str]:
    """Server-Sent Events of an OpenAI completion: per choice, text chunks as
    it grows (forced text included; a renderer may hold some back: its
    ``chunk`` returns None), then its final chunks; the usage chunk when
    asked; ``[DONE]``. A failed choice ends the stream with an error object."""
    outs: list = [None] * group.num_choices
    async for index, event in events_of(group, buffered):
        if event.delta or event.logprobs:
            body = renderer.chunk(index, event.delta, None, event.logprobs)
            if body is not None:
                yield data_line(body)
        out = event.output
        if out is None:
            continue
        if out.finish_reason == "error":
            yield data_line(error_body(out.error or "the request failed", type_="server_error"))
            yield "data: [DONE]\n\n"
            return
        outs[index] = out
        for body in renderer.final_chunks(index, out):
            yield data_line(body)
    if include_usage:
        yield data_line(renderer.usage_chunk(outs))
    yield "data: [DONE]\n\n"


def openai_stream_body(body: Any, renderer: Any) -> Any:
    """The ``stream_body`` of :func:`serve_completion` for an OpenAI completion request ``body``:
    :func:`openai_sse` when ``body.stream`` (with the usage chunk when ``body.stream_options.include_usage``),
    else None (answer in full)."""
    if not body.stream:
        return None
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return lambda group, buffered: openai_sse(group, buffered, renderer, include_usage=include_usage)


def data_line(body: dict) -> str:
    """One SSE ``data:`` line."""
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
