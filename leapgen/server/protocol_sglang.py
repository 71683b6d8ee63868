"""SGLang's native request, ``POST /generate``, under the same policy as the
OpenAI-compatible ones (:mod:`leapgen.server.protocol`): strict types,
unknown fields refused, fields leapgen does not implement accepted only at
their default.

Request (SGLang's ``GenerateReqInput``): ``text`` or ``input_ids`` (one
prompt, or a batch: a list of strings / of token-id lists), ``sampling_params``
(one object, or one per batch item), ``stream``, ``return_logprob`` with
``top_logprobs_num``, ``return_text_in_logprobs`` and ``logprob_start_len``
(prompt log-probabilities), ``rid``. ``max_new_tokens: 0`` prefills the
prompt only (what SGLang's frontend sends for a ``select``).

Response (SGLang's shape): ``{"text", "output_ids", "meta_info": {"id",
"finish_reason": {"type": "stop" | "length" | "abort", ...}, "prompt_tokens",
"completion_tokens", "completion_tokens_wo_jump_forward",
"jump_forward_tokens", "cached_tokens", "e2e_latency"[, "input_token_logprobs",
"output_token_logprobs", "input_top_logprobs", "output_top_logprobs"]}}``; a list of them for a batch or ``n > 1``
(prompt-major: prompt 0's ``n`` samples, then prompt 1's...), each with its
``index`` in that list when streamed.
"""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import Field

from leapgen.server.constraints import Constraint, RequestRefused, grammar_params, single
from leapgen.server.protocol import MAX_N, MAX_TOP_LOGPROBS, StrictModel, with_eos

#: SGLang's default ``max_new_tokens``.
DEFAULT_MAX_NEW_TOKENS = 128


class SglSamplingParams(StrictModel):
    """SGLang's ``sampling_params``."""

    max_new_tokens: int | None = Field(default=None, ge=0)
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = -1
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    n: int = Field(default=1, ge=1, le=MAX_N)
    sampling_seed: int | None = Field(default=None, ge=0, lt=2 ** 64)
    json_schema: dict | bool | str | None = None
    regex: str | None = None
    ebnf: str | None = None
    structural_tag: Any = None
    jump_forward: bool = True
    # accepted at their default only
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_new_tokens: int = 0
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False
    stop_regex: str | list[str] | None = None
    logit_bias: dict[str, float] | None = None
    custom_params: Any = None

    _at_default = {
        "min_p": ((0.0,), "no min-p sampling"),
        "frequency_penalty": ((0.0,), "no repetition penalties"),
        "presence_penalty": ((0.0,), "no repetition penalties"),
        "repetition_penalty": ((1.0,), "no repetition penalties"),
        "min_new_tokens": ((0,), "no minimum length"),
        "ignore_eos": ((False,), "the stop tokens always end a completion"),
        "skip_special_tokens": ((True,), "special tokens are always left out of the text"),
        "spaces_between_special_tokens": ((True,), "special tokens are left out of the text"),
        "no_stop_trim": ((False,), "a stop string is cut from the text"),
        "stop_regex": ((None, [], ""), "stop strings only, not regexes"),
        "logit_bias": ((None, {}), "no logit bias"),
    }
    _refused = {"custom_params": "no custom logit processors"}

    def to_sampling_params(self, where: str, *, logprobs: int | None, prompt_logprobs: int | None = None,
                           prompt_start: int = 0, eos_token_ids: Iterable[int] = ()) -> tuple[Any, str | None]:
        """The engine's SamplingParams and the constraint's field (``where``
        prefixes field names in errors; ``stop_token_ids`` add to
        ``eos_token_ids``, the model's; ``prompt_logprobs`` from
        ``prompt_start`` on: the request's prompt log-probabilities).

        Raises
        ------
        RequestRefused
            A refused field or value, several constraints; ``max_new_tokens:
            0`` with a constraint or ``n > 1``.
        ValueError
            A value SamplingParams rejects.
        """
        from leapgen.engine.sampling_params import SamplingParams

        self.check_policy(f"{where}.")
        found = [Constraint(kind, getattr(self, name), f"{where}.{name}")
                 for kind, name in (("json_schema", "json_schema"), ("regex", "regex"), ("grammar", "ebnf"),
                                    ("structural_tag", "structural_tag")) if getattr(self, name) is not None]
        constraint = single(found)
        grammar = grammar_params(constraint)
        if self.max_new_tokens == 0 and (constraint is not None or self.n != 1):
            raise RequestRefused(f"{where}.max_new_tokens 0 prefills the prompt only: it takes no constraint and "
                                 "n 1", param=f"{where}.max_new_tokens")
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        params = SamplingParams(
            max_tokens=DEFAULT_MAX_NEW_TOKENS if self.max_new_tokens is None else self.max_new_tokens,
            temperature=self.temperature, top_p=self.top_p,
            top_k=-1 if self.top_k == 0 else self.top_k, seed=self.sampling_seed, stop=tuple(stop),
            stop_token_ids=with_eos(self.stop_token_ids, eos_token_ids),
            jump_forward=self.jump_forward, n=self.n, logprobs=logprobs, prompt_logprobs=prompt_logprobs,
            prompt_logprobs_start=prompt_start if prompt_logprobs is not None else 0, **grammar)
        return params, None if constraint is None else constraint.field


