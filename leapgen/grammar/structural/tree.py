"""The parsed structural tag: an immutable tree of formats (see :mod:`leapgen.grammar.structural`).

Every node keeps the JSON pointer of the object it was read from (``pointer``,
not compared), so that errors found later (a schema, a regex) name the place
in the tag; ``to_dict()`` gives the node back as xgrammar's JSON, defaults
written out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Union

@dataclass(frozen=True)
class ConstString:
    """Exactly ``value``."""

    value: str
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {"type": "const_string", "value": self.value}


@dataclass(frozen=True)
class JsonSchema:
    """JSON valid against ``schema`` (flexible whitespace, strict objects, as xgrammar compiles it);
    ``max_whitespace``: the longest whitespace run (None: leapgen's default bound). ``pointer`` is
    the schema's own (``.../json_schema``, or ``/structures/i/schema`` in the legacy form)."""

    schema: Any
    max_whitespace: int | None = None
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        out = {"type": "json_schema", "json_schema": self.schema}
        if self.max_whitespace is not None:
            out["max_whitespace_cnt"] = self.max_whitespace
        return out

    def __hash__(self) -> int:  # the schema is a dict: hash its JSON text
        return hash(json.dumps(self.schema, sort_keys=True))


@dataclass(frozen=True)
class EbnfGrammar:
    """Text of the grammar ``text``: EBNF (GBNF, root rule ``root``) or, with ``syntax="lark"``, Lark
    (start rule ``start``)."""

    text: str
    syntax: str = "ebnf"
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {"type": "grammar", "grammar": self.text, "syntax": self.syntax}


@dataclass(frozen=True)
class Regex:
    """Text matching the regex ``pattern`` in full."""

    pattern: str
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {"type": "regex", "pattern": self.pattern}


@dataclass(frozen=True)
class AnyText:
    """Any text holding none of ``excludes`` (nor the end of the enclosing tag), at most
    ``max_chars`` characters."""

    excludes: tuple[str, ...] = ()
    max_chars: int | None = None
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        out: dict = {"type": "any_text", "excludes": list(self.excludes)}
        if self.max_chars is not None:
            out["max_chars"] = self.max_chars
        return out


@dataclass(frozen=True)
class Token:
    """One special or added token, by id or by its text (never the text spelled in other tokens)."""

    token: int | str
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {"type": "token", "token": self.token}


@dataclass(frozen=True)
class Sequence:
    """The elements one after another."""

    elements: tuple
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {"type": "sequence", "elements": [e.to_dict() for e in self.elements]}


@dataclass(frozen=True)
class Or:
    """One of the elements."""

    elements: tuple
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {"type": "or", "elements": [e.to_dict() for e in self.elements]}


@dataclass(frozen=True)
class Repeat:
    """``content`` from ``min`` to ``max`` times (None: unbounded); ``kind`` is the format's
    name (``optional``, ``star``, ``plus`` or ``repeat``)."""

    content: Any
    min: int
    max: int | None
    kind: str = "repeat"
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        if self.kind != "repeat":
            return {"type": self.kind, "content": self.content.to_dict()}
        return {"type": "repeat", "min": self.min, "max": -1 if self.max is None else self.max,
                "content": self.content.to_dict()}


@dataclass(frozen=True)
class Tag:
    """``begin``, then ``content``, then one of ``end`` (strings) or the end token."""

    begin: Union[str, Token]
    content: Any
    end: Union[tuple, Token]
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        begin = self.begin if isinstance(self.begin, str) else self.begin.to_dict()
        if isinstance(self.end, Token):
            end: Any = self.end.to_dict()
        else:
            end = self.end[0] if len(self.end) == 1 else list(self.end)
        return {"type": "tag", "begin": begin, "content": self.content.to_dict(), "end": end}


@dataclass(frozen=True)
class TriggeredTags:
    """Free text until a trigger, then a tag whose begin starts with it, then free text again."""

    triggers: tuple[str, ...]
    tags: tuple[Tag, ...]
    at_least_one: bool = False
    stop_after_first: bool = False
    excludes: tuple[str, ...] = ()
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {"type": "triggered_tags", "triggers": list(self.triggers), "tags": [t.to_dict() for t in self.tags],
                "at_least_one": self.at_least_one, "stop_after_first": self.stop_after_first,
                "excludes": list(self.excludes)}


@dataclass(frozen=True)
class TagsWithSeparator:
    """Tags separated by ``separator`` and nothing else."""

    tags: tuple[Tag, ...]
    separator: str
    at_least_one: bool = False
    stop_after_first: bool = False
    pointer: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {"type": "tags_with_separator", "tags": [t.to_dict() for t in self.tags],
                "separator": self.separator, "at_least_one": self.at_least_one,
                "stop_after_first": self.stop_after_first}


@dataclass(frozen=True)
class StructuralTag:
    """A parsed and validated structural tag (immutable).

    Attributes
    ----------
    format : ConstString, JsonSchema, ..., TagsWithSeparator
        The root of the format tree; each node has the ``pointer`` of the
        object it was read from.
    """

    format: Any

    def to_dict(self) -> dict:
        """The tag in the ``format`` form, defaults written out (JSON data; not shared)."""
        return {"type": "structural_tag", "format": self.format.to_dict()}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (a schema's keys in their own order: properties are generated in it)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)


