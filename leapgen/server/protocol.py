"""The OpenAI-compatible wire format and its policy: every request field is
honoured, accepted only at its no-op default, or refused with a 400 that
names it. Nothing is silently ignored.

- Models are strict (pydantic ``strict=True``, as OpenAI's API is typed):
  ``max_tokens: true`` and ``stream: "yes"`` are 400s; an unknown field is a
  400 ``unknown field: <name>`` (``extra="forbid"``).
- A documented field leapgen does not implement is declared with its no-op
  values (``_at_default``) or as refused (``_refused``, any value but
  ``null``); :meth:`StrictModel.check_policy` answers ``not supported:
  <field> (why)`` otherwise.
- Constraints, whatever field spells them (``response_format``, vLLM's
  ``structured_outputs`` and ``guided_*``, leapgen's ``regex`` / ``ebnf`` /
  ``json_schema``), go through :mod:`leapgen.server.constraints`: at most one.

The table of every field is ``docs/server_fields.md``. ``usage`` carries the
standard counts plus ``jump_forward_tokens`` (completion tokens appended by
jump-forward, never sampled; see :mod:`leapgen.engine.request`) and SGLang's
``completion_tokens_wo_jump_forward`` (the sampled ones).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, ClassVar, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

from leapgen.server.constraints import Constraint, JsonLayout, RequestRefused, grammar_params, not_supported, single

#: Most samples per request (vLLM's bound is an environment variable; this one keeps a request's
#: Python objects and KV reservations bounded).
MAX_N = 128
#: Most alternatives per token in ``top_logprobs`` / ``logprobs`` (OpenAI's and vLLM's 20).
MAX_TOP_LOGPROBS = 20
#: vLLM's names of grammar backends -> leapgen's (``guided_decoding_backend``).
BACKEND_ALIASES = {"guidance": "llguidance", "outlines": "outlines-core", "xgrammar": "xgrammar",
                   "leapgen": "leapgen", "llguidance": "llguidance", "outlines-core": "outlines-core"}
class StrictModel(BaseModel):
    """A request object: strict types, unknown fields refused, and a policy
    for the fields leapgen accepts only at their no-op default or refuses."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    #: field -> (its no-op values, why other values are not supported)
    _at_default: ClassVar[dict[str, tuple[tuple, str]]] = {}
    #: field -> why any value but null is refused
    _refused: ClassVar[dict[str, str]] = {}

    def check_policy(self, prefix: str = "") -> None:
        """Raise the refusal of the first field set to a value leapgen does
        not honour (nested objects included; ``prefix`` names where this one is).

        Raises
        ------
        RequestRefused
            ``not supported: <field> (why)``.
        """
        for name, (allowed, why) in self._at_default.items():
            value = getattr(self, name)
            if value not in allowed:
                raise not_supported(prefix + name, f"leapgen accepts only {_values(allowed)}; {why}")
        for name, why in self._refused.items():
            if getattr(self, name) is not None:
                raise not_supported(prefix + name, why)
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, StrictModel):
                value.check_policy(f"{prefix}{name}.")
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, StrictModel):
                        item.check_policy(f"{prefix}{name}[{i}].")


def with_eos(stop_token_ids: list[int] | None, eos_token_ids: Iterable[int]) -> tuple[int, ...] | None:
    """SamplingParams' ``stop_token_ids`` (which replace the model's) of a
    request's (which add to them, in vLLM and SGLang); None when none are given."""
    if not stop_token_ids:
        return None
    return tuple(sorted(set(eos_token_ids) | set(stop_token_ids)))


def _values(allowed: tuple) -> str:
    import json

    return " or ".join(json.dumps(a) for a in allowed)


# ---------------------------------------------------------------------------------------- nested objects


class JsonSchemaFormat(StrictModel):
    """``response_format.json_schema``."""

    name: str = "response"
    description: str | None = None
    schema_: dict | bool | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(StrictModel):
    """``response_format``: ``text``, ``json_object`` (a JSON object, as
    OpenAI defines it), ``json_schema``, or vLLM's ``structural_tag`` (the
    ``format`` form or the legacy ``structures`` / ``triggers`` one)."""

    type: Literal["text", "json_object", "json_schema", "structural_tag"]
    json_schema: JsonSchemaFormat | None = None
    # vLLM's structural_tag (xgrammar's format)
    structures: Any = None
    triggers: Any = None
    format: Any = None

    def constraint(self) -> Constraint | None:
        tag_fields = {k: v for k, v in (("structures", self.structures), ("triggers", self.triggers),
                                        ("format", self.format)) if v is not None}
        if self.type == "structural_tag":
            if self.json_schema is not None:
                raise RequestRefused("response_format.json_schema needs type json_schema", param="response_format.type")
            if not tag_fields:
                raise RequestRefused("response_format of type structural_tag needs format (or structures and "
                                     "triggers)", param="response_format.format")
            return Constraint("structural_tag", {"type": "structural_tag", **tag_fields}, "response_format")
        if tag_fields:
            name = next(iter(tag_fields))
            raise RequestRefused(f"response_format.{name} needs type structural_tag", param="response_format.type")
        if self.type == "json_object":
            return Constraint("json_object", True, "response_format")
        if self.type == "json_schema":
            if self.json_schema is None or self.json_schema.schema_ is None:
                raise RequestRefused("response_format.json_schema.schema is required for type json_schema",
                                     param="response_format.json_schema.schema")
            return Constraint("json_schema", self.json_schema.schema_, "response_format.json_schema.schema")
        if self.json_schema is not None:
            raise RequestRefused("response_format.json_schema needs type json_schema", param="response_format.type")
        return None


