"""``POST /v1/completions``: the response and chunk shapes of a text
completion (each prompt is continued as raw text, no chat template; a batch
of prompts gives ``n`` choices per prompt, prompt-major)."""

from __future__ import annotations

from typing import Any

from fastapi import Request as HttpRequest

from leapgen.engine.async_llm import AsyncLLM
from leapgen.server.protocol import CompletionRequest, finish_reason_of, make_id, now, usage_of
from leapgen.server.serving_base import Renderer, openai_stream_body, serve_completion


class CompletionRenderer(Renderer):
    """``text_completion`` objects (full and chunks share the shape).

    Parameters
    ----------
    echoes : list of str or None
        Per choice, the prompt text to put before its completion (``echo``).
    wants_logprobs : bool
    """

    def __init__(self, *args, echoes: list[str] | None = None, wants_logprobs: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._echoes = echoes
        self._echoed: set[int] = set()
        self._wants_logprobs = wants_logprobs
        self._offsets: dict[int, int] = {}

    def logprobs(self, entries, start: int) -> dict | None:
        """The completions API's ``logprobs`` object (``text_offset`` counts
        characters from ``start``); None without ``logprobs``."""
        if not self._wants_logprobs:
            return None
        tokens, token_logprobs, tops, offsets = [], [], [], []
        offset = start
        for e in entries or ():
            text, _ = self.token_text(e.token_id)
            tokens.append(text)
            token_logprobs.append(e.logprob)
            top = {text: e.logprob}  # the chosen token and the alternatives, as vLLM lists them
            for tid, lp in e.top:
                top.setdefault(self.token_text(tid)[0], lp)
            tops.append(top)
            offsets.append(offset)
            offset += len(text)
        return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": tops, "text_offset": offsets}

    def _echo(self, index: int) -> str:
        if self._echoes is None or index in self._echoed:
            return ""
        self._echoed.add(index)
        return self._echoes[index]

    def full(self, outs: list) -> dict:
        choices = []
        for i, out in enumerate(outs):
            echo = self._echo(i)
            choices.append({"index": i, "text": echo + out.text, "finish_reason": finish_reason_of(out),
                            "logprobs": self.logprobs(out.logprobs, len(echo))})
        return {"id": self.response_id, "object": "text_completion", "created": self.created, "model": self.model,
                "choices": choices, "usage": usage_of(outs)}

    def chunk(self, index: int, delta: str | None, finish_reason: str | None, logprobs: tuple = ()) -> dict:
        echo = self._echo(index)
        text = echo + (delta or "")
        lp = None
        if delta is not None:
            start = self._offsets.get(index, len(echo))  # characters the entries sent so far cover
            lp = self.logprobs(logprobs, start)
            if lp is not None:
                self._offsets[index] = start + sum(len(t) for t in lp["tokens"])
        return {"id": self.response_id, "object": "text_completion", "created": self.created, "model": self.model,
                "choices": [{"index": index, "text": text, "finish_reason": finish_reason, "logprobs": lp}]}


async def create_completion(body: CompletionRequest, http: HttpRequest, engine: AsyncLLM, model_name: str,
                            default_max_tokens: int) -> Any:
    """Answer one text completion request (see :func:`serve_completion`).

    Raises
    ------
    ValueError
        If a field is refused or the sampling fields are inconsistent (the
        app answers 400 naming the field).
    """
    params, field = body.to_sampling_params(default_max_tokens, backend=engine.llm.grammar.backend_name,
                                            logprobs=body.logprobs, eos_token_ids=engine.llm.stop_token_ids)
    prompts = body.prompts()
    echoes = None
    if body.echo:
        texts = [p if isinstance(p, str) else engine.llm.decode(p) for p in prompts]
        echoes = [t for t in texts for _ in range(params.n)]
    wants = params.logprobs is not None
    renderer = CompletionRenderer(make_id("cmpl"), model_name, now(),
                                  engine.llm.grammar.token_text_bytes if wants else None,
                                  echoes=echoes, wants_logprobs=wants)
    return await serve_completion(http, engine, prompts, [params] * len(prompts), chat=False, grammar_field=field,
                                  renderer=renderer, stream_body=openai_stream_body(body, renderer))
