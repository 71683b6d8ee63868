"""Read a chat completion's text back: reasoning, content, tool calls.

One responsibility: :meth:`OutputParser.parse`, a pure function of the
output text (or of a prefix of it, as it streams) built from the same
descriptions as the grammar (:class:`~leapgen.engine.chat.tool_formats.ToolCallFormat`,
:class:`~leapgen.engine.chat.reasoning.ReasoningParser`). On a prefix it
returns only what no later text can change: text that may still become a
trigger or an end marker is held back, a call's name appears once its JSON
string is complete, its arguments grow as their JSON text does. So the
parse of a longer prefix extends the parse of a shorter one, and a stream's
deltas (:class:`ChatStream`) are differences of successive parses: the
stream rebuilds exactly the non-streamed message.

- Reasoning: the text before the reasoning parser's end marker (after its
  start marker, when the prompt did not open the block); ``reasoning`` is
  it stripped of surrounding whitespace.
- Tool calls: each trigger starts a list of calls written as the format says
  (JSON whitespace tolerated, the name first); ``arguments`` is the exact
  JSON text the model wrote. Text outside calls is ``content``, joined and
  stripped (None when empty).
- Text that should be a call and is not (an output cut by ``max_tokens`` or a
  stop string, an unknown function, bad JSON) never raises: on the final
  parse it is content, and it is logged.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Callable

from leapgen.engine.chat.reasoning import DONE, FRESH, ReasoningParser
from leapgen.engine.chat.tool_formats import ToolCallFormat

logger = logging.getLogger("leapgen.engine")

_WS = " \t\n\r"
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")


@dataclass(frozen=True)
class ParsedCall:
    """One tool call read from the text.

    Attributes
    ----------
    name : str or None
        None while the name's JSON string is not complete (prefixes only).
    arguments : str
        The arguments' JSON text (so far, on a prefix).
    complete : bool
        Whether the whole call, its end included, was read.
    """

    name: str | None
    arguments: str
    complete: bool


@dataclass(frozen=True)
class ParsedOutput:
    """The parse of an output (or a prefix of it).

    Attributes
    ----------
    reasoning : str or None
        The thinking (None without a reasoning parser or a think block).
    content : str or None
        The text outside the thinking and the calls, stripped; None when empty.
    calls : tuple of ParsedCall
    """

    reasoning: str | None
    content: str | None
    calls: tuple[ParsedCall, ...] = ()


class _More(Exception):
    """The text ends before the construct does."""


class _Bad(Exception):
    """The text cannot be the construct."""


class OutputParser:
    """The parser of one request's outputs.

    Parameters
    ----------
    tool_format : ToolCallFormat or None
        Read tool calls in this format (None: all text is content).
    tool_names : collection of str or None
        The functions a call may name (others are not calls).
    reasoning : ReasoningParser or None
        Split off the thinking.
    reasoning_state : str
        Where the prompt left the model (:meth:`ReasoningParser.state_of`).
    """

    def __init__(self, *, tool_format: ToolCallFormat | None = None, tool_names=None,
                 reasoning: ReasoningParser | None = None, reasoning_state: str = FRESH):
        self.tool_format = tool_format
        self.tool_names = frozenset(tool_names) if tool_names is not None else None
        self.reasoning = reasoning if reasoning_state != DONE else None
        self.reasoning_state = reasoning_state
        self.has_reasoning = reasoning is not None  # (``reasoning_content`` is reported, None when absent)

    def parse(self, text: str, *, final: bool = True) -> ParsedOutput:
        """Split ``text`` into reasoning, content and tool calls.

        Parameters
        ----------
        text : str
            The output so far (special tokens' texts included).
        final : bool, default True
            The whole output: held-back text is content, and a call that is
            not complete is content too (logged). False: ``text`` is a prefix.

        Returns
        -------
        ParsedOutput
        """
        reasoning, rest = None, 0
        if self.reasoning is not None:
            reasoning, rest = self._split_reasoning(text, final)
            if rest is None:  # still thinking
                return ParsedOutput(reasoning, None)
        if self.tool_format is None:
            tail = text[rest:]
            return ParsedOutput(reasoning, tail.strip() or None)
        segments, calls = self._scan_calls(text[rest:], final)
        return ParsedOutput(reasoning, "".join(segments).strip() or None, tuple(calls))

    # ------------------------------------------------------------ reasoning

    def _split_reasoning(self, text: str, final: bool) -> tuple[str | None, int | None]:
        """(reasoning so far, where the rest starts or None while inside the block)."""
        r = self.reasoning
        lead = len(text) - len(text.lstrip(_WS))
        start = 0
        if text.startswith(r.start, lead):
            start = lead + len(r.start)
        elif not final and r.start.startswith(text[lead:]):
            return None, None  # (empty or a start marker on its way)
        elif self.reasoning_state == FRESH and not r.start_optional:
            return None, 0  # no block: everything is the answer
        end = text.find(r.end, start)
        if end < 0:
            body = text[start:] if final else _hold(text[start:], r.end)
            return body.strip(), None
        return text[start:end].strip(), end + len(r.end)

    # ------------------------------------------------------------ tool calls

    def _scan_calls(self, text: str, final: bool) -> tuple[list[str], list[ParsedCall]]:
        fmt = self.tool_format
        segments: list[str] = []
        calls: list[ParsedCall] = []
        pos = 0
        while True:
            k = text.find(fmt.trigger, pos)
            if k < 0:
                segments.append(text[pos:] if final else _hold(text[pos:], fmt.trigger))
                return segments, calls
            segments.append(text[pos:k])
            found: list[ParsedCall] = []
            try:
                pos = self._read_calls(text, k, found, final)
            except _More:
                if not final:
                    calls += found
                    return segments, calls
                logger.warning("a tool call the output does not finish is returned as content: %r", text[k:k + 200])
                segments.append(text[k:])
                return segments, calls
            except _Bad:
                if final:
                    logger.warning("text that is not a tool call is returned as content: %r", text[k:k + 200])
                segments.append(fmt.trigger)
                pos = k + len(fmt.trigger)
                continue
            calls += found

    def _read_calls(self, text: str, at: int, found: list[ParsedCall], final: bool) -> int:
        """Read the calls starting at ``at`` into ``found`` (the last one
        partial when the text ends inside it); the position after them."""
        fmt = self.tool_format
        j = _literal(text, at, fmt.calls_begin)
        while True:
            j = self._read_call(text, j, found)
            if not fmt.calls_begin:  # each call has its own trigger; the separator after it is not content
                if text.startswith(fmt.separator, j):
                    return j + len(fmt.separator)
                if not final and j < len(text) and fmt.separator.startswith(text[j:]):
                    raise _More()
                return j
            try:
                return _literal(text, j, fmt.calls_end)
            except _Bad:
                j = _literal(text, j, fmt.separator)

    def _read_call(self, text: str, at: int, found: list[ParsedCall]) -> int:
        fmt = self.tool_format
        j = _skip(text, _literal(text, at, fmt.call_begin))
        j = _skip(text, _char(text, j, "{"))
        key, j = _string(text, j)
        if key != "name":
            raise _Bad()
        j = _skip(text, _char(text, _skip(text, j), ":"))
        name, after_name = _string(text, j)
        if not isinstance(name, str) or (self.tool_names is not None and name not in self.tool_names):
            raise _Bad()
        try:
            j = _skip(text, _char(text, _skip(text, after_name), ","))
            key, j = _string(text, j)
            if key != fmt.arguments_key:
                raise _Bad()
            start = _skip(text, _char(text, _skip(text, j), ":"))
            end = _value_end(text, start)
        except _More:
            args_start = _args_start(text, after_name, fmt.arguments_key)
            found.append(ParsedCall(name, text[args_start:] if args_start is not None else "", False))
            raise
        arguments = text[start:end]
        try:
            json.loads(arguments)
        except ValueError:
            raise _Bad() from None
        try:
            j = _literal(text, _char(text, _skip(text, end), "}"), fmt.call_end)
        except _More:
            found.append(ParsedCall(name, arguments, False))
            raise
        found.append(ParsedCall(name, arguments, True))
        return j


# ---------------------------------------------------------------------------- the stream


class ChatStream:
    """The message deltas of one choice as its text streams.

    Parameters
    ----------
    parser : OutputParser
    new_id : callable, default :func:`new_call_id`
        Makes a tool call's ``id``.
    """

    def __init__(self, parser: OutputParser, new_id: Callable[[], str] | None = None):
        self.parser = parser
        self.new_id = new_id or new_call_id
        self.text = ""
        self.reasoning = ""
        self.content = ""
        self.calls: list[list] = []  # [id, name, arguments sent]

    @property
    def has_calls(self) -> bool:
        """Whether a tool call was sent (the finish reason is then ``tool_calls``)."""
        return bool(self.calls)

    def feed(self, delta: str) -> dict:
        """The message delta after ``delta`` more text: any of
        ``reasoning_content``, ``content``, ``tool_calls`` (OpenAI's chunk
        shape: index, then id, type and name once, then argument fragments);
        empty when nothing new can be sent yet."""
        self.text += delta
        return self._diff(self.parser.parse(self.text, final=False))

    def finish(self) -> dict:
        """The last delta (held-back text), once the output is complete."""
        return self._diff(self.parser.parse(self.text, final=True))

    def _diff(self, parsed: ParsedOutput) -> dict:
        out: dict = {}
        for field, attr, value in (("reasoning_content", "reasoning", parsed.reasoning),
                                   ("content", "content", parsed.content)):
            sent = getattr(self, attr)
            if value and len(value) > len(sent) and value.startswith(sent):
                out[field] = value[len(sent):]
                setattr(self, attr, value)
        deltas = []
        for i, call in enumerate(parsed.calls):
            if call.name is None:
                break
            if i == len(self.calls):
                self.calls.append([self.new_id(), call.name, ""])
                deltas.append({"index": i, "id": self.calls[i][0], "type": "function",
                               "function": {"name": call.name, "arguments": ""}})
            sent = self.calls[i][2]
            if len(call.arguments) > len(sent) and call.arguments.startswith(sent):
                self.calls[i][2] = call.arguments
                piece = call.arguments[len(sent):]
                if deltas and deltas[-1]["index"] == i:
                    deltas[-1]["function"]["arguments"] += piece
                else:
                    deltas.append({"index": i, "function": {"arguments": piece}})
        if deltas:
            out["tool_calls"] = deltas
        return out


def new_call_id() -> str:
    """A fresh tool call id (``call_`` and 24 hex digits, OpenAI's shape)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def message_of(parsed: ParsedOutput, *, with_reasoning: bool = False,
               new_id: Callable[[], str] | None = None) -> dict:
    """The assistant message (OpenAI's shape) of a final parse: ``content``,
    ``tool_calls`` when there are any, ``reasoning_content`` when the parse
    has a think block or ``with_reasoning`` (then None without one)."""
    new_id = new_id or new_call_id
    message: dict = {"role": "assistant", "content": parsed.content}
    calls = [c for c in parsed.calls if c.complete and c.name is not None]
    if calls:
        message["tool_calls"] = [{"id": new_id(), "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
    if parsed.reasoning is not None or with_reasoning:
        message["reasoning_content"] = parsed.reasoning
    return message


# ---------------------------------------------------------------------------- scanning helpers


def _hold(text: str, marker: str) -> str:
    """``text`` without its longest end that begins ``marker`` (it may still become it)."""
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:k]):
            return text[:-k]
    return text


def _literal(text: str, at: int, literal: str) -> int:
    """The position after ``literal`` at ``at``."""
    if text.startswith(literal, at):
        return at + len(literal)
    if literal.startswith(text[at:]):
        raise _More()
    raise _Bad()


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WS:
        at += 1
    return at


def _char(text: str, at: int, char: str) -> int:
    if at >= len(text):
        raise _More()
    if text[at] != char:
        raise _Bad()
    return at + 1


def _string_end(text: str, at: int) -> int:
    """The position after the JSON string that starts at ``at``."""
    if at >= len(text):
        raise _More()
    if text[at] != '"':
        raise _Bad()
    j = at + 1
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == '"':
            return j + 1
        j += 1
    raise _More()


def _string(text: str, at: int) -> tuple[str, int]:
    end = _string_end(text, at)
    try:
        return json.loads(text[at:end]), end
    except ValueError:
        raise _Bad() from None


def _value_end(text: str, at: int) -> int:
    """The position after the JSON value that starts at ``at`` (its syntax
    is checked by ``json.loads`` once complete)."""
    if at >= len(text):
        raise _More()
    c = text[at]
    if c == '"':
        return _string_end(text, at)
    if c in "{[":
        depth, j = 0, at
        while j < len(text):
            c = text[j]
            if c == '"':
                j = _string_end(text, j)
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        raise _More()
    m = _SCALAR.match(text, at)
    if m is None:
        if any(w.startswith(text[at:]) for w in ("true", "false", "null", "-")):
            raise _More()
        raise _Bad()
    if m.end() == len(text):
        raise _More()  # a number may go on
    return m.end()


def _args_start(text: str, at: int, key: str) -> int | None:
    """Where the arguments' value starts after the name (None: not reached yet)."""
    try:
        j = _skip(text, _char(text, _skip(text, at), ","))
        found, j = _string(text, j)
        if found != key:
            return None
        return _skip(text, _char(text, _skip(text, j), ":"))
    except (_More, _Bad):
        return None
