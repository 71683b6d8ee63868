"""Tool-call formats: how a model family writes its function calls.

One responsibility: the registry of :class:`ToolCallFormat` descriptions.
Each is the single source of truth of its format: the structural tag that
constrains a model's calls (:mod:`leapgen.engine.chat.chat_grammar`), the
parser that reads them back (:mod:`leapgen.engine.chat.output_parser`), the
text of an earlier call replayed into a prompt, and the instructions a
system message gives a template that does not render tools
(:mod:`leapgen.engine.chat.template`) are all built from its strings.

A call is written ``call_begin + {"name": NAME, "<arguments_key>": ARGS} +
call_end`` (the JSON in ``json.dumps``' layout, ``", "`` and ``": "``); calls
follow one another with ``separator`` between them, the whole list between
``calls_begin`` and ``calls_end``; ``trigger`` is what starts the calls
where free text may come instead (``tool_choice: "auto"``).

================  ==================================  =====================================
format            one call                            between calls, around the list
================  ==================================  =====================================
``hermes``        ``<tool_call>\\n{...}\\n</tool_call>``  ``\\n`` (Hermes 2 Pro, Qwen2.5, Qwen3)
``llama3_json``   ``{"name": ..., "parameters": ...}``  ``; `` (Llama 3.1 / 3.2 JSON tool calls)
``mistral``       ``{"name": ..., "arguments": ...}``   ``, `` inside ``[TOOL_CALLS][`` ... ``]``
================  ==================================  =====================================

The strings are those of the model cards and of vLLM's tool parsers
(``hermes``, ``llama3_json``, ``mistral``) and xgrammar's builtin structural
tags (``get_model_structural_tag``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class ToolCallFormat:
    """One model family's tool-call syntax (see the module docstring).

    Attributes
    ----------
    name : str
        The registry name (``--tool-call-format``).
    trigger : str
        The text that starts the calls amid free text; a prefix of
        ``calls_begin + call_begin + '{"name": '``.
    call_begin, call_end : str
        Around each call's JSON object.
    separator : str
        Between two calls.
    calls_begin, calls_end : str
        Around the whole list of calls ("" when each call stands alone).
    arguments_key : str
        The JSON key of the arguments (``"arguments"``, Llama's ``"parameters"``).
    template_markers : tuple of str
        A chat template whose text holds one of these uses this format.
    instructions : str
        The sentence that introduces the example call in the system message
        written for a template that does not render tools.
    """

    name: str
    trigger: str
    call_begin: str
    call_end: str
    separator: str
    calls_begin: str = ""
    calls_end: str = ""
    arguments_key: str = "arguments"
    template_markers: tuple[str, ...] = ()
    instructions: str = "For each function call, write exactly:"

    def call_prefix(self, name: str) -> str:
        """The text of a call up to its arguments (``<tool_call>\\n{"name": "f", "arguments": ``)."""
        return f'{self.call_begin}{{"name": {json.dumps(name, ensure_ascii=False)}, "{self.arguments_key}": '

    @property
    def call_suffix(self) -> str:
        """The text of a call after its arguments (``}\\n</tool_call>``)."""
        return "}" + self.call_end

    def call_text(self, name: str, arguments: str) -> str:
        """One call as the model writes it (``arguments``: the JSON text of the arguments)."""
        return self.call_prefix(name) + arguments + self.call_suffix

    def calls_text(self, calls: Iterable[tuple[str, str]]) -> str:
        """A list of ``(name, arguments JSON text)`` calls as the model writes them."""
        return self.calls_begin + self.separator.join(self.call_text(n, a) for n, a in calls) + self.calls_end

    def call_tag(self, name: str, content: dict) -> dict:
        """The structural-tag ``tag`` of one function: its call's begin, the
        ``content`` format of its arguments, and its end."""
        return {"type": "tag", "begin": self.call_prefix(name), "content": content, "end": self.call_suffix}

    def example(self) -> str:
        """The call written with placeholders, for a system message."""
        return self.call_begin + f'{{"name": <function-name>, "{self.arguments_key}": <args-json-object>}}' + \
            self.call_end


HERMES = ToolCallFormat(
    name="hermes", trigger="<tool_call>", call_begin="<tool_call>\n", call_end="\n</tool_call>", separator="\n",
    template_markers=("<tool_call>",),
    instructions="For each function call, return a json object with function name and arguments within "
                 "<tool_call></tool_call> XML tags:")
LLAMA3_JSON = ToolCallFormat(
    name="llama3_json", trigger='{"name": ', call_begin="", call_end="", separator="; ", arguments_key="parameters",
    template_markers=("<|python_tag|>", '"parameters": dictionary of argument name'),
    instructions="To call a function, respond with only a JSON object in this format (several calls are "
                 "separated by '; '):")
MISTRAL = ToolCallFormat(
    name="mistral", trigger="[TOOL_CALLS]", call_begin="", call_end="", separator=", ", calls_begin="[TOOL_CALLS][",
    calls_end="]", template_markers=("[TOOL_CALLS]",),
    instructions="To call functions, respond with [TOOL_CALLS] and a JSON list of calls, each in this format:")

#: The registry, by name (the first whose marker a template holds is chosen; Hermes otherwise).
TOOL_CALL_FORMATS: dict[str, ToolCallFormat] = {f.name: f for f in (MISTRAL, HERMES, LLAMA3_JSON)}
#: The format of a template that names none of the markers (the embedded SmolLM2's).
DEFAULT_TOOL_CALL_FORMAT = HERMES


def get_tool_call_format(name: str) -> ToolCallFormat:
    """The registered format called ``name``.

    Raises
    ------
    ValueError
        An unknown name (the message lists the known ones).
    """
    try:
        return TOOL_CALL_FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown tool-call format {name!r}; known: {', '.join(sorted(TOOL_CALL_FORMATS))}") \
            from None


def format_of_template(template: Any) -> ToolCallFormat:
    """The format a chat template uses: the first of the registry whose
    marker its text holds, else :data:`DEFAULT_TOOL_CALL_FORMAT`.

    Parameters
    ----------
    template : str, dict or None
        The tokenizer's ``chat_template`` (a dict of named templates counts
        all of them).
    """
    if isinstance(template, dict):
        template = "\n".join(str(t) for t in template.values())
    text = template if isinstance(template, str) else ""
    for fmt in TOOL_CALL_FORMATS.values():
        if any(marker in text for marker in fmt.template_markers):
            return fmt
    return DEFAULT_TOOL_CALL_FORMAT
