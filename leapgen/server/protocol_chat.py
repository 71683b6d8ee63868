"""The chat completion request (``POST /v1/chat/completions``) and its
messages, under :mod:`leapgen.server.protocol`'s policy: every field
honoured, accepted at its no-op default, or refused by name.

Messages are OpenAI's: ``system`` / ``developer`` / ``user`` / ``assistant``
/ ``tool`` roles, ``content`` a string or text parts (null on an assistant
message with ``tool_calls``), earlier tool calls and their results. The tool
fields (``tools``, ``tool_choice``, ``parallel_tool_calls``) and the
reasoning ones (``chat_template_kwargs``, ``max_reasoning_tokens``) are
checked here for what the request alone decides and handed to
:meth:`leapgen.engine.chat.plan.ChatSettings.plan`, which reads the rest.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from leapgen.server.constraints import RequestRefused, not_supported
from leapgen.server.protocol import MAX_TOP_LOGPROBS, SamplingRequest, StrictModel

_FUNCTIONS_WHY = "the deprecated function calling; use tools and tool_choice"
#: The chat template's arguments the server passes itself (not settable through ``chat_template_kwargs``).
_TEMPLATE_RESERVED = frozenset({"add_generation_prompt", "tokenize", "tools", "conversation", "messages",
                                "continue_final_message", "return_dict", "chat_template"})


class TextPart(StrictModel):
    """A message content part; only ``{"type": "text", "text": ...}`` is honoured."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: str | None = None


class FunctionCallParam(StrictModel):
    """An earlier tool call's ``function``: ``name`` and ``arguments`` (JSON text)."""

    name: str
    arguments: str
    # informational: the openai SDK's parsed copy of ``arguments``, sent back with a parsed message
    parsed_arguments: Any = None


class ToolCallParam(StrictModel):
    """An earlier assistant message's tool call."""

    id: str
    type: Literal["function"] = "function"
    function: FunctionCallParam


