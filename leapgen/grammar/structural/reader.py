"""Reading a structural tag's JSON into the tree of :mod:`.tree`, with errors at JSON pointers."""

from __future__ import annotations

import json
import re
from typing import Any

from leapgen.errors import StructuralTagError

from .tree import (AnyText, ConstString, EbnfGrammar, JsonSchema, Or, Regex, Repeat, Sequence, StructuralTag, Tag,
                   TagsWithSeparator, Token, TriggeredTags)

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_REFUSED_TYPES = {
    "exclude_token": "a single token outside a set",
    "any_tokens": "any tokens outside a set",
    "token_triggered_tags": "tags dispatched on trigger tokens",
    "dispatch": "patterns dispatched to formats",
    "token_dispatch": "tokens dispatched to formats",
    "qwen_xml_parameter": "Qwen's XML parameters",
}


def _pointer(base: str, *parts: str | int) -> str:
    """``base`` extended by RFC 6901 reference tokens (``~`` and ``/`` escaped)."""
    return base + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def parse_structural_tag(tag: dict | str | bytes | StructuralTag) -> StructuralTag:
    """Read and validate a structural tag.

    Parameters
    ----------
    tag : dict, str, bytes or StructuralTag
        The tag (either form, see the module docstring) or its JSON text.
        Not mutated; a :class:`StructuralTag` is returned as it is.

    Returns
    -------
    StructuralTag

    Raises
    ------
    StructuralTagError
        Text that is not JSON, a missing or ill-typed field, a field a format
        does not have, an unsupported format, a tag no trigger starts, with the
        JSON pointer of the place.
    """
    if isinstance(tag, StructuralTag):
        return tag
    if isinstance(tag, (str, bytes, bytearray)):
        try:
            tag = json.loads(tag)
        except json.JSONDecodeError as e:
            raise StructuralTagError(f"the structural tag is not valid JSON: {e.msg} at line {e.lineno} column "
                                     f"{e.colno}", pointer="") from None
        except RecursionError:
            raise StructuralTagError("the structural tag nests too deeply to parse", pointer="") from None
    try:
        return _Reader().top(tag)
    except RecursionError:
        raise StructuralTagError("the structural tag nests too deeply", pointer="") from None


