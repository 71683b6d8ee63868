"""Render a conversation with tools through the model's chat template.

One responsibility: :meth:`ChatTemplate.render`, a conversation (OpenAI's
messages: assistant ``tool_calls`` with ``content: null``, ``tool`` messages,
``content`` as text parts) and its tools -> the prompt text.

What the template does not render is written in the tool-call format's own
text, so that the model sees calls exactly as the grammar makes it write
them. Whether a template renders tools and tool calls is probed once, by
rendering a probe tool and a probe call and looking for their names:

- a template that renders ``tools`` (Qwen's, Llama 3.1's) gets them; one
  that does not (the embedded SmolLM2's) gets a system message in the
  Hermes style of Qwen2.5's template: the tools as JSON lines between
  ``<tools></tools>``, then how to call (the format's example call), added
  to the first system message or as one;
- a template that renders assistant ``tool_calls`` gets them (arguments as
  a dict when they are a JSON object, as transformers' templates expect);
  one that does not gets the calls' text as the message's content, and each
  run of ``tool`` messages as one user message of
  ``<tool_response>\\n...\\n</tool_response>`` blocks (Qwen's rendering).

Templates read ``content`` as a string: null content is ``""`` and text
parts are joined.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Sequence

from leapgen.engine.chat.tool_formats import ToolCallFormat
from leapgen.engine.chat.tools import Tool

_PROBE_TOOL = "leapgen_probe_tool"
_PROBE_CALL = "leapgen_probe_call"


class TemplateError(ValueError):
    """The chat template refused the conversation (its own message, or a
    conversation it cannot render)."""


class ChatTemplate:
    """A tokenizer's chat template, with what it renders probed once.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
        With a ``chat_template`` (else :meth:`render` joins ``role: content`` lines).
    """

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._lock = threading.Lock()
        self._renders: dict[str, bool] = {}

    @property
    def has_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def renders(self, what: str) -> bool:
        """Whether the template renders ``"tools"`` or ``"tool_calls"`` (probed once, cached)."""
        with self._lock:
            if what not in self._renders:
                self._renders[what] = self._probe(what)
            return self._renders[what]

    def _probe(self, what: str) -> bool:
        if not self.has_template:
            return False
        user = {"role": "user", "content": "x"}
        try:
            if what == "tools":
                tool = Tool(_PROBE_TOOL, {"type": "object", "properties": {}}).to_openai()
                text = self._apply([user], tools=[tool])
                return _PROBE_TOOL in text
            call = {"id": "call_0", "type": "function", "function": {"name": _PROBE_CALL, "arguments": {}}}
            text = self._apply([user, {"role": "assistant", "content": "", "tool_calls": [call]},
                                {"role": "tool", "tool_call_id": "call_0", "content": "y"}])
            return _PROBE_CALL in text
        except Exception:  # noqa: BLE001 - a template that fails on the probe does not render it
            return False

    def _apply(self, messages: list[dict], *, tools: list | None = None, **kwargs) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True,
                                                  **kwargs)

    def render(self, messages: Sequence[dict], *, tools: Sequence[Tool] = (), fmt: ToolCallFormat,
               template_kwargs: dict | None = None) -> str:
        """The prompt text of a conversation, the assistant turn opened.

        Parameters
        ----------
        messages : sequence of dict
            OpenAI's messages: ``role``, ``content`` (str, None or text parts
            ``[{"type": "text", "text": ...}]``), an assistant's
            ``tool_calls`` and ``reasoning_content``, a tool's
            ``tool_call_id``. Not mutated.
        tools : sequence of Tool
            Shown to the model (rendered by the template, or in a system message).
        fmt : ToolCallFormat
            How calls are written where the template does not render them.
        template_kwargs : dict or None
            Extra variables of the template (``enable_thinking``, ...).

        Returns
        -------
        str

        Raises
        ------
        TemplateError
            The template raised (its message is kept).
        """
        kwargs = dict(template_kwargs or {})
        conversation = [_plain(m) for m in messages]
        if not self.renders("tool_calls"):
            conversation = _calls_as_text(conversation, fmt)
        openai_tools = [t.to_openai() for t in tools] or None
        if openai_tools is not None and not self.renders("tools"):
            conversation = _with_tools_message(conversation, openai_tools, fmt)
            openai_tools = None
        if not self.has_template:
            return "".join(f"{m['role']}: {m['content']}\n" for m in conversation)
        try:
            return self._apply(conversation, tools=openai_tools, **kwargs)
        except Exception as exc:  # noqa: BLE001 - jinja's errors are the caller's conversation's
            raise TemplateError(f"the chat template could not render the conversation: {type(exc).__name__}: "
                                f"{exc}") from None


def _plain(message: dict) -> dict:
    """A message with string content and dict arguments (what templates read)."""
    out = {k: v for k, v in message.items() if v is not None}
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content)
    out["content"] = content or ""
    if message.get("tool_calls"):
        calls = []
        for call in message["tool_calls"]:
            function = dict(call.get("function") or {})
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    parsed = json.loads(arguments)
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict):
                    function["arguments"] = parsed
            calls.append({**call, "function": function})
        out["tool_calls"] = calls
    return out


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _calls_as_text(conversation: list[dict], fmt: ToolCallFormat) -> list[dict]:
    """Assistant tool calls as their text, tool results as user messages."""
    out: list[dict] = []
    for m in conversation:
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = [(c["function"].get("name", ""), _arguments_text(c["function"].get("arguments", {})))
                     for c in m["tool_calls"]]
            text = fmt.calls_text(calls)
            m = {"role": "assistant", "content": (m["content"] + "\n" if m["content"] else "") + text}
        elif m["role"] == "tool":
            block = "<tool_response>\n" + m["content"] + "\n</tool_response>"
            if out and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + block
                continue
            m = {"role": "user", "content": block, "_tool_results": True}
        out.append(m)
    return [{k: v for k, v in m.items() if k != "_tool_results"} for m in out]


def _with_tools_message(conversation: list[dict], tools: list[dict], fmt: ToolCallFormat) -> list[dict]:
    """The tools and how to call them, in the first system message (or a new one)."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    text = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            f"{lines}\n</tools>\n\n{fmt.instructions}\n{fmt.example()}")
    if conversation and conversation[0]["role"] in ("system", "developer"):
        first = conversation[0]
        return [{**first, "content": first["content"] + "\n\n" + text}] + conversation[1:]
    return [{"role": "system", "content": text}] + conversation
