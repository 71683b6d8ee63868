"""xgrammar's ``Grammar`` (and the structural-tag data types) over leapgen's IR.

A :class:`Grammar` holds the grammar IR of :mod:`leapgen.grammar.ir` that one
of leapgen's front-ends built (EBNF, regex, JSON Schema) and remembers its
source, so :class:`~leapgen.xgrammar.GrammarCompiler` compiles it through the
same cached path as a source string. Front-end errors are raised when the
grammar is built, as in xgrammar; they are :class:`~leapgen.errors.GrammarError`
subclasses, hence ``RuntimeError``.
"""

from __future__ import annotations

import json
from typing import Any

from leapgen.errors import DeserializeFormatError, GrammarError, SchemaError
from leapgen.errors import StructuralTagError as InvalidStructuralTagError
from leapgen.grammar import ir
from leapgen.grammar.cfg import rename_rules
from leapgen.xgrammar import serialization as ser

#: xgrammar's builtin JSON grammar: an object or an array at the top (any value inside), whitespace
#: ``[ \n\r\t]*`` unbounded around every token (leapgen's own builtin grammar allows any value and
#: bounds whitespace runs: see :mod:`leapgen.grammar.builtin`).
XGRAMMAR_JSON_GBNF = r"""
root    ::= object | array
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \n\r\t]*
"""


def schema_text(schema) -> str:
    """A JSON Schema given as text, a dict or a pydantic model class, as JSON text.

    Raises
    ------
    SchemaError
        Not one of those, or not JSON data.
    """
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return json.dumps(schema.model_json_schema())
    if isinstance(schema, str):
        return schema
    if isinstance(schema, (dict, bool)):
        try:
            return json.dumps(schema)
        except (TypeError, ValueError) as e:
            raise SchemaError(f"the schema is not JSON data: {e}", pointer="") from None
    raise SchemaError(f"the schema should be a str, a dict or a pydantic model class, got {type(schema).__name__}",
                      pointer="")


def json_schema_options(any_whitespace: bool, indent, separators, strict_mode: bool, max_whitespace_cnt,
                        any_order: bool) -> dict:
    """xgrammar's JSON Schema options as leapgen's (``compile_json_schema`` keywords).

    xgrammar's defaults: separators ``(", ", ": ")`` without whitespace freedom
    and indent, ``(",", ": ")`` with an indent; whitespace runs unbounded
    (:data:`UNBOUNDED_WHITESPACE` as the ``whitespace_pattern``) unless
    ``max_whitespace_cnt`` bounds them.

    Raises
    ------
    GrammarError
        ``any_order=True`` (not supported), a non-positive ``max_whitespace_cnt``.
    """
    if any_order:
        raise GrammarError("any_order=True (object properties in any order) is not supported by leapgen; "
                           "properties follow the schema's order")
    if max_whitespace_cnt is not None and (isinstance(max_whitespace_cnt, bool) or
                                           not isinstance(max_whitespace_cnt, int) or max_whitespace_cnt < 1):
        raise GrammarError(f"max_whitespace_cnt must be a positive int or None, got {max_whitespace_cnt!r}")
    if separators is None and not any_whitespace:
        separators = (",", ": ") if indent is not None else (", ", ": ")
    options = dict(any_whitespace=bool(any_whitespace), indent=indent,
                   separators=None if separators is None else tuple(separators), strict_mode=bool(strict_mode))
    if max_whitespace_cnt is not None:
        options["max_whitespace"] = max_whitespace_cnt
    elif any_whitespace:
        options["whitespace_pattern"] = UNBOUNDED_WHITESPACE
    return options


#: xgrammar's whitespace between JSON tokens without ``max_whitespace_cnt``: unbounded runs.
UNBOUNDED_WHITESPACE = r"[ \t\n\r]*"


def schema_ir(text: str, options: dict):
    """``json_schema_to_ir`` of a schema's text with :func:`json_schema_options`' options.

    Raises
    ------
    SchemaError, GrammarError
        As :meth:`leapgen.GrammarCompiler.compile_json_schema`.
    """
    from leapgen.grammar.json import json_schema_to_ir
    from leapgen.grammar.regex import parse_regex

    kwargs = dict(options)
    pattern = kwargs.pop("whitespace_pattern", None)
    if pattern is not None:
        kwargs["whitespace"] = parse_regex(pattern)
    try:
        return json_schema_to_ir(text, **kwargs)
    except GrammarError:
        raise
    except ValueError as e:  # malformed layout options
        raise GrammarError(str(e)) from None


