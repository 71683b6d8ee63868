"""A chat request, planned: its prompt, its grammar and the parser of its output.

One responsibility: :func:`plan_chat` turns a conversation, its tools, its
``tool_choice`` and the model's conventions (tool-call format, reasoning
parser) into a :class:`ChatPlan` that the engine runs as an ordinary
request (token ids and SamplingParams); :func:`chat_output` reads a
finished output back as an assistant message. :meth:`leapgen.LLM.chat` and
the server's ``/v1/chat/completions`` both go through here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from leapgen.engine.chat.chat_grammar import chat_sampling_params, tool_calls_format
from leapgen.engine.chat.output_parser import OutputParser, message_of
from leapgen.engine.chat.reasoning import DONE, ReasoningParser
from leapgen.engine.chat.template import ChatTemplate
from leapgen.engine.chat.tool_formats import ToolCallFormat
from leapgen.engine.chat.tools import read_tool_choice, read_tools
from leapgen.engine.prompt import check_surrogates, encode_prompt_text
from leapgen.engine.sampling_params import SamplingParams


@dataclass(frozen=True)
class ChatPlan:
    """What the engine runs for one chat request, and how to read its output.

    Attributes
    ----------
    prompt_ids : list of int
    params : SamplingParams
        The request's, its grammar made one structural tag when it has tools
        or thinking.
    parser : OutputParser
    prompt_text : str
        The rendered prompt.
    calls_tools : bool
        Whether the grammar holds tool calls.
    """

    prompt_ids: list[int]
    params: SamplingParams
    parser: OutputParser
    prompt_text: str
    calls_tools: bool


@dataclass(frozen=True)
class ChatOutput:
    """One finished chat completion, read back.

    Attributes
    ----------
    output : RequestOutput
        The engine's output (``text`` is the raw text).
    message : dict
        OpenAI's assistant message: ``role``, ``content``, ``tool_calls``
        (when any), ``reasoning_content`` (with a reasoning parser).
    finish_reason : str
        OpenAI's: ``"tool_calls"`` when the message has calls and the
        output ended by itself, ``"length"``, ``"stop"`` (a stop token, a
        stop string or a complete grammar), or the engine's ``"error"`` /
        ``"abort"``.
    """

    output: Any
    message: dict
    finish_reason: str

    @property
    def content(self) -> str | None:
        return self.message["content"]

    @property
    def tool_calls(self) -> list[dict]:
        return self.message.get("tool_calls", [])

    @property
    def reasoning_content(self) -> str | None:
        return self.message.get("reasoning_content")


def plan_chat(template: ChatTemplate, messages: Sequence[dict], params: SamplingParams, *,
              tool_format: ToolCallFormat, reasoning: ReasoningParser | None = None, tools: Sequence[Any] | None = None,
              tool_choice: Any = None, parallel_tool_calls: bool = True, chat_template_kwargs: dict | None = None,
              max_reasoning_tokens: int | None = None) -> ChatPlan:
    """Plan one chat request.

    Parameters
    ----------
    template : ChatTemplate
        The model's chat template (with its tokenizer).
    messages : sequence of dict
        OpenAI's messages (see :meth:`ChatTemplate.render`). Not mutated.
    params : SamplingParams
        Its grammar, if any, applies after the thinking; it cannot go with
        tool calls.
    tool_format : ToolCallFormat
    reasoning : ReasoningParser or None
        Split the thinking off and put the grammar after it.
    tools, tool_choice : OpenAI's (see :mod:`leapgen.engine.chat.tools`)
    parallel_tool_calls : bool, default True
    chat_template_kwargs : dict or None
        Extra variables of the template. ``enable_thinking: false`` with a
        reasoning parser: the prompt closes the think block (the template's
        own way, or the parser's empty block when the template has none).
    max_reasoning_tokens : int or None

    Returns
    -------
    ChatPlan

    Raises
    ------
    ToolsError
        Bad ``tools`` / ``tool_choice`` (``param`` names the field).
    TemplateError
        The template refused the conversation.
    ValueError
        Tools together with a grammar; ``max_reasoning_tokens`` without
        thinking; a lone UTF-16 surrogate in a message (naming it); an
        empty prompt.
    """
    tool_list = read_tools(tools)
    choice = read_tool_choice(tool_choice, tool_list)
    if not isinstance(parallel_tool_calls, bool):
        raise ValueError(f"parallel_tool_calls must be a bool, got {parallel_tool_calls!r}")
    for i, message in enumerate(messages):
        content = message.get("content")
        for j, part in enumerate(content if isinstance(content, list) else [content]):
            text = part.get("text") if isinstance(part, dict) else part
            if isinstance(text, str):
                check_surrogates(text, f"messages[{i}].content" + (f"[{j}]" if isinstance(content, list) else ""))
    kwargs = dict(chat_template_kwargs or {})
    text = template.render(messages, tools=tool_list, fmt=tool_format, template_kwargs=kwargs)
    state = DONE
    if reasoning is not None:
        state = reasoning.state_of(text)
        if kwargs.get("enable_thinking") is False and state != DONE:
            text += reasoning.closing_text(state)
            state = DONE
    tools_format = tool_calls_format(tool_format, tool_list, choice, parallel=parallel_tool_calls) \
        if choice.calls_tools else None
    planned = chat_sampling_params(params, tools_format=tools_format, reasoning=reasoning, reasoning_state=state,
                                   max_reasoning_tokens=max_reasoning_tokens)
    parser = OutputParser(tool_format=tool_format if choice.calls_tools else None,
                          tool_names=[t.name for t in tool_list], reasoning=reasoning, reasoning_state=state)
    ids = encode_prompt_text(template.tokenizer, text, templated=template.has_template)
    return ChatPlan(ids, planned, parser, text, choice.calls_tools)


def chat_output(out: Any, parser: OutputParser) -> ChatOutput:
    """Read a finished :class:`RequestOutput` as an assistant message."""
    message = message_of(parser.parse(out.text), with_reasoning=parser.has_reasoning)
    if message.get("tool_calls") and out.finish_reason in ("stop", "grammar"):
        reason = "tool_calls"
    elif out.finish_reason == "grammar":
        reason = "stop"
    else:
        reason = out.finish_reason
    return ChatOutput(out, message, reason)


class ChatSettings:
    """A model's chat conventions: its template, tool-call format and
    reasoning parser (one per engine; :meth:`plan` is thread-safe).

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
    tool_call_format : str or None, default None
        A name of :data:`~leapgen.engine.chat.tool_formats.TOOL_CALL_FORMATS`;
        None: the one the chat template's text names (Hermes when none).
    reasoning_parser : str or None, default None
        A name of :data:`~leapgen.engine.chat.reasoning.REASONING_PARSERS`
        (``qwen3``, ``deepseek_r1``); None: outputs have no thinking.

    Raises
    ------
    ValueError
        An unknown name.
    """

    def __init__(self, tokenizer: Any, *, tool_call_format: str | None = None, reasoning_parser: str | None = None):
        from leapgen.engine.chat.reasoning import get_reasoning_parser
        from leapgen.engine.chat.tool_formats import format_of_template, get_tool_call_format

        self.template = ChatTemplate(tokenizer)
        self.tool_format = (get_tool_call_format(tool_call_format) if tool_call_format is not None
                            else format_of_template(getattr(tokenizer, "chat_template", None)))
        self.reasoning = get_reasoning_parser(reasoning_parser) if reasoning_parser is not None else None

    def plan(self, messages: Sequence[dict], params: SamplingParams, **kwargs: Any) -> ChatPlan:
        """:func:`plan_chat` with these conventions (``kwargs``: its keyword arguments)."""
        return plan_chat(self.template, messages, params, tool_format=self.tool_format, reasoning=self.reasoning,
                         **kwargs)
