"""OpenAI's Responses API request, ``POST /v1/responses``, under the policy of
:mod:`leapgen.server.protocol`: strict types, unknown fields refused, every
field of the SDK's ``ResponseCreateParams`` honoured, informational, accepted
only at its no-op default, or refused with a 400 that names it
(``docs/server_fields.md``).

- ``input``: a string (one user message) or a list of message items, each
  ``{"role", "content"}`` (``EasyInputMessage``; ``type: "message"`` optional)
  with ``content`` a string or ``input_text`` / ``output_text`` parts
  (joined); other item types (function calls, reasoning, ...) and other parts
  (images, files, refusals) are refused by name. ``instructions`` is a system
  message before them. The conversation goes through the chat template as a
  chat completion's does.
- ``text.format``: ``text``, ``json_object`` (a JSON object) or
  ``json_schema`` (``schema``; ``strict: false`` = the specification's
  ``additionalProperties``, as on chat), mapped by
  :func:`leapgen.server.constraints.grammar_params`.
- ``include: ["message.output_text.logprobs"]`` with ``top_logprobs``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from leapgen.server.constraints import Constraint, JsonLayout, RequestRefused, grammar_params, not_supported
from leapgen.server.protocol import MAX_TOP_LOGPROBS, StrictModel

#: The one ``include`` value served.
INCLUDE_LOGPROBS = "message.output_text.logprobs"
_TOOLS_WHY = "tool calling is not served on /v1/responses"
_NOTHING_STORED = "responses are not stored"


class InputPart(StrictModel):
    """One content part of an input message: ``input_text`` or ``output_text`` (a replayed assistant
    message's; its ``annotations`` and ``logprobs`` are informational)."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: str | None = None
    annotations: list | None = None
    logprobs: list | None = None

    def text_of(self, where: str) -> str:
        """The part's text.

        Raises
        ------
        RequestRefused
            A part that is not text (``input_image``, ``input_file``,
            ``refusal``...), a text part without ``text``, or one with a field
            not served (``prompt_cache_breakpoint``...).
        """
        if self.type not in ("input_text", "output_text"):
            raise not_supported(where, f"content parts of type {self.type!r}: input_text and output_text only")
        for name in sorted(self.model_extra or {}):
            raise not_supported(f"{where}.{name}", "not served on text parts")
        if self.text is None:
            raise RequestRefused(f"{where}.text is required", param=f"{where}.text")
        return self.text


class InputItem(StrictModel):
    """One item of ``input``: a message (``EasyInputMessage``, ``Message``, or
    a replayed output message, whose ``id``, ``status`` and ``phase`` are
    informational). Other item types are refused by name."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str = "message"
    role: Literal["user", "assistant", "system", "developer"] | None = None
    content: str | list[InputPart] | None = None
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    phase: Literal["commentary", "final_answer"] | None = None

    def message(self, where: str) -> dict:
        """The item as the engine's conversation takes it (``role``, ``content``).

        Raises
        ------
        RequestRefused
            Not a message, a field a message does not have, no role or
            content, or a content part that is not text.
        """
        if self.type != "message":
            why = _TOOLS_WHY if "call" in self.type or "tool" in self.type else "messages only"
            raise not_supported(where, f"input items of type {self.type!r}: {why}")
        for name in sorted(self.model_extra or {}):
            raise RequestRefused(f"unknown field: {where}.{name} (not a field of a message item)",
                                 param=f"{where}.{name}")
        for name in ("role", "content"):
            if getattr(self, name) is None:
                raise RequestRefused(f"{where}.{name} is required", param=f"{where}.{name}")
        if isinstance(self.content, str):
            text = self.content
        else:
            text = "".join(p.text_of(f"{where}.content[{j}]") for j, p in enumerate(self.content))
        return {"role": self.role, "content": text}


class TextFormat(StrictModel):
    """``text.format``: ``text``, ``json_object`` or ``json_schema``."""

    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema_: dict | None = Field(default=None, alias="schema")
    description: str | None = None
    strict: bool | None = None

    def constraint(self) -> Constraint | None:
        """The constraint it asks for (None for ``text``).

        Raises
        ------
        RequestRefused
            ``json_schema`` without a ``schema``, or schema fields on another type.
        """
        if self.type == "json_schema":
            if self.schema_ is None:
                raise RequestRefused("text.format.schema is required for type json_schema",
                                     param="text.format.schema")
            return Constraint("json_schema", self.schema_, "text.format.schema")
        for name in ("name", "schema_", "description", "strict"):
            if getattr(self, name) is not None:
                field = name.rstrip("_")
                raise RequestRefused(f"text.format.{field} needs type json_schema", param=f"text.format.{field}")
        return Constraint("json_object", True, "text.format") if self.type == "json_object" else None

    def echo(self) -> dict:
        """The format as the response object repeats it."""
        if self.type != "json_schema":
            return {"type": self.type}
        return {"type": "json_schema", "name": self.name or "response", "schema": self.schema_,
                "description": self.description, "strict": self.strict}


class TextConfig(StrictModel):
    """``text``."""

    format: TextFormat | None = None
    verbosity: str | None = None

    _at_default = {"verbosity": ((None, "medium"), "the model has no verbosity setting")}


class ResponsesRequest(StrictModel):
    """``POST /v1/responses``."""

    model: str = "default"
    input: str | list[InputItem]
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    stream: bool | None = None
    stream_options: dict | None = None
    text: TextConfig | None = None
    include: list[str] | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    # informational: accepted with any value, no effect on the output
    metadata: dict[str, str] | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    user: str | None = None
    # accepted at their default only
    background: bool | None = None
    store: bool | None = None
    parallel_tool_calls: bool | None = None
    tools: list | None = None
    tool_choice: Any = None
    truncation: str | None = None
    service_tier: str | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict | None = None
    context_management: list | None = None
    # refused
    reasoning: Any = None
    conversation: Any = None
    previous_response_id: Any = None
    prompt: Any = None
    max_tool_calls: Any = None
    background_options: Any = None
    moderation: Any = None
    access_programs: Any = None
    image: Any = None

    _at_default = {
        "stream_options": ((None, {}, {"include_obfuscation": False}), "stream events carry no obfuscation "
                           "padding"),
        "background": ((None, False), "responses run in the foreground"),
        "store": ((None, False), _NOTHING_STORED),
        "parallel_tool_calls": ((None, True), _TOOLS_WHY),
        "tools": ((None, []), _TOOLS_WHY),
        "tool_choice": ((None, "none"), _TOOLS_WHY),
        "truncation": ((None, "disabled"), "an input longer than the context is refused"),
        "service_tier": ((None, "auto", "default"), "one service tier"),
        "prompt_cache_retention": ((None, "in_memory"), "the prompt cache lives in memory"),
        "prompt_cache_options": ((None, {}, {"mode": "implicit"}), "the prompt cache is implicit"),
        "context_management": ((None, []), "no context compaction"),
    }
    _refused = {"reasoning": "the model has no reasoning setting", "conversation": "no stored conversations",
                "previous_response_id": _NOTHING_STORED, "prompt": "no stored prompt templates",
                "max_tool_calls": _TOOLS_WHY, "background_options": "responses run in the foreground",
                "moderation": "no moderation", "access_programs": "no access programs",
                "image": "no image inputs"}

    def messages(self) -> list[dict]:
        """The conversation (``instructions`` first, as a system message).

        Raises
        ------
        RequestRefused
            An empty ``input`` list, or an item or part that is not served.
        """
        head = [{"role": "system", "content": self.instructions}] if self.instructions is not None else []
        if isinstance(self.input, str):
            return head + [{"role": "user", "content": self.input}]
        if not self.input:
            raise RequestRefused("input is an empty list", param="input")
        return head + [item.message(f"input[{i}]") for i, item in enumerate(self.input)]

    def num_logprobs(self) -> int | None:
        """Alternatives per token with ``include: ["message.output_text.logprobs"]``, else None.

        Raises
        ------
        RequestRefused
            Another ``include`` value, or ``top_logprobs`` without that include.
        """
        wanted = False
        for i, value in enumerate(self.include or ()):
            if value != INCLUDE_LOGPROBS:
                raise not_supported(f"include[{i}]", f"{value!r}: only {INCLUDE_LOGPROBS!r} is served")
            wanted = True
        if not wanted:
            if self.top_logprobs:
                raise RequestRefused(f"top_logprobs needs include: [{INCLUDE_LOGPROBS!r}]", param="top_logprobs")
            return None
        return self.top_logprobs or 0

    def format(self) -> TextFormat | None:
        return self.text.format if self.text is not None else None

    def to_sampling_params(self, default_max_tokens: int) -> tuple[Any, str | None]:
        """The engine's SamplingParams and the field holding the constraint
        (for error messages; None when unconstrained).

        Raises
        ------
        RequestRefused
            A field set to a value leapgen does not honour, or an
            inconsistent one.
        ValueError
            A value SamplingParams rejects.
        """
        from leapgen.engine.sampling_params import SamplingParams

        self.check_policy()
        fmt = self.format()
        constraint = fmt.constraint() if fmt is not None else None
        grammar = grammar_params(constraint, JsonLayout(strict=fmt.strict if fmt is not None else None))
        params = SamplingParams(
            max_tokens=self.max_output_tokens or default_max_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p, logprobs=self.num_logprobs(), **grammar)
        return params, None if constraint is None else constraint.field

    def echo(self) -> dict[str, Any]:
        """The request fields a response object repeats."""
        fmt = self.format()
        return {"instructions": self.instructions, "metadata": self.metadata or {},
                "max_output_tokens": self.max_output_tokens,
                "temperature": 1.0 if self.temperature is None else self.temperature,
                "top_p": 1.0 if self.top_p is None else self.top_p, "top_logprobs": self.top_logprobs or 0,
                "text": {"format": fmt.echo() if fmt is not None else {"type": "text"}, "verbosity": "medium"},
                "parallel_tool_calls": True, "tool_choice": "none", "tools": [], "truncation": "disabled",
                "background": False, "previous_response_id": None, "reasoning": None, "service_tier": "default",
                "user": self.user, "safety_identifier": self.safety_identifier,
                "prompt_cache_key": self.prompt_cache_key}

