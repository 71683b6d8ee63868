"""``POST /v1/chat/completions``: the response and chunk shapes of a chat
completion (the request's life is in :mod:`leapgen.server.serving_base`)."""

from __future__ import annotations

from typing import Any

from fastapi import Request as HttpRequest

from leapgen.engine.async_llm import AsyncLLM
from leapgen.server.protocol import ChatCompletionRequest, finish_reason_of, make_id, now, usage_of
from leapgen.server.serving_base import Renderer, openai_sse, serve_completion


class ChatRenderer(Renderer):
    """``chat.completion`` / ``chat.completion.chunk`` objects."""

    def __init__(self, *args, wants_logprobs: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._wants_logprobs = wants_logprobs
        self._sent_role: set[int] = set()

    def logprobs(self, entries) -> dict | None:
        """OpenAI's ``choices[i].logprobs`` of some entries (None without ``logprobs``)."""
        if not self._wants_logprobs:
            return None
        content = []
        for e in entries or ():
            token, data = self.token_text(e.token_id)
            top = []
            for tid, lp in e.top:
                t, b = self.token_text(tid)
                top.append({"token": t, "logprob": lp, "bytes": b})
            content.append({"token": token, "logprob": e.logprob, "bytes": data, "top_logprobs": top})
        return {"content": content, "refusal": None}

    def full(self, outs: list) -> dict:
        choices = [{"index": i, "message": {"role": "assistant", "content": out.text},
                    "finish_reason": finish_reason_of(out), "logprobs": self.logprobs(out.logprobs)}
                   for i, out in enumerate(outs)]
        return {"id": self.response_id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": choices, "usage": usage_of(outs)}

    def chunk(self, index: int, delta: str | None, finish_reason: str | None, logprobs: tuple = ()) -> dict:
        body: dict = {}
        if index not in self._sent_role:
            body["role"] = "assistant"
            self._sent_role.add(index)
        if delta is not None:
            body["content"] = delta
        return {"id": self.response_id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model,
                "choices": [{"index": index, "delta": body, "finish_reason": finish_reason,
                             "logprobs": self.logprobs(logprobs) if delta is not None else None}]}


async def create_chat_completion(body: ChatCompletionRequest, http: HttpRequest, engine: AsyncLLM,
                                 model_name: str, default_max_tokens: int) -> Any:
    """Answer one chat completion request (see :func:`serve_completion`).

    Raises
    ------
    ValueError
        If a field is refused or the sampling fields are inconsistent (the
        app answers 400 naming the field).
    """
    params, field = body.to_sampling_params(default_max_tokens, backend=engine.llm.grammar.backend_name,
                                            logprobs=body.num_logprobs(), max_tokens=body.max_completion_tokens,
                                            eos_token_ids=engine.llm.stop_token_ids)
    messages = body.prompt_messages()
    wants = params.logprobs is not None
    renderer = ChatRenderer(make_id("chatcmpl"), model_name, now(),
                            engine.llm.grammar.token_text_bytes if wants else None, wants_logprobs=wants)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    stream_body = None
    if body.stream:
        stream_body = lambda group, buffered: openai_sse(  # noqa: E731
            group, buffered, renderer, include_usage=include_usage)
    return await serve_completion(http, engine, [messages], [params], chat=True, grammar_field=field,
                                  renderer=renderer, stream_body=stream_body)