class ChatMessage(StrictModel):
    """One chat message: ``role`` and ``content`` (a string or text parts,
    joined); an assistant's ``tool_calls`` (then ``content`` may be null) and
    ``reasoning_content``; a tool message's ``tool_call_id``. A ``name`` and
    audio are refused."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    refusal: str | None = None
    audio: Any = None
    function_call: Any = None
    tool_calls: list[ToolCallParam] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None
    # informational: the openai SDK's parsed copy of ``content``, sent back with a parsed message
    parsed: Any = None

    _at_default = {"refusal": ((None,), "a refusal is not replayed into the prompt")}
    _refused = {"name": "the chat template has no participant names", "audio": "no audio",
                "function_call": "the deprecated function calling; use tool_calls"}

    def to_dict(self, where: str) -> dict:
        """The message as the chat template takes it (``where``: its place, for errors).

        Raises
        ------
        RequestRefused
            A field on a role that has none (``tool_calls`` off an assistant
            message...), no content where one is needed, a content part that
            is not text.
        """
        out: dict = {"role": self.role, "content": self.text(where)}
        for field, role in (("tool_calls", "assistant"), ("reasoning_content", "assistant"), ("tool_call_id", "tool")):
            if getattr(self, field) is not None and self.role != role:
                raise RequestRefused(f"{where}.{field} belongs to {role} messages only", param=f"{where}.{field}")
        if self.role == "tool":
            if self.tool_call_id is None:
                raise RequestRefused(f"{where}.tool_call_id is required in a tool message",
                                     param=f"{where}.tool_call_id")
            out["tool_call_id"] = self.tool_call_id
        if self.tool_calls:
            out["tool_calls"] = [{"id": c.id, "type": c.type, "function": {"name": c.function.name,
                                                                          "arguments": c.function.arguments}}
                                 for c in self.tool_calls]
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        if out["content"] is None and not self.tool_calls:
            raise RequestRefused(f"{where}.content is required", param=f"{where}.content")
        return out

    def text(self, where: str) -> str | None:
        """The message's text, text parts joined; None for null content.

        Raises
        ------
        RequestRefused
            A content part that is not text.
        """
        if self.content is None or isinstance(self.content, str):
            return self.content
        texts = []
        for j, part in enumerate(self.content):
            extra = sorted(part.model_extra or {})
            if part.type != "text" or part.text is None or extra:
                kind = part.type if part.type != "text" else f"text with {', '.join(extra) or 'no text'}"
                raise not_supported(f"{where}.content[{j}]", f"content parts of type {kind}: text only")
            texts.append(part.text)
        return "".join(texts)


# ---------------------------------------------------------------------------------------- requests


class ChatCompletionRequest(SamplingRequest):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    # informational: accepted with any value, no effect on the output
    metadata: dict[str, str] | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    # tool calling (OpenAI's) and reasoning (vLLM's)
    tools: list | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    max_reasoning_tokens: int | None = Field(default=None, ge=1)
    thinking_token_budget: int | None = Field(default=None, ge=1)
    # accepted at their default only
    modalities: list[str] | None = None
    service_tier: str | None = None
    store: bool | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict | None = None
    verbosity: str | None = None
    functions: list | None = None
    function_call: Any = None
    # refused
    audio: Any = None
    prediction: Any = None
    reasoning_effort: Any = None
    web_search_options: Any = None
    moderation: Any = None

    _at_default = {
        **SamplingRequest._at_default,
        "modalities": ((None, ["text"]), "text output only"),
        "service_tier": ((None, "auto", "default"), "one service tier"),
        "store": ((None, False), "completions are not stored"),
        "prompt_cache_retention": ((None, "in_memory"), "the prompt cache lives in memory"),
        "prompt_cache_options": ((None, {}, {"mode": "implicit"}), "the prompt cache is implicit"),
        "verbosity": ((None, "medium"), "the model has no verbosity setting"),
        "functions": ((None, []), _FUNCTIONS_WHY),
        "function_call": ((None, "none"), _FUNCTIONS_WHY),
    }
    _refused = {**SamplingRequest._refused, "audio": "no audio output", "prediction": "no predicted outputs",
                "reasoning_effort": "the model has no reasoning setting",
                "web_search_options": "no web search", "moderation": "no moderation"}

    def prompt_messages(self) -> list[dict]:
        """The conversation as the chat template takes it (OpenAI's message dicts)."""
        return [m.to_dict(f"messages[{i}]") for i, m in enumerate(self.messages)]

    def chat_options(self, constraint_field: str | None, *, reasoning: bool) -> dict:
        """The keyword arguments of :meth:`ChatSettings.plan` (tools,
        ``tool_choice``, ``parallel_tool_calls``, template variables, the
        thinking budget).

        Parameters
        ----------
        constraint_field : str or None
            The field of the request's constraint, if any.
        reasoning : bool
            Whether the server has a reasoning parser (``--reasoning-parser``).

        Raises
        ------
        RequestRefused
            Tools that call (``tool_choice`` not ``none``) together with a
            constraint (``constraint_field``); both names of the budget, or
            one without a reasoning parser; a ``chat_template_kwargs`` key
            the server sets itself.
        """
        calls = bool(self.tools) and self.tool_choice != "none"
        if calls and constraint_field is not None:
            raise RequestRefused(f"give tools (tool_choice auto, required or a function) or {constraint_field}, "
                                 "not both: a constraint cannot apply to tool calls", param=constraint_field)
        if self.max_reasoning_tokens is not None and self.thinking_token_budget is not None:
            raise RequestRefused("give max_reasoning_tokens or thinking_token_budget (vLLM's name), not both",
                                 param="thinking_token_budget")
        for name in ("max_reasoning_tokens", "thinking_token_budget"):
            if getattr(self, name) is not None and not reasoning:
                raise not_supported(name, "the server has no reasoning parser (start it with --reasoning-parser)")
        for key in sorted(set(self.chat_template_kwargs or {}) & _TEMPLATE_RESERVED):
            raise not_supported(f"chat_template_kwargs.{key}", "the server sets it itself")
        return {"tools": self.tools, "tool_choice": self.tool_choice,
                "parallel_tool_calls": self.parallel_tool_calls is not False,
                "chat_template_kwargs": self.chat_template_kwargs,
                "max_reasoning_tokens": self.max_reasoning_tokens or self.thinking_token_budget}

    def num_logprobs(self) -> int | None:
        """Alternatives per token (``top_logprobs``), None without ``logprobs``.

        Raises
        ------
        RequestRefused
            ``top_logprobs`` without ``logprobs: true`` (as OpenAI).
        """
        if not self.logprobs:
            if self.top_logprobs:
                raise RequestRefused("top_logprobs needs logprobs: true", param="top_logprobs")
            return None
        return self.top_logprobs or 0