def refuse_named_grammars(named_grammars) -> None:
    """Raise GrammarError when xgrammar's Lark ``named_grammars`` (``@name`` references) are given."""
    if named_grammars:
        raise GrammarError("named grammars (xgrammar's @name references in Lark) are not supported by leapgen")


class Grammar:
    """A grammar for guided generation (``xgrammar.Grammar``); build it with the
    ``from_*`` constructors, :meth:`builtin_json_grammar`, :meth:`concat`,
    :meth:`union` or :meth:`deserialize_json`. Immutable.

    ``str(grammar)`` is GBNF text (see :func:`leapgen.grammar.gbnf_print.to_gbnf`
    for what it cannot print exactly).
    """

    __slots__ = ("_ir", "_source", "_warnings")

    def __init__(self, *args, **kwargs):
        raise TypeError("build a Grammar with Grammar.from_ebnf / from_regex / from_json_schema / "
                        "builtin_json_grammar / concat / union / deserialize_json")

    @classmethod
    def _make(cls, node: ir.Node | ir.Grammar, source: tuple, warnings=()) -> "Grammar":
        g = object.__new__(cls)
        g._ir, g._source, g._warnings = node, source, tuple(warnings)
        return g

    @property
    def ir(self) -> ir.Node | ir.Grammar:
        """The grammar IR (a regular term, or named rules)."""
        return self._ir

    @property
    def source(self) -> tuple:
        """``("ebnf", text, root)``, ``("regex", pattern)``, ``("json_schema", text, options)``,
        ``("lark", text)``, ``("structural_tag", json)`` or ``("ir",)``: what the compiler compiles."""
        return self._source

    def __str__(self) -> str:
        from leapgen.grammar.gbnf_print import to_gbnf

        options = self._ir.options if isinstance(self._ir, ir.Grammar) else {}
        return to_gbnf(self._ir, rule_options={n: o.to_text() for n, o in options.items()}).rstrip("\n")

    def __repr__(self) -> str:
        return f"Grammar(source={self._source[0]!r})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, Grammar):
            return NotImplemented
        return self._ir == other._ir

    def __hash__(self) -> int:
        return hash(self._ir)

    # -- constructors ---------------------------------------------------------------------------

    @staticmethod
    def from_ebnf(ebnf_string: str, *, root_rule_name: str = "root") -> "Grammar":
        """From GBNF text (:mod:`leapgen.grammar.ebnf`).

        Raises
        ------
        GrammarError
            A syntax error (at ``line:column``), an undefined rule, no root rule.
        """
        from leapgen.grammar.ebnf import parse_ebnf

        return Grammar._make(parse_ebnf(ebnf_string, root_rule_name=root_rule_name),
                             ("ebnf", ebnf_string, root_rule_name))

    @staticmethod
    def from_regex(regex_string: str, *, print_converted_ebnf: bool = False) -> "Grammar":
        """From an ECMAScript regex, matched in full (:mod:`leapgen.grammar.regex`).

        Parameters
        ----------
        print_converted_ebnf : bool, default False
            Print the grammar's GBNF text (debugging).

        Raises
        ------
        RegexError
            Malformed or unsupported construct, at its offset.
        """
        from leapgen.grammar.regex import parse_regex

        g = Grammar._make(parse_regex(regex_string), ("regex", regex_string))
        if print_converted_ebnf:
            print(str(g))
        return g

    @staticmethod
    def from_json_schema(schema, *, any_whitespace: bool = True, indent: int | None = None,
                         separators: tuple[str, str] | None = None, strict_mode: bool = True,
                         max_whitespace_cnt: int | None = None, print_converted_ebnf: bool = False,
                         any_order: bool = False) -> "Grammar":
        """From a JSON Schema (str, dict or pydantic model class), with xgrammar's
        layout options (see :func:`json_schema_options`).

        Raises
        ------
        SchemaError
            Malformed schema or unsupported keyword, at its JSON pointer.
        GrammarError
            ``any_order=True``, a bad ``max_whitespace_cnt``.
        """
        text = schema_text(schema)
        options = json_schema_options(any_whitespace, indent, separators, strict_mode, max_whitespace_cnt,
                                      any_order)
        node, warnings = schema_ir(text, options)
        g = Grammar._make(node, ("json_schema", text, options), warnings)
        if print_converted_ebnf:
            print(str(g))
        return g

    @staticmethod
    def from_lark(lark_string: str, *, tokenizer_info=None, named_grammars=None) -> "Grammar":
        """From a Lark grammar with a ``start`` rule (:mod:`leapgen.grammar.lark`:
        the language of Lark's Earley parser).

        Parameters
        ----------
        tokenizer_info : TokenizerInfo, optional
            Accepted for xgrammar's signature (it resolves xgrammar's special
            token names, an extension leapgen's Lark front-end refuses by name).
        named_grammars : dict, optional
            xgrammar's ``@name`` references: refused when given.

        Raises
        ------
        GrammarError
            Syntax error or unsupported construct (line:column), ``named_grammars``.
        """
        from leapgen.grammar.lark import parse_lark

        refuse_named_grammars(named_grammars)
        return Grammar._make(parse_lark(lark_string), ("lark", lark_string))

    @staticmethod
    def from_structural_tag(*args, **kwargs) -> "Grammar":
        """From a structural tag (``StructuralTag``, its JSON text or dict, or the
        deprecated ``(tags, triggers)``); see :func:`structural_tag_grammar`."""
        return structural_tag_grammar(structural_tag_json(args, kwargs))

    @staticmethod
    def builtin_json_grammar() -> "Grammar":
        """xgrammar's JSON grammar: an object or array at the top level
        (:data:`XGRAMMAR_JSON_GBNF`)."""
        return Grammar.from_ebnf(XGRAMMAR_JSON_GBNF)

    @staticmethod
    def concat(*grammars: "Grammar") -> "Grammar":
        """The concatenation of the grammars' languages (their rules renamed apart)."""
        return Grammar._combine(grammars, ir.seq)

    @staticmethod
    def union(*grammars: "Grammar") -> "Grammar":
        """The union of the grammars' languages (their rules renamed apart)."""
        return Grammar._combine(grammars, ir.alt)

    @staticmethod
    def _combine(grammars, op) -> "Grammar":
        if not grammars or not all(isinstance(g, Grammar) for g in grammars):
            raise TypeError("concat / union take one or more Grammar objects")
        if all(not isinstance(g._ir, ir.Grammar) for g in grammars):
            return Grammar._make(op(*(g._ir for g in grammars)), ("ir",))
        rules: dict[str, ir.Node] = {}
        keep: set[str] = set()
        options: dict[str, ir.RuleOptions] = {}
        roots = []
        for k, g in enumerate(grammars):
            if isinstance(g._ir, ir.Grammar):
                renamed = rename_rules(g._ir, f"g{k}_")
                rules.update(renamed.rules)
                keep.update(renamed.keep)
                options.update(renamed.options)
                roots.append(ir.RuleRef(renamed.root))
            else:
                roots.append(g._ir)
        root = "root"
        while root in rules:
            root = "_" + root
        rules[root] = op(*roots)
        return Grammar._make(ir.Grammar(rules, root, frozenset(keep), options=options), ("ir",),
                             [w for g in grammars for w in g._warnings])

    # -- serialization ------------------------------------------------------------------------------

    def _to_doc(self) -> dict:
        return {"ir": ser.ir_to_json(self._ir), "warnings": list(self._warnings)}

    def serialize_json(self) -> str:
        """The grammar as versioned JSON text (its IR; see :mod:`leapgen.xgrammar.serialization`)."""
        return ser.to_text(self._to_doc(), "Grammar")

    @staticmethod
    def _from_doc(doc: dict) -> "Grammar":
        warnings = ser.field(doc, "warnings", list, "Grammar")
        if not all(isinstance(w, str) for w in warnings):
            raise DeserializeFormatError("Grammar: 'warnings' must be a list of str")
        return Grammar._make(ser.ir_from_json(doc.get("ir")), ("ir",), warnings)

    @staticmethod
    def deserialize_json(json_string: str) -> "Grammar":
        """Read :meth:`serialize_json`'s text.

        Raises
        ------
        InvalidJSONError, DeserializeFormatError, DeserializeVersionError
        """
        return Grammar._from_doc(ser.load_document(json_string, "Grammar"))