class StreamOptions(StrictModel):
    include_usage: bool = False
    include_obfuscation: bool | None = None

    _at_default = {"include_obfuscation": ((None, False), "stream chunks carry no obfuscation padding")}


class StructuredOutputs(StrictModel):
    """vLLM's ``structured_outputs`` (its ``StructuredOutputsParams``)."""

    json_: dict | bool | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    structural_tag: Any = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None

    def constraints(self) -> list[Constraint]:
        out = []
        for kind, name, value in (("json_schema", "json", self.json_), ("regex", "regex", self.regex),
                                  ("choice", "choice", self.choice), ("grammar", "grammar", self.grammar),
                                  ("structural_tag", "structural_tag", self.structural_tag)):
            if value is not None:
                out.append(Constraint(kind, value, f"structured_outputs.{name}"))
        if self.json_object:
            out.append(Constraint("json_object", True, "structured_outputs.json_object"))
        return out

    def layout_fields(self) -> tuple[str, ...]:
        names = [n for n in ("disable_any_whitespace", "disable_additional_properties") if getattr(self, n)]
        names += ["whitespace_pattern"] if self.whitespace_pattern is not None else []
        return tuple(f"structured_outputs.{n}" for n in names)


class SamplingRequest(StrictModel):
    """Fields common to chat and text completions (OpenAI's, vLLM's, leapgen's)."""

    model: str = "default"
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = -1
    seed: int | None = Field(default=None, ge=0, lt=2 ** 64)
    n: int = Field(default=1, ge=1, le=MAX_N)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None
    # leapgen's (and SGLang's) extra constraint fields
    regex: str | None = None
    ebnf: str | None = None
    json_schema: dict | bool | str | None = None
    jump_forward: bool = True
    # vLLM's
    structured_outputs: StructuredOutputs | None = None
    guided_json: dict | bool | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    guided_whitespace_pattern: str | None = None
    guided_decoding_backend: str | None = None
    structural_tag: Any = None
    repetition_penalty: float = 1.0
    min_p: float = 0.0
    min_tokens: int = 0
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    # OpenAI's, accepted at their default only
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    user: str | None = None

    _at_default = {
        "frequency_penalty": ((None, 0.0), "no repetition penalties"),
        "presence_penalty": ((None, 0.0), "no repetition penalties"),
        "logit_bias": ((None, {}), "no logit bias"),
        "repetition_penalty": ((1.0,), "no repetition penalties"),
        "min_p": ((0.0,), "no min-p sampling"),
        "min_tokens": ((0,), "no minimum length"),
        "ignore_eos": ((False,), "the stop tokens always end a completion"),
        "skip_special_tokens": ((True,), "special tokens are always left out of the text"),
        "spaces_between_special_tokens": ((True,), "special tokens are left out of the text"),
        "include_stop_str_in_output": ((False,), "a stop string is cut from the text"),
    }
    def constraints(self) -> list[Constraint]:
        """Every constraint the request gives (:func:`single` keeps one)."""
        out = []
        if self.response_format is not None and (c := self.response_format.constraint()) is not None:
            out.append(c)
        if self.structured_outputs is not None:
            out += self.structured_outputs.constraints()
        for kind, name in (("regex", "regex"), ("grammar", "ebnf"), ("json_schema", "json_schema"),
                           ("json_schema", "guided_json"), ("regex", "guided_regex"), ("choice", "guided_choice"),
                           ("grammar", "guided_grammar"), ("structural_tag", "structural_tag")):
            if getattr(self, name) is not None:
                out.append(Constraint(kind, getattr(self, name), name))
        return out

    def json_layout(self) -> JsonLayout:
        so = self.structured_outputs
        fields = so.layout_fields() if so is not None else ()
        pattern = so.whitespace_pattern if so is not None else None
        if self.guided_whitespace_pattern is not None:
            if pattern is not None:
                raise RequestRefused("give structured_outputs.whitespace_pattern or guided_whitespace_pattern, "
                                     "not both", param="guided_whitespace_pattern")
            pattern, fields = self.guided_whitespace_pattern, fields + ("guided_whitespace_pattern",)
        fmt = self.response_format
        strict = fmt.json_schema.strict if fmt is not None and fmt.json_schema is not None else None
        return JsonLayout(disable_any_whitespace=bool(so and so.disable_any_whitespace), whitespace_pattern=pattern,
                          strict=strict, fields=fields)

    def check_backend(self, backend: str) -> None:
        """Refuse a ``guided_decoding_backend`` other than the server's."""
        asked = self.guided_decoding_backend
        if asked is not None and asked != "auto" and BACKEND_ALIASES.get(asked.split(":")[0]) != backend:
            raise not_supported("guided_decoding_backend", f"this server compiles grammars with {backend}; "
                                f"got {asked!r}")

    def to_sampling_params(self, default_max_tokens: int, *, backend: str = "leapgen", logprobs: int | None = None,
                           max_tokens: int | None = None, eos_token_ids: Iterable[int] = ()) -> tuple[Any, str | None]:
        """The engine's SamplingParams and the field holding the constraint
        (for error messages; None when unconstrained).

        Parameters
        ----------
        default_max_tokens : int
            When the request gives none.
        backend : str
            The server's grammar backend (``guided_decoding_backend`` must
            name it, or ``auto``).
        logprobs : int or None
            Alternatives per token to report (None: no logprobs).
        max_tokens : int or None
            Overrides ``max_tokens`` (chat's ``max_completion_tokens``).
        eos_token_ids : iterable of int
            The model's stop tokens: ``stop_token_ids`` adds to them (vLLM's
            and SGLang's meaning).

        Raises
        ------
        RequestRefused
            A field set to a value leapgen does not honour, several
            constraints, or an inconsistent value.
        ValueError
            A value SamplingParams rejects.
        """
        from leapgen.engine.sampling_params import SamplingParams

        self.check_policy()
        self.check_backend(backend)
        constraint = single(self.constraints())
        grammar = grammar_params(constraint, self.json_layout())
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        params = SamplingParams(
            max_tokens=max_tokens or self.max_tokens or default_max_tokens, temperature=self.temperature,
            top_p=self.top_p, top_k=-1 if self.top_k == 0 else self.top_k, seed=self.seed, stop=tuple(stop),
            stop_token_ids=with_eos(self.stop_token_ids, eos_token_ids), jump_forward=self.jump_forward, n=self.n,
            logprobs=logprobs, **grammar)
        return params, None if constraint is None else constraint.field


