"""``POST /v1/chat/completions``: the response and chunk shapes of a chat
completion (the request's life is in :mod:`leapgen.server.serving_base`).

A request with tools or a reasoning parser is planned by
:mod:`leapgen.engine.chat` (prompt, one structural tag, the output's
parser); its choices come back as ``message.tool_calls`` (``finish_reason:
"tool_calls"``), ``content`` and ``reasoning_content``, and its stream
sends OpenAI's deltas (a call's ``index``, ``id``, ``type`` and ``name``
once, then ``arguments`` fragments), the differences of successive parses
of the text so far (:class:`~leapgen.engine.chat.output_parser.ChatStream`).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request as HttpRequest

from leapgen.engine.async_llm import AsyncLLM
from leapgen.engine.chat.output_parser import ChatStream, OutputParser
from leapgen.engine.chat.plan import chat_output
from leapgen.server.protocol import finish_reason_of, make_id, now, usage_of
from leapgen.server.protocol_chat import ChatCompletionRequest
from leapgen.server.serving_base import Renderer, openai_stream_body, serve_completion


class ChatRenderer(Renderer):
    """``chat.completion`` / ``chat.completion.chunk`` objects.

    Parameters
    ----------
    parser : OutputParser or None
        Reads tool calls and reasoning out of each choice's text; None (or a
        parser with neither): the text is the content, as it is.
    """

    def __init__(self, *args, wants_logprobs: bool = False, parser: OutputParser | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._wants_logprobs = wants_logprobs
        self._sent_role: set[int] = set()
        self._parser = parser if parser is not None and (parser.tool_format is not None or parser.has_reasoning) \
            else None
        self._streams: dict[int, ChatStream] = {}

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
        choices = []
        for i, out in enumerate(outs):
            if self._parser is None:
                message, reason = {"role": "assistant", "content": out.text}, finish_reason_of(out)
            else:
                read = chat_output(out, self._parser)
                message, reason = read.message, read.finish_reason
            choices.append({"index": i, "message": message, "finish_reason": reason,
                            "logprobs": self.logprobs(out.logprobs)})
        return {"id": self.response_id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": choices, "usage": usage_of(outs)}

    def chunk(self, index: int, delta: str | None, finish_reason: str | None, logprobs: tuple = ()) -> dict | None:
        body: dict = {}
        if delta is not None:
            if self._parser is None:
                body["content"] = delta
            else:
                body = self._stream(index).feed(delta)
                if not body and not logprobs:
                    return None  # held back: it may still be a trigger or an end marker
        return self._chunk_of(index, body, finish_reason, self.logprobs(logprobs) if delta is not None else None)

    def final_chunks(self, index: int, out: Any) -> list[dict]:
        if self._parser is None:
            return super().final_chunks(index, out)
        stream = self._stream(index)
        rest = stream.finish()
        chunks = [self._chunk_of(index, rest, None, None)] if rest else []
        reason = finish_reason_of(out)
        if stream.has_calls and out.finish_reason in ("stop", "grammar"):
            reason = "tool_calls"
        return chunks + [self._chunk_of(index, {}, reason, None)]

    def _stream(self, index: int) -> ChatStream:
        if index not in self._streams:
            self._streams[index] = ChatStream(self._parser)
        return self._streams[index]

    def _chunk_of(self, index: int, delta: dict, finish_reason: str | None, logprobs: dict | None) -> dict:
        if index not in self._sent_role:
            delta = {"role": "assistant", **delta}
            self._sent_role.add(index)
        return {"id": self.response_id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model,
                "choices": [{"index": index, "delta": delta, "finish_reason": finish_reason, "logprobs": logprobs}]}


async def create_chat_completion(body: ChatCompletionRequest, http: HttpRequest, engine: AsyncLLM,
                                 model_name: str, default_max_tokens: int) -> Any:
    """Answer one chat completion request (see :func:`serve_completion`).

    Raises
    ------
    ValueError
        If a field is refused, the tools or the conversation are bad, or the
        sampling fields are inconsistent (the app answers 400 naming the field).
    """
    params, field = body.to_sampling_params(default_max_tokens, backend=engine.llm.grammar.backend_name,
                                            logprobs=body.num_logprobs(), max_tokens=body.max_completion_tokens,
                                            eos_token_ids=engine.llm.stop_token_ids)
    settings = engine.llm.chat_settings
    plan = settings.plan(body.prompt_messages(), params,
                         **body.chat_options(field, reasoning=settings.reasoning is not None))
    wants = params.logprobs is not None
    renderer = ChatRenderer(make_id("chatcmpl"), model_name, now(),
                            engine.llm.grammar.token_text_bytes if wants else None, wants_logprobs=wants,
                            parser=plan.parser)
    return await serve_completion(http, engine, [plan.prompt_ids], [plan.params], chat=True,
                                  grammar_field="tools" if plan.calls_tools else field,
                                  renderer=renderer, stream_body=openai_stream_body(body, renderer))