class GenerateRequest(StrictModel):
    """``POST /generate`` (SGLang's native API)."""

    text: str | list[str] | None = None
    input_ids: list[int] | list[list[int]] | None = None
    sampling_params: SglSamplingParams | list[SglSamplingParams] | None = None
    stream: bool = False
    return_logprob: bool = False
    top_logprobs_num: int = Field(default=0, ge=0, le=MAX_TOP_LOGPROBS)
    return_text_in_logprobs: bool = False
    logprob_start_len: int = Field(default=-1, ge=-1)
    rid: str | list[str] | None = None
    # accepted at their default only
    token_ids_logprob: Any = None
    return_hidden_states: bool = False
    log_metrics: bool = True
    # refused
    input_embeds: Any = None
    image_data: Any = None
    video_data: Any = None
    audio_data: Any = None
    lora_path: Any = None
    session_params: Any = None
    custom_logit_processor: Any = None

    _at_default = {
        "return_hidden_states": ((False,), "hidden states are not returned"),
        "log_metrics": ((True,), "every request is counted in /metrics"),
    }
    _refused = {"token_ids_logprob": "no per-token-id logprobs", "input_embeds": "no embedding inputs",
                "image_data": "no images", "video_data": "no video", "audio_data": "no audio",
                "lora_path": "no LoRA adapters", "session_params": "no sessions",
                "custom_logit_processor": "no custom logit processors"}

    def prompts(self) -> list[str | list[int]]:
        """The batch's prompts (one for a single prompt).

        Raises
        ------
        RequestRefused
            Neither or both of ``text`` and ``input_ids``; an empty batch or
            token list.
        """
        self.check_policy()
        if (self.text is None) == (self.input_ids is None):
            raise RequestRefused("give exactly one of text and input_ids", param="text")
        if self.text is not None:
            prompts: list = [self.text] if isinstance(self.text, str) else list(self.text)
        elif self.input_ids and all(isinstance(t, int) for t in self.input_ids):
            prompts = [list(self.input_ids)]
        else:
            prompts = [list(p) for p in self.input_ids]
        if not prompts or any(isinstance(p, list) and not p for p in prompts):
            raise RequestRefused("an empty prompt batch or token list", param="input_ids" if self.text is None
                                 else "text")
        return prompts

    @property
    def is_batch(self) -> bool:
        """Whether the prompts came as a list (the response is then a list)."""
        return isinstance(self.text, list) or (isinstance(self.input_ids, list) and bool(self.input_ids)
                                               and isinstance(self.input_ids[0], list))

    def params_per_prompt(self, count: int, eos_token_ids: Iterable[int] = ()) -> list[tuple[Any, str | None]]:
        """(SamplingParams, constraint field) for each of ``count`` prompts
        (``eos_token_ids``: the model's stop tokens).

        Raises
        ------
        RequestRefused, ValueError
            As :meth:`SglSamplingParams.to_sampling_params`; a list of
            ``sampling_params`` whose length is not the batch's.
        """
        logprobs = self.top_logprobs_num if self.return_logprob else None
        for name, default in (("top_logprobs_num", 0), ("logprob_start_len", -1)):
            if getattr(self, name) != default and not self.return_logprob:
                raise RequestRefused(f"{name} needs return_logprob: true", param=name)
        # logprob_start_len -1 (SGLang's default): no prompt token is scored, as SGLang 0.5's scheduler does
        prompt = dict(prompt_logprobs=logprobs, prompt_start=self.logprob_start_len) if (
            logprobs is not None and self.logprob_start_len >= 0) else {}
        given = self.sampling_params if self.sampling_params is not None else SglSamplingParams()
        if isinstance(given, list):
            if len(given) != count:
                raise RequestRefused(f"sampling_params has {len(given)} items for {count} prompts",
                                     param="sampling_params")
            return [sp.to_sampling_params(f"sampling_params[{i}]", logprobs=logprobs, eos_token_ids=eos_token_ids,
                                          **prompt) for i, sp in enumerate(given)]
        return [given.to_sampling_params("sampling_params", logprobs=logprobs, eos_token_ids=eos_token_ids,
                                         **prompt)] * count

    def rids(self, count: int) -> list[str | None]:
        """The request id of each prompt (a string prefix is numbered per item, as SGLang does)."""
        if isinstance(self.rid, list):
            if len(self.rid) != count:
                raise RequestRefused(f"rid has {len(self.rid)} items for {count} prompts", param="rid")
            return list(self.rid)
        if self.rid is None or count == 1:
            return [self.rid] * count
        return [f"{self.rid}_{i}" for i in range(count)]