# -- structural tags ----------------------------------------------------------------------------------


class StructuralTagItem:
    """Deprecated in xgrammar: one tag of the legacy ``(tags, triggers)`` form,
    ``begin`` + a JSON value of ``schema`` + ``end``.

    Parameters
    ----------
    begin, end : str
    schema : str, dict or pydantic model class
    """

    __slots__ = ("begin", "schema", "end")

    def __init__(self, *, begin: str, schema: Any, end: str):
        self.begin, self.schema, self.end = begin, schema, end

    def __repr__(self) -> str:
        return f"StructuralTagItem(begin={self.begin!r}, end={self.end!r})"


class _Format(dict):
    """A structural-tag format as a dict whose keys read as attributes
    (``tag.format.at_least_one = True``, as SGLang sets it)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value


class StructuralTag:
    """A structural tag: ``{"type": "structural_tag", "format": {...}}`` (xgrammar's
    format, see its documentation). A data holder; compiling one is
    :func:`structural_tag_grammar`'s job.

    Parameters
    ----------
    format : dict
        The top-level format (``{"type": "triggered_tags", ...}``...).
    """

    def __init__(self, *, format: dict, type: str = "structural_tag"):
        if type != "structural_tag":
            raise ValueError(f"a StructuralTag has type 'structural_tag', got {type!r}")
        self.type = type
        self.format = _Format(format)

    @staticmethod
    def from_legacy_structural_tag(tags: list[StructuralTagItem], triggers: list[str]) -> "StructuralTag":
        """xgrammar's conversion of the deprecated ``(tags, triggers)`` form to a
        ``triggered_tags`` format of ``tag`` formats with JSON Schema contents."""
        formats = []
        for tag in tags:
            schema = tag.schema
            schema = json.loads(schema) if isinstance(schema, str) else json.loads(schema_text(schema))
            formats.append({"type": "tag", "begin": tag.begin,
                            "content": {"type": "json_schema", "json_schema": schema}, "end": tag.end})
        return StructuralTag(format={"type": "triggered_tags", "triggers": list(triggers), "tags": formats,
                                     "at_least_one": False, "stop_after_first": False})

    @staticmethod
    def from_json(json_str) -> "StructuralTag":
        """From JSON text or a dict ``{"type": "structural_tag", "format": {...}}``."""
        obj = json.loads(json_str) if isinstance(json_str, str) else json_str
        if not isinstance(obj, dict) or not isinstance(obj.get("format"), dict):
            raise ValueError("a structural tag is an object with a 'format' object")
        return StructuralTag(type=obj.get("type", "structural_tag"), format=obj["format"])

    def model_dump(self) -> dict:
        return {"type": self.type, "format": dict(self.format)}

    def model_dump_json(self, indent: int | None = None) -> str:
        return json.dumps(self.model_dump(), indent=indent)


def structural_tag_json(args: tuple, kwargs: dict) -> dict:
    """The structural tag of ``from_structural_tag`` / ``compile_structural_tag``'s
    arguments, as a dict (xgrammar's two calling forms).

    Raises
    ------
    TypeError
        Arguments of neither form.
    """
    if len(args) == 2 and not kwargs and isinstance(args[0], list) and isinstance(args[1], list):
        return StructuralTag.from_legacy_structural_tag(args[0], args[1]).model_dump()
    if not args and set(kwargs) == {"tags", "triggers"}:
        return StructuralTag.from_legacy_structural_tag(kwargs["tags"], kwargs["triggers"]).model_dump()
    if len(args) == 1 and not kwargs:
        value = args[0]
    elif not args and set(kwargs) == {"structural_tag"}:
        value = kwargs["structural_tag"]
    else:
        raise TypeError("Invalid arguments for from_structural_tag: pass a structural tag, or (tags, triggers)")
    if isinstance(value, StructuralTag):
        return value.model_dump()
    if isinstance(value, str):
        from leapgen.errors import InvalidJSONError

        try:
            value = json.loads(value)
        except ValueError as e:
            raise InvalidJSONError(f"the structural tag is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise TypeError("Invalid argument type for from_structural_tag")
    return value


def structural_tag_grammar(structural_tag: dict) -> Grammar:
    """The grammar of a structural tag (:mod:`leapgen.grammar.structural`), its markers as
    text (no vocabulary yet: :meth:`GrammarCompiler.compile_grammar` compiles it through
    :meth:`leapgen.GrammarCompiler.compile_structural_tag`, where a marker that is one added
    token also matches that token).

    Raises
    ------
    StructuralTagError
        (``InvalidStructuralTagError``; a RuntimeError) a malformed tag or an
        unsupported format, at its JSON pointer.
    """
    from leapgen.grammar.structural import structural_tag_to_ir

    node, warnings = structural_tag_to_ir(structural_tag)
    return Grammar._make(node, ("structural_tag", json.dumps(structural_tag)), warnings)
