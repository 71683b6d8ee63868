"""A structural tag -> grammar IR (one regular node, or a grammar of rules).

Each format is the language below (``F(P)`` is free text scanned for the
strings of ``P``, see :mod:`.free_text`; ``ends`` are the string ends of the nearest
enclosing ``tag``, xgrammar's automatic end detection):

- ``const_string``: its value; ``regex``, ``grammar``, ``json_schema``: the
  front-end's language (JSON with flexible whitespace and strict objects by
  default, as xgrammar compiles it; a fixed layout on request); ``token``:
  the token alone.
- ``any_text``: ``F(excludes + ends)``, at most ``max_chars`` characters.
- ``sequence``, ``or``, ``optional``, ``star``, ``plus``, ``repeat``: as in
  a regex; ``ends`` pass through them.
- ``tag``: ``begin content end``; its ``content`` gets ``ends`` = its end
  strings (none for a token end).
- ``triggered_tags``, with ``P = triggers + excludes + ends``, ``T`` = any of
  its tags and ``D`` = free text dispatching on a trigger, then a tag that
  trigger starts: ``D* F(P)``; with ``at_least_one``: ``T D* F(P)`` (no text
  before the first tag); with ``stop_after_first``: ``F(P) | D``; with both:
  ``T``.
- ``tags_with_separator``: ``(T (sep T)*)?``; ``at_least_one`` drops the
  ``?``; ``stop_after_first``: ``T?``; both: ``T``.

Begins, ends, triggers, separators and constant strings are marker strings:
where they hold the text of one special or added token of the vocabulary,
that token may stand for the text (:class:`.free_text.Markers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from leapgen.errors import GrammarError, RegexError, SchemaError, StructuralTagError
from leapgen.grammar import ir
from leapgen.grammar.cfg import rename_rules
from leapgen.grammar.ebnf import parse_ebnf
from leapgen.grammar.json import json_schema_to_ir
from leapgen.grammar.lark import parse_lark
from leapgen.grammar.regex import parse_regex

from .free_text import FreeText, Markers
from .reader import _pointer, parse_structural_tag
from .tree import (AnyText, ConstString, EbnfGrammar, JsonSchema, Or, Regex, Repeat, Sequence as SequenceFormat,
                   StructuralTag, Tag, TagsWithSeparator, Token, TriggeredTags)

ROOT = "root"
#: A tag with more JSON Schema and grammar contents than this builds each regular one as a DFA of its own,
#: embedded in the tag's (:class:`~leapgen.grammar.ir.Embed`): 128 tool schemas inlined would pass the
#: 100,000-state limit of one subset construction, embedded they make a DFA of ~23,000 states.
INLINE_CONTENTS = 16


def structural_tag_to_ir(tag, *, added_tokens: Mapping[str, Sequence[int]] | None = None,
                         any_whitespace: bool = True, separators: tuple[str, str] | None = None,
                         strict_mode: bool = True, rules: str = "auto") -> tuple[ir.Node | ir.Grammar, list[str]]:
    """Lower a structural tag to grammar IR.

    Parameters
    ----------
    tag : dict, str, bytes or StructuralTag
        The tag, either form (see :mod:`leapgen.grammar.structural`), or its JSON text.
    added_tokens : mapping of str to sequence of int, optional
        The vocabulary's special and added tokens that marker strings may be
        given as (text -> ids, stop tokens left out); also what ``token``
        formats may name. None: no vocabulary (markers are text; a ``token``
        format is an error).
    any_whitespace : bool, default True
        The layout of ``json_schema`` contents: flexible whitespace (as
        xgrammar compiles them; ``max_whitespace_cnt`` bounds each run), or,
        False, the fixed layout of ``separators``, where every key is forced
        text (jump-forward).
    separators : (str, str) or None
        With ``any_whitespace=False``: item and key separators, default
        ``(",", ":")``.
    strict_mode : bool, default True
        Objects admit no property their schema does not allow explicitly (as
        in xgrammar); False: the JSON Schema specification's default.
    rules : {"auto", "all"}, default "auto"
        ``"auto"``: schema and grammar contents are inlined, unless the tag has
        more than :data:`INLINE_CONTENTS` of them (then each regular one is
        built as a DFA of its own and embedded); ``"all"``: every tag's content
        (and every schema and grammar) is a rule of its own, so that
        alternatives whose contents overlap (two tags with one begin and free
        text in both) are carried by the pushdown layer, not multiplied into
        one DFA.

    Returns
    -------
    (ir.Node or ir.Grammar, list of str)
        The language (a grammar of rules, root ``"root"``, when a content
        needs recursion) and the warnings of its contents, each prefixed with
        the JSON pointer of its format.

    Raises
    ------
    StructuralTagError
        A malformed tag, or a content its front-end refuses (the pointer leads
        to that content, then the place inside it: a schema's own pointer, a
        regex offset, an EBNF line:column).
    """
    if rules not in ("auto", "all"):
        raise ValueError(f"rules must be 'auto' or 'all', got {rules!r}")
    parsed = parse_structural_tag(tag)
    contents = sum(isinstance(f, (JsonSchema, EbnfGrammar)) for f in _formats(parsed.format))
    lowering = _Lowering(Markers(added_tokens), vocabulary=added_tokens is not None,
                         rule_contents=rules == "all" or contents > INLINE_CONTENTS, rule_tags=rules == "all",
                         json_options=dict(any_whitespace=any_whitespace, separators=separators,
                                           strict_mode=strict_mode))
    root = lowering.node(parsed.format, None)
    if not lowering.rules:
        return root, lowering.warnings
    return ir.Grammar({ROOT: root, **lowering.rules}, ROOT, frozenset(lowering.keep)), lowering.warnings


class _Lowering:
    """One lowering (its sub-grammars' rules, their names, the warnings)."""

    def __init__(self, markers: Markers, *, vocabulary: bool, rule_contents: bool, rule_tags: bool,
                 json_options: dict):
        self.markers = markers
        self.rule_tags = rule_tags
        self.json_options = json_options
        self.vocabulary = vocabulary
        self.rule_contents = rule_contents
        self.rules: dict[str, ir.Node] = {}
        self.keep: set[str] = set()
        self.warnings: list[str] = []
        self._grammars = 0

    def node(self, f, ends: tuple[str, ...] | None) -> ir.Node:
        """The language of format ``f``; ``ends``: the string ends of the nearest enclosing tag
        (None outside any, or inside a tag whose end is a token)."""
        if isinstance(f, ConstString):
            return self.markers.text(f.value)
        if isinstance(f, AnyText):
            body = FreeText((), f.excludes + self._stops(ends, f)).text()
            if f.max_chars is None:
                return body
            return ir.intersect(body, ir.repeat(ir.ANY_CHAR, 0, f.max_chars))
        if isinstance(f, SequenceFormat):
            return ir.seq(*(self.node(e, ends) for e in f.elements))
        if isinstance(f, Or):
            return ir.alt(*(self.node(e, ends) for e in f.elements))
        if isinstance(f, Repeat):
            return ir.repeat(self.node(f.content, ends), f.min, f.max)
        if isinstance(f, Tag):
            return self.tag(f)
        if isinstance(f, TriggeredTags):
            return self.triggered_tags(f, ends)
        if isinstance(f, TagsWithSeparator):
            return self.tags_with_separator(f)
        if isinstance(f, Token):
            return self.token(f)
        if isinstance(f, JsonSchema):
            return self.json_schema(f)
        if isinstance(f, Regex):
            try:
                return parse_regex(f.pattern)
            except RegexError as e:
                raise StructuralTagError(_bare(e), pointer=_pointer(f.pointer, "pattern"), inner=e.where) from None
        if isinstance(f, EbnfGrammar):
            try:
                return self.content(parse_lark(f.text) if f.syntax == "lark" else parse_ebnf(f.text))
            except GrammarError as e:
                raise StructuralTagError(_bare(e), pointer=_pointer(f.pointer, "grammar"), inner=e.where) from None
        raise TypeError(f"not a structural tag format: {f!r}")

    @staticmethod
    def _stops(ends: tuple[str, ...] | None, f) -> tuple[str, ...]:
        """The enclosing tag's non-empty ends, which stop the unlimited format ``f``."""
        if ends is None:
            return ()
        stops = tuple(e for e in ends if e)
        if not stops:
            raise StructuralTagError(f"{type(f).__name__} runs until the end of its enclosing tag, whose end strings "
                                     "are all empty: give the tag a non-empty end", pointer=f.pointer)
        return stops

    def tag(self, f: Tag) -> ir.Node:
        begin = self.token(f.begin) if isinstance(f.begin, Token) else self.markers.text(f.begin)
        if isinstance(f.end, Token):
            return ir.seq(begin, self.rule(self.node(f.content, None)), self.token(f.end))
        end = ir.alt(*(self.markers.text(e) for e in f.end))
        return ir.seq(begin, self.rule(self.node(f.content, f.end)), end)

    def triggered_tags(self, f: TriggeredTags, ends: tuple[str, ...] | None) -> ir.Node:
        excludes = f.excludes + self._stops(ends, f)
        tags = [self.tag(t) for t in f.tags]
        first = ir.alt(*tags)
        if f.at_least_one and f.stop_after_first:
            return first
        scan = FreeText(f.triggers, excludes)
        dispatches = []
        for i, trigger in enumerate(f.triggers):
            started = [node for t, node in zip(f.tags, tags) if t.begin.startswith(trigger)]
            if not started:
                raise StructuralTagError(f"the trigger {trigger!r} starts no tag's begin",
                                         pointer=_pointer(f.pointer, "triggers", i))
            dispatches.append(ir.seq(scan.before(trigger), ir.alt(*started)))
        dispatch = ir.alt(*dispatches)
        text = scan.text()
        if f.stop_after_first:
            return ir.alt(text, dispatch)
        loop = ir.seq(ir.star(dispatch), text)
        return ir.seq(first, loop) if f.at_least_one else loop

    def tags_with_separator(self, f: TagsWithSeparator) -> ir.Node:
        tags = ir.alt(*(self.tag(t) for t in f.tags))
        body = tags if f.stop_after_first else ir.join(tags, self.markers.text(f.separator))
        return body if f.at_least_one else ir.opt(body)

    def token(self, f: Token) -> ir.Node:
        if not self.vocabulary:
            raise StructuralTagError("a token format needs the vocabulary: compile the tag with "
                                     "GrammarCompiler.compile_structural_tag", pointer=f.pointer)
        if isinstance(f.token, str):
            ids = self.markers.by_text.get(f.token)
            if not ids:
                raise StructuralTagError(f"no special or added token of this vocabulary (stop tokens aside) has the "
                                         f"text {f.token!r}", pointer=_pointer(f.pointer, "token"))
            return self.markers.tokens(ids)
        if f.token not in self.markers.ids:
            raise StructuralTagError(f"token {f.token} is not a special or added token of this vocabulary (or it "
                                     "is a stop token, which ends generation instead)",
                                     pointer=_pointer(f.pointer, "token"))
        return self.markers.tokens((f.token,))

    def json_schema(self, f: JsonSchema) -> ir.Node:
        options = dict(self.json_options)
        if f.max_whitespace is not None:
            options["max_whitespace"] = f.max_whitespace
        try:
            node, warnings = json_schema_to_ir(f.schema, **options)
        except SchemaError as e:
            raise StructuralTagError(_bare(e), pointer=f.pointer + e.pointer) from None
        except GrammarError as e:
            raise StructuralTagError(_bare(e), pointer=f.pointer, inner=e.where) from None
        self.warnings.extend(f"{f.pointer}: {w}" for w in warnings)
        return self.content(node)

    def content(self, node: ir.Node | ir.Grammar) -> ir.Node:
        """A schema's or grammar's language: inlined; when the tag has many contents, a DFA of its own
        embedded (a rule of its own with ``rules="all"``, or when it needs recursion)."""
        if self.rule_tags or isinstance(node, ir.Grammar):
            node = self.grammar(node)
            return self.rule(node, force=True) if self.rule_contents else node
        return ir.embed(node) if self.rule_contents else node

    def rule(self, node: ir.Node, *, force: bool = False) -> ir.Node:
        """``node`` as a kept rule of its own (with ``rules="all"``, or ``force``), else itself."""
        if not (force or self.rule_tags) or isinstance(node, ir.RuleRef):
            return node
        self._grammars += 1
        name = f"s{self._grammars}.content"
        self.rules[name] = node
        self.keep.add(name)
        return ir.RuleRef(name)

    def grammar(self, node: ir.Node | ir.Grammar) -> ir.Node:
        """``node``, or a reference to the root of grammar ``node``, whose rules join this lowering's."""
        if not isinstance(node, ir.Grammar):
            return node
        self._grammars += 1
        renamed = rename_rules(node, f"s{self._grammars}.")
        self.rules.update(renamed.rules)
        self.keep.update(renamed.keep)
        return ir.RuleRef(renamed.root)


def free_text_stops(tag) -> frozenset | None:
    """The last character of every string the free text of ``tag`` scans for (triggers, excluded
    strings, the ends of the tags around it); None when the tag has no free text (no ``any_text``
    nor ``triggered_tags``). No character outside it can complete one (see
    :meth:`leapgen.compiler.token_index.TokenIndex.with_free_text_slice`)."""
    parsed = parse_structural_tag(tag)
    formats = list(_formats(parsed.format))
    if not any(isinstance(f, (AnyText, TriggeredTags)) for f in formats):
        return None
    strings = [s for f in formats for s in _scanned(f)]
    return frozenset(s[-1] for s in strings if s)


def _scanned(f) -> tuple:
    if isinstance(f, AnyText):
        return f.excludes
    if isinstance(f, TriggeredTags):
        return f.triggers + f.excludes
    if isinstance(f, Tag) and not isinstance(f.end, Token):
        return f.end
    return ()


def _formats(f):
    """``f`` and every format below it."""
    yield f
    if isinstance(f, (SequenceFormat, Or)):
        for e in f.elements:
            yield from _formats(e)
    elif isinstance(f, Repeat):
        yield from _formats(f.content)
    elif isinstance(f, Tag):
        yield from _formats(f.content)
    elif isinstance(f, (TriggeredTags, TagsWithSeparator)):
        for t in f.tags:
            yield from _formats(t)


def _bare(e: GrammarError) -> str:
    """The message of ``e`` without the ``(at ...)`` its constructor appended."""
    text = str(e)
    suffix = f" (at {e.where})"
    return text[:-len(suffix)] if e.where is not None and text.endswith(suffix) else text


__all__ = ["free_text_stops", "structural_tag_to_ir"]