class _Reader:
    """Validating reader of the JSON data (one per call; no state kept between calls)."""

    def top(self, obj: Any) -> StructuralTag:
        if not isinstance(obj, dict):
            raise StructuralTagError(f"a structural tag is a JSON object, got {_kind(obj)}", pointer="")
        if obj.get("type", "structural_tag") != "structural_tag":
            raise StructuralTagError(f"a structural tag has type \"structural_tag\", got {obj.get('type')!r}",
                                     pointer="/type")
        if "format" in obj:
            self._fields(obj, "", {"type", "format"}, "a structural tag")
            return StructuralTag(self.format(obj["format"], "/format"))
        if "structures" in obj or "triggers" in obj:
            return StructuralTag(self._legacy(obj))
        raise StructuralTagError("a structural tag needs \"format\" (or the legacy \"structures\" and \"triggers\")",
                                 pointer="")

    def _legacy(self, obj: dict) -> TriggeredTags:
        self._fields(obj, "", {"type", "structures", "triggers"}, "a legacy structural tag")
        structures = self._list(obj, "structures", "")
        tags = []
        for i, item in enumerate(structures):
            at = _pointer("/structures", i)
            if not isinstance(item, dict):
                raise StructuralTagError(f"a structure is a JSON object, got {_kind(item)}", pointer=at)
            self._fields(item, at, {"begin", "schema", "end"}, "a structure")
            schema = self._need(item, "schema", at)
            if isinstance(schema, str):
                try:
                    schema = json.loads(schema)
                except json.JSONDecodeError as e:
                    raise StructuralTagError(f"the schema is not valid JSON: {e.msg}",
                                             pointer=_pointer(at, "schema")) from None
            content = self._json_schema_value(schema, _pointer(at, "schema"))
            tags.append(Tag(self._str(item, "begin", at), content, (self._str(item, "end", at),), pointer=at))
        triggers = self._strings(obj, "triggers", "", non_empty=True)
        return self._check_triggers(TriggeredTags(triggers, tuple(tags), pointer=""), "", "/triggers", "/structures")

    # -- formats ----------------------------------------------------------------------------

    def format(self, obj: Any, at: str):
        if not isinstance(obj, dict):
            raise StructuralTagError(f"a format is a JSON object, got {_kind(obj)}", pointer=at)
        kind = obj.get("type")
        if not isinstance(kind, str):
            raise StructuralTagError("a format needs a \"type\" string", pointer=_pointer(at, "type"))
        read = getattr(self, "_" + kind, None) if kind in _FORMATS else None
        if read is None:
            if kind in _REFUSED_TYPES:
                raise StructuralTagError(f"the format type {kind!r} ({_REFUSED_TYPES[kind]}) is not supported",
                                         pointer=_pointer(at, "type"))
            raise StructuralTagError(f"unknown format type {kind!r}; expected one of {sorted(_FORMATS)}",
                                     pointer=_pointer(at, "type"))
        self._fields(obj, at, _FORMATS[kind] | {"type"}, f"a {kind} format")
        return read(obj, at)

    def _const_string(self, obj: dict, at: str) -> ConstString:
        return ConstString(self._str(obj, "value", at), pointer=at)

    def _json_schema(self, obj: dict, at: str) -> JsonSchema:
        style = obj.get("style", "json")
        if style != "json":
            raise StructuralTagError(f"json_schema style {style!r} is not supported (only \"json\")",
                                     pointer=_pointer(at, "style"))
        if self._bool(obj, "any_order", at, False):
            raise StructuralTagError("json_schema any_order=true is not supported (properties come in order)",
                                     pointer=_pointer(at, "any_order"))
        if self._strings(obj, "excludes", at, default=()):
            raise StructuralTagError("json_schema excludes are not supported", pointer=_pointer(at, "excludes"))
        schema = self._json_schema_value(self._need(obj, "json_schema", at), _pointer(at, "json_schema")).schema
        return JsonSchema(schema, self._count(obj, "max_whitespace_cnt", at), pointer=_pointer(at, "json_schema"))

    def _json_schema_value(self, schema: Any, at: str) -> JsonSchema:
        if not isinstance(schema, (dict, bool)):
            raise StructuralTagError(f"a JSON Schema is an object or a boolean, got {_kind(schema)}", pointer=at)
        return JsonSchema(schema, pointer=at)

    def _grammar(self, obj: dict, at: str) -> EbnfGrammar:
        syntax = obj.get("syntax", "ebnf")
        if syntax not in ("ebnf", "lark"):
            raise StructuralTagError(f"grammar syntax {syntax!r} is not supported (\"ebnf\" or \"lark\")",
                                     pointer=_pointer(at, "syntax"))
        return EbnfGrammar(self._str(obj, "grammar", at), syntax, pointer=at)

    def _regex(self, obj: dict, at: str) -> Regex:
        return Regex(self._str(obj, "pattern", at), pointer=at)

    def _any_text(self, obj: dict, at: str) -> AnyText:
        if obj.get("max_tokens") is not None:
            raise StructuralTagError("any_text max_tokens is not supported (a byte-level grammar does not count "
                                     "tokens); use max_chars", pointer=_pointer(at, "max_tokens"))
        excludes = self._strings(obj, "excludes", at, default=(), non_empty=True)
        return AnyText(excludes, self._count(obj, "max_chars", at), pointer=at)

    def _token(self, obj: dict, at: str) -> Token:
        token = self._need(obj, "token", at)
        if isinstance(token, bool) or not isinstance(token, (int, str)) or (isinstance(token, int) and token < 0):
            raise StructuralTagError(f"token must be a token id (int >= 0) or a token's text, got {token!r}",
                                     pointer=_pointer(at, "token"))
        if isinstance(token, str):
            self._text(token, _pointer(at, "token"))
        return Token(token, pointer=at)

    def _sequence(self, obj: dict, at: str) -> Sequence:
        return Sequence(self._elements(obj, at), pointer=at)

    def _or(self, obj: dict, at: str) -> Or:
        return Or(self._elements(obj, at), pointer=at)

    def _optional(self, obj: dict, at: str) -> Repeat:
        return Repeat(self.format(self._need(obj, "content", at), _pointer(at, "content")), 0, 1, "optional", at)

    def _star(self, obj: dict, at: str) -> Repeat:
        return Repeat(self.format(self._need(obj, "content", at), _pointer(at, "content")), 0, None, "star", at)

    def _plus(self, obj: dict, at: str) -> Repeat:
        return Repeat(self.format(self._need(obj, "content", at), _pointer(at, "content")), 1, None, "plus", at)

    def _repeat(self, obj: dict, at: str) -> Repeat:
        lo, hi = self._int(obj, "min", at), self._int(obj, "max", at)
        if lo < 0:
            raise StructuralTagError(f"repeat min must be >= 0, got {lo}", pointer=_pointer(at, "min"))
        if hi != -1 and hi < lo:
            raise StructuralTagError(f"repeat max must be -1 (unbounded) or >= min ({lo}), got {hi}",
                                     pointer=_pointer(at, "max"))
        content = self.format(self._need(obj, "content", at), _pointer(at, "content"))
        return Repeat(content, lo, None if hi == -1 else hi, "repeat", at)

    def _tag(self, obj: dict, at: str) -> Tag:
        begin = self._need(obj, "begin", at)
        if isinstance(begin, dict):
            begin = self.format(begin, _pointer(at, "begin"))
            if not isinstance(begin, Token):
                raise StructuralTagError("a tag's begin is a string or a token format",
                                         pointer=_pointer(at, "begin", "type"))
        else:
            begin = self._str(obj, "begin", at)
        end = self._need(obj, "end", at)
        if isinstance(end, dict):
            end = self.format(end, _pointer(at, "end"))
            if not isinstance(end, Token):
                raise StructuralTagError("a tag's end is a string, a list of strings or a token format",
                                         pointer=_pointer(at, "end", "type"))
        elif isinstance(end, list):
            end = self._strings(obj, "end", at)
            if not end:
                raise StructuralTagError("a tag's end list cannot be empty", pointer=_pointer(at, "end"))
        else:
            end = (self._str(obj, "end", at),)
        content = self.format(self._need(obj, "content", at), _pointer(at, "content"))
        return Tag(begin, content, end, pointer=at)

    def _tag_list(self, obj: dict, at: str) -> tuple[Tag, ...]:
        items = self._list(obj, "tags", at)
        if not items:
            raise StructuralTagError("tags must not be empty", pointer=_pointer(at, "tags"))
        tags = []
        for i, item in enumerate(items):
            where = _pointer(at, "tags", i)
            if isinstance(item, dict) and "type" not in item:
                item = {**item, "type": "tag"}  # a tag list's items may leave out "type"
            tag = self.format(item, where)
            if not isinstance(tag, Tag):
                raise StructuralTagError("the items of tags are tag formats", pointer=_pointer(where, "type"))
            tags.append(tag)
        return tuple(tags)

    def _triggered_tags(self, obj: dict, at: str) -> TriggeredTags:
        triggers = self._strings(obj, "triggers", at, non_empty=True)
        if not triggers:
            raise StructuralTagError("triggers must not be empty", pointer=_pointer(at, "triggers"))
        node = TriggeredTags(triggers, self._tag_list(obj, at), self._bool(obj, "at_least_one", at, False),
                             self._bool(obj, "stop_after_first", at, False),
                             self._strings(obj, "excludes", at, default=(), non_empty=True), pointer=at)
        return self._check_triggers(node, at, _pointer(at, "triggers"), _pointer(at, "tags"))

    def _tags_with_separator(self, obj: dict, at: str) -> TagsWithSeparator:
        return TagsWithSeparator(self._tag_list(obj, at), self._str(obj, "separator", at),
                                 self._bool(obj, "at_least_one", at, False),
                                 self._bool(obj, "stop_after_first", at, False), pointer=at)

    @staticmethod
    def _check_triggers(node: TriggeredTags, at: str, triggers_at: str, tags_at: str) -> TriggeredTags:
        """Each tag's begin is a string that exactly one trigger starts (xgrammar's rule)."""
        for i, tag in enumerate(node.tags):
            if not isinstance(tag.begin, str):
                raise StructuralTagError("the tags of triggered_tags begin with a string, not a token",
                                         pointer=_pointer(tags_at, i, "begin"))
            hits = [t for t in node.triggers if tag.begin.startswith(t)]
            if len(hits) != 1:
                what = "no trigger starts" if not hits else f"several triggers ({hits}) start"
                raise StructuralTagError(f"{what} the begin {tag.begin!r} of this tag; each tag's begin must "
                                         f"start with exactly one of the triggers {list(node.triggers)}",
                                         pointer=_pointer(tags_at, i, "begin"))
        return node

    # -- fields -------------------------------------------------------------------------------

    @staticmethod
    def _fields(obj: dict, at: str, allowed: set, what: str) -> None:
        for key in obj:
            if key not in allowed:
                raise StructuralTagError(f"{what} has no field {key!r} (it has {sorted(allowed)})",
                                         pointer=_pointer(at, key))

    @staticmethod
    def _need(obj: dict, key: str, at: str) -> Any:
        if key not in obj:
            raise StructuralTagError(f"missing field {key!r}", pointer=_pointer(at, key))
        return obj[key]

    @staticmethod
    def _text(value: Any, at: str) -> str:
        if not isinstance(value, str):
            raise StructuralTagError(f"expected a string, got {_kind(value)}", pointer=at)
        lone = _LONE_SURROGATE.search(value)
        if lone is not None:
            raise StructuralTagError(f"lone surrogate U+{ord(lone.group()):04X} at character {lone.start()} has no "
                                     "UTF-8 form (pass the character itself, not half of a UTF-16 pair)", pointer=at)
        return value

    def _str(self, obj: dict, key: str, at: str) -> str:
        return self._text(self._need(obj, key, at), _pointer(at, key))

    def _list(self, obj: dict, key: str, at: str) -> list:
        value = self._need(obj, key, at)
        if not isinstance(value, list):
            raise StructuralTagError(f"{key} must be a list, got {_kind(value)}", pointer=_pointer(at, key))
        return value

    def _strings(self, obj: dict, key: str, at: str, *, default: tuple | None = None,
                 non_empty: bool = False) -> tuple[str, ...]:
        if default is not None and key not in obj:
            return default
        out = []
        for i, value in enumerate(self._list(obj, key, at)):
            text = self._text(value, _pointer(at, key, i))
            if non_empty and not text:
                raise StructuralTagError(f"the strings of {key} must not be empty", pointer=_pointer(at, key, i))
            out.append(text)
        return tuple(out)

    def _elements(self, obj: dict, at: str) -> tuple:
        items = self._list(obj, "elements", at)
        if not items:
            raise StructuralTagError("elements must not be empty", pointer=_pointer(at, "elements"))
        return tuple(self.format(e, _pointer(at, "elements", i)) for i, e in enumerate(items))

    @staticmethod
    def _bool(obj: dict, key: str, at: str, default: bool) -> bool:
        value = obj.get(key, default)
        if not isinstance(value, bool):
            raise StructuralTagError(f"{key} must be a boolean, got {value!r}", pointer=_pointer(at, key))
        return value

    @staticmethod
    def _int(obj: dict, key: str, at: str) -> int:
        value = _Reader._need(obj, key, at)
        if isinstance(value, bool) or not isinstance(value, int):
            raise StructuralTagError(f"{key} must be an int, got {value!r}", pointer=_pointer(at, key))
        return value

    @staticmethod
    def _count(obj: dict, key: str, at: str) -> int | None:
        value = obj.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise StructuralTagError(f"{key} must be null or an int >= 0, got {value!r}", pointer=_pointer(at, key))
        return value


#: Format type -> its fields besides "type".
_FORMATS: dict[str, set] = {
    "const_string": {"value"},
    "json_schema": {"json_schema", "style", "any_order", "max_whitespace_cnt", "excludes"},
    "grammar": {"grammar", "syntax"},
    "regex": {"pattern"},
    "any_text": {"excludes", "max_tokens", "max_chars"},
    "token": {"token"},
    "sequence": {"elements"},
    "or": {"elements"},
    "optional": {"content"},
    "star": {"content"},
    "plus": {"content"},
    "repeat": {"min", "max", "content"},
    "tag": {"begin", "content", "end"},
    "triggered_tags": {"triggers", "tags", "at_least_one", "stop_after_first", "excludes"},
    "tags_with_separator": {"tags", "separator", "at_least_one", "stop_after_first"},
}


def _kind(value: Any) -> str:
    """The JSON kind of ``value``, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
