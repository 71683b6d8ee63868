"""``POST /v1/chat/completions``: the response and chunk shapes of a chat
completion (the request's life is in :mod:`leapgen.server.serving_base`)."""

from __future__ import annotations

from typing import Any

from fastapi import Request as HttpRequest

from leapgen.engine.async_llm import AsyncLLM
from leapgen.server.protocol import ChatCompletionRequest, finish_reason_of, make_id, now, usage_of
from leapgen.server.serving_base import Renderer, serve_completion


class ChatRenderer(Renderer):
    """``chat.completion`` / ``chat.completion.chunk`` objects."""

    def __init__(self, response_id: str, model: str, created: int):
        super().__init__(response_id, model, created)
        self._sent_role = False

    def full(self, out: Any) -> dict:
        return {"id": self.response_id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": out.text},
                             "finish_reason": finish_reason_of(out), "logprobs": None}],
                "usage": usage_of(out)}

    def chunk(self, delta: str | None, finish_reason: str | None) -> dict:
        body: dict = {}
        if not self._sent_role:
            body["role"] = "assistant"
            self._sent_role = True
        if delta is not None:
            body["content"] = delta
        return {"id": self.response_id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "delta": body, "finish_reason": finish_reason, "logprobs": None}]}


async def create_chat_completion(body: ChatCompletionRequest, http: HttpRequest, engine: AsyncLLM,
                                 model_name: str, default_max_tokens: int) -> Any:
    """Answer one chat completion request (see :func:`serve_completion`).

    Raises
    ------
    ValueError
        If the sampling fields are inconsistent (the app answers 400).
    """
    if body.max_completion_tokens is not None and body.max_tokens is None:
        body.max_tokens = body.max_completion_tokens
    params, field = body.to_sampling_params(default_max_tokens)
    messages = [m.model_dump() for m in body.messages]
    renderer = ChatRenderer(make_id("chatcmpl"), model_name, now())
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return await serve_completion(http, engine, messages, params, chat=True, grammar_field=field,
                                  stream=body.stream, include_usage=include_usage, renderer=renderer)
