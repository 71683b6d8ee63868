"""``POST /v1/completions``: the response and chunk shapes of a text
completion (the prompt is continued as raw text, no chat template)."""

from __future__ import annotations

from typing import Any

from fastapi import Request as HttpRequest

from leapgen.engine.async_llm import AsyncLLM
from leapgen.server.protocol import CompletionRequest, finish_reason_of, make_id, now, usage_of
from leapgen.server.serving_base import Renderer, serve_completion


class CompletionRenderer(Renderer):
    """``text_completion`` objects (full and chunks share the shape)."""

    def full(self, out: Any) -> dict:
        body = self.chunk(out.text, finish_reason_of(out))
        body["usage"] = usage_of(out)
        return body

    def chunk(self, delta: str | None, finish_reason: str | None) -> dict:
        return {"id": self.response_id, "object": "text_completion", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "text": delta or "", "finish_reason": finish_reason, "logprobs": None}]}


async def create_completion(body: CompletionRequest, http: HttpRequest, engine: AsyncLLM, model_name: str,
                            default_max_tokens: int) -> Any:
    """Answer one text completion request (see :func:`serve_completion`).

    Raises
    ------
    ValueError
        If the sampling fields are inconsistent (the app answers 400).
    """
    params, field = body.to_sampling_params(default_max_tokens)
    renderer = CompletionRenderer(make_id("cmpl"), model_name, now())
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return await serve_completion(http, engine, body.prompt, params, chat=False, grammar_field=field,
                                  stream=body.stream, include_usage=include_usage, renderer=renderer)
