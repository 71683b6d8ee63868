"""The OpenAI-compatible wire format (pydantic models) and its mapping onto
:class:`leapgen.engine.SamplingParams`.

Grammar fields, as OpenAI, SGLang and vLLM accept them:

- ``response_format``: ``{"type": "text"}``, ``{"type": "json_object"}`` (any
  JSON value, leapgen's builtin JSON grammar) or ``{"type": "json_schema",
  "json_schema": {"name", "schema", "strict"}}``;
- extra body fields ``regex`` (ECMAScript, whole output), ``ebnf`` (GBNF,
  root rule ``root``) and ``json_schema`` (a schema object or its JSON text);
  ``jump_forward`` (bool, default true) and ``top_k`` are leapgen/SGLang
  extras.

At most one grammar per request. ``usage`` carries the standard token counts
plus ``jump_forward_tokens``: completion tokens that were appended by
jump-forward and never sampled (see :mod:`leapgen.engine.request`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class JsonSchemaFormat(BaseModel):
    """``response_format.json_schema``."""

    name: str = "response"
    description: str | None = None
    schema_: dict | bool | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    """``response_format``."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class StreamOptions(BaseModel):
    include_usage: bool = False


class _SamplingRequest(BaseModel):
    """Fields common to chat and text completions."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    model: str = "default"
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = -1
    seed: int | None = Field(default=None, ge=0, lt=2 ** 64)
    n: int = Field(default=1, ge=1, le=1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None
    regex: str | None = None
    ebnf: str | None = None
    json_schema: dict | bool | str | None = None
    jump_forward: bool = True

    def to_sampling_params(self, default_max_tokens: int) -> tuple[Any, str | None]:
        """The engine's SamplingParams, and the request field holding the
        grammar (for error messages; None when unconstrained).

        Raises
        ------
        ValueError
            If several grammars are given or a value is out of range.
        """
        from leapgen.engine.sampling_params import SamplingParams

        grammar: dict[str, Any] = {}
        field = None
        fmt = self.response_format
        if fmt is not None and fmt.type == "json_object":
            grammar["json_object"], field = True, "response_format"
        elif fmt is not None and fmt.type == "json_schema":
            if fmt.json_schema is None or fmt.json_schema.schema_ is None:
                raise ValueError("response_format.json_schema.schema is required for type json_schema")
            grammar["json_schema"], field = fmt.json_schema.schema_, "response_format.json_schema.schema"
            if fmt.json_schema.strict is False:
                grammar["json_strict"] = False
        for name in ("regex", "ebnf", "json_schema"):
            if getattr(self, name) is not None:
                if field is not None:
                    raise ValueError(f"give at most one grammar; got {field} and {name}")
                grammar[name], field = getattr(self, name), name
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        params = SamplingParams(
            max_tokens=self.max_tokens or default_max_tokens, temperature=self.temperature, top_p=self.top_p,
            top_k=self.top_k, seed=self.seed, stop=tuple(stop), jump_forward=self.jump_forward, **grammar)
        return params, field


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str


class ChatCompletionRequest(_SamplingRequest):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


class CompletionRequest(_SamplingRequest):
    """``POST /v1/completions`` (``prompt``: one string, continued raw)."""

    prompt: str


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    jump_forward_tokens: int


def make_id(prefix: str) -> str:
    """A fresh response id (``chatcmpl-...``, ``cmpl-...``)."""
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    """Unix time, seconds (the ``created`` field)."""
    return int(time.time())


def usage_of(out: Any) -> dict:
    """The ``usage`` object of a finished :class:`RequestOutput`."""
    return Usage(prompt_tokens=out.prompt_tokens, completion_tokens=out.completion_tokens,
                 total_tokens=out.prompt_tokens + out.completion_tokens,
                 jump_forward_tokens=out.jump_forward_tokens).model_dump()


def finish_reason_of(out: Any) -> str:
    """The OpenAI ``finish_reason`` of an engine finish reason (a complete
    grammar counts as ``stop``)."""
    return "length" if out.finish_reason == "length" else "stop"


def error_body(message: str, *, type_: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict:
    """An OpenAI-shaped error object."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
