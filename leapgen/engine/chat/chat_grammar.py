"""The grammar of a chat request with tools or reasoning: one structural tag.

One responsibility: :func:`chat_sampling_params`, which puts a request's
tool calls (:func:`tool_calls_format`), the thinking of a reasoning model
(:meth:`ReasoningParser.prefix_format`) and its own constraint (a schema, a
regex, a grammar, a choice, a structural tag) into one structural tag, in
that order: the thinking is free and the constraint applies after its end.

How each ``tool_choice`` constrains the output (calls ``T_f`` written as
the :class:`ToolCallFormat` says, one tag per function):

=====================  ===============================================================
``required``           ``tags_with_separator`` of every ``T_f``, ``at_least_one``: calls
                       only, at least one, the format's separator between them
named function ``f``   only ``T_f``: one call of ``f``
``auto``               ``triggered_tags`` on the format's trigger: free text, and a call
                       wherever the trigger appears
``none``               no tools in the grammar
``parallel_tool_calls  ``stop_after_first``: at most one call
false``
=====================  ===============================================================

A function's arguments are its ``parameters`` schema (``strict: true`` or
absent) or any JSON object (``strict: false``). The JSON is laid out as the
request's JSON layout says (by default the fixed ``", "`` / ``": "`` layout,
where jump-forward appends the wrapper, the function's name once its first
characters decide it, and every argument key).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Sequence

from leapgen.engine.chat.reasoning import ReasoningParser
from leapgen.engine.chat.tool_formats import ToolCallFormat
from leapgen.engine.chat.tools import Tool, ToolChoice
from leapgen.engine.sampling_params import SamplingParams

#: The grammar fields of SamplingParams that a structural tag replaces.
_GRAMMAR_FIELDS = ("json_schema", "regex", "ebnf", "lark", "structural_tag", "choice")


def tool_calls_format(fmt: ToolCallFormat, tools: Sequence[Tool], choice: ToolChoice, *, parallel: bool = True) -> dict:
    """The structural-tag format of the calls a ``tool_choice`` allows.

    Parameters
    ----------
    fmt : ToolCallFormat
    tools : sequence of Tool
        Non-empty.
    choice : ToolChoice
        ``auto``, ``required`` or ``named``.
    parallel : bool, default True
        False: at most one call (``stop_after_first``).

    Returns
    -------
    dict
        A format (xgrammar's JSON), not yet wrapped in a structural tag.
    """
    chosen = [t for t in tools if choice.mode != "named" or t.name == choice.name]
    tags = [fmt.call_tag(t.name, t.arguments_format()) for t in chosen]
    if choice.mode == "named":
        return _around(fmt, tags[0])
    calls = {"type": "tags_with_separator", "tags": tags, "separator": fmt.separator, "at_least_one": True,
             "stop_after_first": not parallel}
    if choice.mode == "required":
        return _around(fmt, calls)
    if fmt.calls_begin:  # one list of calls after the trigger
        block = {"type": "tag", "begin": fmt.calls_begin, "content": calls, "end": fmt.calls_end}
        return {"type": "triggered_tags", "triggers": [fmt.trigger], "tags": [block], "stop_after_first": True}
    return {"type": "triggered_tags", "triggers": [fmt.trigger], "tags": tags, "stop_after_first": not parallel}


def _around(fmt: ToolCallFormat, inner: dict) -> dict:
    """``inner`` between the format's ``calls_begin`` and ``calls_end``."""
    elements = ([{"type": "const_string", "value": fmt.calls_begin}] if fmt.calls_begin else []) + [inner] + (
        [{"type": "const_string", "value": fmt.calls_end}] if fmt.calls_end else [])
    return elements[0] if len(elements) == 1 else {"type": "sequence", "elements": elements}


def constraint_format(params: SamplingParams) -> dict | None:
    """The structural-tag format of the grammar ``params`` gives (None when
    unconstrained).

    Raises
    ------
    ValueError
        A JSON layout a structural tag has no form of (``json_whitespace_pattern``).
    """
    if params.json_whitespace_pattern is not None:
        raise ValueError("json_whitespace_pattern does not apply inside a structural tag (tools or reasoning)")
    if params.json_object:
        return {"type": "json_schema", "json_schema": {"type": "object", "additionalProperties": True}}
    if params.json_schema is not None:
        schema = params.json_schema
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as exc:
                raise ValueError(f"the JSON Schema is not valid JSON: {exc}") from None
        return {"type": "json_schema", "json_schema": schema}
    if params.regex is not None:
        return {"type": "regex", "pattern": params.regex}
    if params.ebnf is not None:
        return {"type": "grammar", "grammar": params.ebnf}
    if params.lark is not None:
        return {"type": "grammar", "grammar": params.lark, "syntax": "lark"}
    if params.choice is not None:
        return {"type": "or", "elements": [{"type": "const_string", "value": c} for c in params.choice]}
    if params.structural_tag is not None:
        from leapgen.grammar.structural import parse_structural_tag

        return parse_structural_tag(params.structural_tag).to_dict()["format"]
    return None


def chat_sampling_params(params: SamplingParams, *, tools_format: dict | None = None,
                         reasoning: ReasoningParser | None = None, reasoning_state: str | None = None,
                         max_reasoning_tokens: int | None = None) -> SamplingParams:
    """``params`` with its grammar made one structural tag: the thinking
    (when ``reasoning`` is given and ``reasoning_state`` is not done), then
    the calls ``tools_format`` or the grammar of ``params`` (any text when
    neither). Unchanged when there is neither tools nor thinking.

    Parameters
    ----------
    params : SamplingParams
        Not mutated.
    tools_format : dict or None
        From :func:`tool_calls_format`; replaces the grammar of ``params``
        (which must have none).
    reasoning : ReasoningParser or None
    reasoning_state : str or None
        :meth:`ReasoningParser.state_of` of the prompt.
    max_reasoning_tokens : int or None
        Most tokens of thinking; the engine then appends the end marker.

    Raises
    ------
    ValueError
        Tools together with a grammar of ``params``; ``max_reasoning_tokens``
        without thinking; a layout a structural tag does not have.
    """
    prefix = reasoning.prefix_format(reasoning_state) if reasoning is not None else None
    if max_reasoning_tokens is not None and prefix is None:
        raise ValueError("max_reasoning_tokens needs a reasoning parser and thinking enabled")
    if tools_format is not None and params.constrained:
        raise ValueError("give tools (with tool_choice auto, required or a function) or a grammar, not both")
    if tools_format is None and prefix is None:
        return params
    rest = tools_format if tools_format is not None else constraint_format(params)
    if prefix is not None:
        rest = {"type": "sequence", "elements": [prefix, rest or {"type": "any_text"}]}
    fields: dict = {name: None for name in _GRAMMAR_FIELDS}
    fields.update(json_object=False, structural_tag={"type": "structural_tag", "format": rest})
    if max_reasoning_tokens is not None:
        fields.update(max_reasoning_tokens=max_reasoning_tokens, reasoning_end=reasoning.end)
    return dataclasses.replace(params, **fields)