class CompletionRequest(SamplingRequest):
    """``POST /v1/completions``: ``prompt`` is continued raw (no chat
    template): a string, token ids, or a batch of either (each prompt gets
    ``n`` choices, prompt-major)."""

    prompt: str | list[str] | list[int] | list[list[int]]
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    best_of: int | None = None
    suffix: str | None = None

    _at_default = {**SamplingRequest._at_default,
                   "best_of": ((None, 1), "one completion is generated per choice"),
                   "suffix": ((None, ""), "no insertion (fill-in-the-middle)")}

    def prompts(self) -> list[str | list[int]]:
        """The prompts of the batch (one for a single prompt).

        Raises
        ------
        RequestRefused
            An empty batch or an empty token list; ``echo`` with ``logprobs``
            (prompt log-probabilities are served on ``/generate`` only).
        """
        if self.echo and self.logprobs is not None:
            raise not_supported("echo", "with logprobs: prompt log-probabilities are served on /generate only "
                                "(logprob_start_len)")
        prompt = self.prompt
        if isinstance(prompt, str):
            return [prompt]
        if not prompt:
            raise RequestRefused("prompt is an empty list", param="prompt")
        if all(isinstance(p, int) for p in prompt):
            return [list(prompt)]
        if any(isinstance(p, list) and not p for p in prompt):
            raise RequestRefused("prompt holds an empty token list", param="prompt")
        return list(prompt)


# ---------------------------------------------------------------------------------------- responses


def make_id(prefix: str) -> str:
    """A fresh response id (``chatcmpl-...``, ``cmpl-...``)."""
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    """Unix time, seconds (the ``created`` field)."""
    return int(time.time())


def usage_of(outs: Any) -> dict:
    """The ``usage`` object of finished :class:`RequestOutput` s (one, or the
    samples of one prompt or of a batch: prompt tokens counted once per
    distinct prompt, completion tokens summed)."""
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    prompt = sum(o.prompt_tokens for o in outs if o.index == 0)
    completion = sum(o.completion_tokens for o in outs)
    jump = sum(o.jump_forward_tokens for o in outs)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "jump_forward_tokens": jump, "completion_tokens_wo_jump_forward": completion - jump}


def finish_reason_of(out: Any) -> str:
    """The OpenAI ``finish_reason`` of an engine finish reason (a complete
    grammar counts as ``stop``)."""
    return "length" if out.finish_reason == "length" else "stop"


def error_body(message: str, *, type_: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict:
    """An OpenAI-shaped error object."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
