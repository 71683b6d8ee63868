"""``POST /v1/responses``: OpenAI's Responses API (request in
:mod:`leapgen.server.protocol_responses`; the request's life is
:func:`leapgen.server.serving_base.serve_completion`'s, as a chat
completion's).

The response object is the SDK's ``Response``: ``id`` (``resp_...``),
``object: "response"``, ``status`` (``completed``, or ``incomplete`` with
``incomplete_details.reason = "max_output_tokens"``), ``output``: one
``message`` item (``msg_...``, role ``assistant``) holding one
``output_text`` part (``annotations: []``; ``logprobs`` with ``include``),
``usage`` (``input_tokens``, ``output_tokens``, ``total_tokens``, their
details, and ``jump_forward_tokens``: output tokens a jump-forward appended,
never sampled), and the request's settings echoed. The SDK computes
``output_text`` from the parts.

A stream is Server-Sent Events with ``event:`` names and numbered
``sequence_number`` s, as OpenAI sends them: ``response.created``,
``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta`` (as the
text grows, forced text included), ``response.output_text.done``,
``response.content_part.done``, ``response.output_item.done``, then
``response.completed`` (``response.incomplete`` when ``max_output_tokens``
cut it; ``response.failed`` when the engine failed it).
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from typing import Any, AsyncIterator

from fastapi import Request as HttpRequest

from leapgen.engine.async_llm import AsyncLLM
from leapgen.server.protocol import usage_of
from leapgen.server.protocol_responses import ResponsesRequest
from leapgen.server.serving_base import Renderer, events_of, serve_completion
from leapgen.server.serving_chat import ChatRenderer


class ResponsesRenderer(Renderer):
    """``response`` objects and their stream events.

    Parameters
    ----------
    response_id, model, created, token_bytes
        As :class:`Renderer`'s.
    echo : dict
        The request settings the response repeats
        (:meth:`ResponsesRequest.echo`).
    wants_logprobs : bool
        ``include: ["message.output_text.logprobs"]``.
    """

    def __init__(self, response_id: str, model: str, created: int, token_bytes=None, *, echo: dict,
                 wants_logprobs: bool = False):
        super().__init__(response_id, model, created, token_bytes)
        self.echo = echo
        self.message_id = f"msg_{uuid.uuid4().hex}"
        # The entries' shape is chat's ``logprobs.content`` (token, logprob, bytes, top_logprobs).
        self._entries = ChatRenderer(response_id, model, created, token_bytes, wants_logprobs=True) \
            if wants_logprobs else None

    def logprobs(self, entries) -> list | None:
        """``output_text.logprobs`` of some entries (None without ``include``)."""
        return None if self._entries is None else self._entries.logprobs(entries)["content"]

    def part(self, text: str, entries=()) -> dict:
        """An ``output_text`` content part."""
        part = {"type": "output_text", "text": text, "annotations": []}
        if self._entries is not None:
            part["logprobs"] = self.logprobs(entries)
        return part

    def message(self, status: str, parts: list) -> dict:
        """The output ``message`` item."""
        return {"id": self.message_id, "type": "message", "role": "assistant", "status": status, "content": parts}

    def response(self, status: str, output: list, *, out: Any = None, error: dict | None = None) -> dict:
        """The response object (``out``: the finished output, for ``usage``)."""
        body = {"id": self.response_id, "object": "response", "created_at": self.created, "status": status,
                "model": self.model, "output": output, "error": error,
                "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
                **self.echo, "usage": None if out is None else usage(out)}
        if out is not None:
            body["completed_at"] = int(time.time())
        return body

    def full(self, outs: list) -> dict:
        (out,) = outs
        status = "incomplete" if out.finish_reason == "length" else "completed"
        return self.response(status, [self.message(status, [self.part(out.text, out.logprobs)])], out=out)


def usage(out: Any) -> dict:
    """The Responses ``usage`` of a finished output (OpenAI's fields, and
    ``jump_forward_tokens``). ``cached_tokens``: prompt tokens whose KV the
    prefix cache gave; ``cache_write_tokens`` is not counted (0)."""
    counts = usage_of([out])
    return {"input_tokens": counts["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": out.cached_prompt_tokens, "cache_write_tokens": 0},
            "output_tokens": counts["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": counts["total_tokens"], "jump_forward_tokens": counts["jump_forward_tokens"]}


async def responses_sse(group: Any, buffered: list, renderer: ResponsesRenderer) -> AsyncIterator[str]:
    """The Responses stream of one request (see the module docstring)."""
    numbers = itertools.count()

    def event(kind: str, **fields) -> str:
        body = {"type": kind, **fields, "sequence_number": next(numbers)}
        return f"event: {kind}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n"

    where = {"item_id": renderer.message_id, "output_index": 0, "content_index": 0}
    yield event("response.created", response=renderer.response("in_progress", []))
    yield event("response.in_progress", response=renderer.response("in_progress", []))
    yield event("response.output_item.added", output_index=0, item=renderer.message("in_progress", []))
    yield event("response.content_part.added", **where, part=renderer.part(""))
    text, out = "", None
    async for _, ev in events_of(group, buffered):
        if ev.delta or ev.logprobs:
            text += ev.delta
            yield event("response.output_text.delta", **where, delta=ev.delta,
                        logprobs=renderer.logprobs(ev.logprobs) or [])
        if ev.output is None:
            continue
        out = ev.output
        if out.finish_reason == "error":
            error = {"code": "server_error", "message": out.error or "the request failed"}
            yield event("response.failed", response=renderer.response("failed", [], error=error))
            return
    final = renderer.full([out])
    part = final["output"][0]["content"][0]
    yield event("response.output_text.done", **where, text=part["text"], logprobs=part.get("logprobs") or [])
    yield event("response.content_part.done", **where, part=part)
    yield event("response.output_item.done", output_index=0, item=final["output"][0])
    yield event("response.completed" if final["status"] == "completed" else "response.incomplete", response=final)


async def create_response(body: ResponsesRequest, http: HttpRequest, engine: AsyncLLM, model_name: str,
                          default_max_tokens: int) -> Any:
    """Answer one Responses API request (see :func:`serve_completion`).

    Raises
    ------
    ValueError
        If a field is refused or the sampling fields are inconsistent (the
        app answers 400 naming the field).
    """
    params, field = body.to_sampling_params(default_max_tokens)
    messages = body.messages()
    wants = params.logprobs is not None
    renderer = ResponsesRenderer(f"resp_{uuid.uuid4().hex}", model_name, int(time.time()),
                                 engine.llm.grammar.token_text_bytes if wants else None, echo=body.echo(),
                                 wants_logprobs=wants)
    stream_body = None
    if body.stream:
        stream_body = lambda group, buffered: responses_sse(group, buffered, renderer)  # noqa: E731
    return await serve_completion(http, engine, [messages], [params], chat=True, grammar_field=field,
                                  renderer=renderer, stream_body=stream_body)
