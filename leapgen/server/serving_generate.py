"""``POST /generate``: SGLang's native API (request in
:mod:`leapgen.server.protocol_sglang`). A response is one object per choice
(a list for a batch or ``n > 1``); a stream sends ``data:`` lines each with
the choice's *cumulative* text, as SGLang does, its ``index`` in the batch,
and ``meta_info`` (with the finish reason and counts on the choice's last
line), then ``data: [DONE]``. With ``return_logprob``, the prompt's entries
(``input_token_logprobs``) come with a choice's finished object."""

from __future__ import annotations

import time
from typing import Any, AsyncIterator

from fastapi import Request as HttpRequest

from leapgen.engine.async_llm import AsyncLLM
from leapgen.server.protocol_sglang import GenerateRequest
from leapgen.server.serving_base import Renderer, data_line, events_of, serve_completion


class GenerateRenderer(Renderer):
    """SGLang's output objects.

    Parameters
    ----------
    rids : list of str or None
        Per choice, the request id SGLang echoes in ``meta_info.id``.
    logprobs : int or None
        ``top_logprobs_num`` when ``return_logprob``, else None.
    return_text : bool
        ``return_text_in_logprobs``: each entry carries its token's text.
    token_bytes : sequence of bytes or None
    single : bool
        One prompt, one sample: the response is that object, not a list.
    """

    def __init__(self, rids: list, logprobs: int | None, return_text: bool, token_bytes=None, *,
                 single: bool = False):
        super().__init__("", "", 0, token_bytes)
        self.single = single
        self.rids = rids
        self.num_top = logprobs
        self.return_text = return_text
        self.start = time.perf_counter()

    def _triple(self, logprob: float, token_id: int) -> list:
        return [logprob, token_id, self.token_text(token_id)[0] if self.return_text else None]

    def logprob_fields(self, entries) -> dict:
        """``output_token_logprobs`` (and ``output_top_logprobs`` when asked)."""
        if self.num_top is None:
            return {}
        entries = entries or ()
        out = {"output_token_logprobs": [self._triple(e.logprob, e.token_id) for e in entries]}
        if self.num_top:
            out["output_top_logprobs"] = [[self._triple(lp, t) for t, lp in e.top] for e in entries]
        return out

    def input_fields(self, out: Any) -> dict:
        """``input_token_logprobs`` (and ``input_top_logprobs`` when asked) of
        a finished output, as SGLang aligns them: one entry per prompt token
        from ``logprob_start_len`` on, the first unscored (None). SGLang's
        default start (-1) scores none: its scheduler (0.5.x) moves it to the
        prompt's length."""
        if self.num_top is None:
            return {}
        ids = out.prompt_token_ids
        entries = [] if out.prompt_logprobs is None else list(
            zip(ids[len(ids) - len(out.prompt_logprobs):], out.prompt_logprobs))
        fields = {"input_token_logprobs": [self._triple(None if e is None else e.logprob, t) for t, e in entries]}
        if self.num_top:
            fields["input_top_logprobs"] = [None if e is None else [self._triple(lp, t) for t, lp in e.top]
                                            for _, e in entries]
        return fields

    def item(self, index: int, out: Any) -> dict:
        """The object of choice ``index``'s finished output."""
        if out.finish_reason == "length":
            finish = {"type": "length", "length": out.completion_tokens}
        elif out.finish_reason == "abort":
            finish = {"type": "abort"}
        else:
            finish = {"type": "stop", "matched": None}
        meta = {"id": self.rids[index], "finish_reason": finish, "prompt_tokens": out.prompt_tokens,
                "completion_tokens": out.completion_tokens,
                "completion_tokens_wo_jump_forward": out.completion_tokens_wo_jump_forward,
                "jump_forward_tokens": out.jump_forward_tokens, "cached_tokens": out.cached_prompt_tokens,
                "e2e_latency": round(time.perf_counter() - self.start, 6), **self.input_fields(out),
                **self.logprob_fields(out.logprobs)}
        return {"text": out.text, "output_ids": list(out.token_ids), "meta_info": meta}

    def full(self, outs: list) -> Any:
        items = [self.item(i, out) for i, out in enumerate(outs)]
        return items[0] if self.single else items


async def generate_sse(group: Any, buffered: list, renderer: GenerateRenderer) -> AsyncIterator[str]:
    """SGLang's stream: cumulative text per choice, its final object last."""
    texts = [""] * group.num_choices
    entries: list[list] = [[] for _ in range(group.num_choices)]
    async for index, event in events_of(group, buffered):
        out = event.output
        if out is not None and out.finish_reason == "error":
            yield data_line({"error": {"message": out.error or "the request failed", "index": index}})
            break
        if out is not None:
            yield data_line({**renderer.item(index, out), "index": index})
            continue
        if not event.delta:
            continue
        texts[index] += event.delta
        entries[index] += event.logprobs
        meta = {"id": renderer.rids[index], "finish_reason": None, **renderer.logprob_fields(entries[index])}
        yield data_line({"text": texts[index], "meta_info": meta, "index": index})
    yield "data: [DONE]\n\n"


async def create_generate(body: GenerateRequest, http: HttpRequest, engine: AsyncLLM) -> Any:
    """Answer one ``/generate`` request (see :func:`serve_completion`).

    Raises
    ------
    ValueError
        A refused field or an inconsistent value (the app answers 400 naming
        the field).
    """
    prompts = body.prompts()
    pairs = body.params_per_prompt(len(prompts), engine.llm.stop_token_ids)
    params = [p for p, _ in pairs]
    fields = {f for _, f in pairs if f is not None}
    rids = [rid for rid, sp in zip(body.rids(len(prompts)), params) for _ in range(sp.n)]
    renderer = GenerateRenderer(rids, params[0].logprobs, body.return_text_in_logprobs,
                                engine.llm.grammar.token_text_bytes if body.return_logprob else None,
                                single=not body.is_batch and params[0].n == 1)
    stream_body = None
    if body.stream:
        stream_body = lambda group, buffered: generate_sse(group, buffered, renderer)  # noqa: E731
    return await serve_completion(http, engine, prompts, params, chat=False,
                                  grammar_field=fields.pop() if len(fields) == 1 else None,
                                  renderer=renderer, stream_body=stream_body)


def model_info(llm: Any) -> dict:
    """SGLang's ``GET /get_model_info`` of an :class:`~leapgen.engine.LLM`:
    ``model_path`` (the folder the weights were read from: SGLang's frontend
    picks its chat template by matching it), ``tokenizer_path``,
    ``is_generation``, ``preferred_sampling_params``, ``weight_version``,
    ``has_image_understanding``, ``has_audio_understanding``, ``model_type``,
    ``architectures``."""
    loaded = llm.loaded
    config = getattr(loaded.model, "config", None)
    return {"model_path": loaded.path, "tokenizer_path": loaded.path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default", "has_image_understanding": False,
            "has_audio_understanding": False, "model_type": getattr(config, "model_type", None),
            "architectures": getattr(config, "architectures", None)}
