"""JSON Schema front-end: a schema (draft 2020-12, draft-07 forms) -> byte-level IR.

:func:`json_schema_to_ir` returns an :mod:`leapgen.grammar.ir` term over UTF-8
bytes whose language is the JSON texts (in the chosen layout) of the instances
the schema accepts, plus a list of warnings. Every subschema is compiled with
its JSON pointer, and every error names the pointer of the offending keyword.
Where a regular language cannot express the schema (recursive ``$ref``,
any-JSON-value nested to any depth) the result is an :class:`ir.Grammar` of
rules for the pushdown layer (``cfg=True``, the default).

Supported keywords
------------------
==========================  ===================================================
keyword                     support
==========================  ===================================================
``type``                    all seven names and lists of them
``enum`` / ``const``        any JSON value, matched as its JSON text (see
                            :mod:`.values`); members are filtered by
                            sibling keywords (``maxLength`` etc.), else
                            intersected with them
``properties``              members in **schema order** (then names only in
                            ``required``); optional ones skippable; commas
                            right in every combination (linear-size IR);
                            with ``any_order=True`` in any order, each at
                            most once (a keyed object, :mod:`.keyed`: the
                            keys written are matcher state)
``required``                yes
``additionalProperties``    ``false``, ``true`` or a schema; extra members come
                            **after** the listed ones; their keys never equal a
                            listed name in any spelling (``ir.Diff``). Missing
                            with ``strict_mode=True`` and ``properties`` or
                            ``patternProperties`` declared: no extra members
                            (xgrammar/OpenAI strict); otherwise any
``patternProperties``       yes: a listed name matching a pattern gets both
                            schemas; an extra key matching patterns gets their
                            schemas (overlapping patterns: every combination,
                            merged), else ``additionalProperties``
                            (:mod:`.objects`)
``propertyNames``           yes: listed names are checked, extra keys
                            intersected with the name schema
``min/maxProperties``       exact, by counting members (SchemaError beyond a
                            size bound, :mod:`.objects`)
``dependentRequired``,      rewritten as ``anyOf`` (:mod:`.logic`); the
``dependentSchemas``        draft-07 ``dependencies`` too
``not``                     rewritten as the complement schema when
                            expressible (:func:`.logic.negate`), else
                            SchemaError
``if``/``then``/``else``    ``anyOf [allOf [if, then], allOf [not if, else]]``
``items``/``prefixItems``   yes (draft-07 array ``items`` + ``additionalItems``
                            too); ``prefixItems`` without ``items`` in strict
                            mode: no further items
``minItems``/``maxItems``   yes
``uniqueItems: true``       exact for items from a small finite set of
                            scalars (:mod:`.unique`) or at most one
                            item; otherwise not enforced (a warning)
``minLength``/``maxLength`` yes, in code points (an escape is one character);
                            a bound above :data:`.lengths.MAX_EXACT_LENGTH`
                            is counted in blocks of a rule (exact, CFG mode);
                            next to ``pattern``/``format`` or in an
                            intersection it is not enforced (a warning)
``pattern``                 yes: ECMAScript via :func:`..regex.parse_regex`
                            (unanchored search), re-encoded as JSON string
                            content (:mod:`.strings`)
``format``                  see :data:`.formats.FORMATS`; other formats:
                            SchemaError with ``strict_mode=True``; otherwise
                            ignored (an annotation, as 2020-12 says), with a
                            warning for standard formats leapgen lacks
``minimum``/``maximum``     integers: exact ranges; numbers: exact, see
``exclusiveMin/Maximum``    :mod:`.numbers` (draft-04 boolean forms too)
``multipleOf``              see :func:`.numbers.multiple_of` (exact, or
                            SchemaError)
``anyOf``                   yes (sibling keywords merged into each branch)
``oneOf``                   exact: ``anyOf`` when the branches are provably
                            disjoint (types, values, string patterns, a
                            required property on which the branches
                            disagree, nested alternatives:
                            :mod:`.disjoint`); else each branch
                            conjoined with the complements of the branches it
                            may overlap (:func:`.logic.negate`, at most 5
                            per branch, grammar at most
                            ``MAX_EXCLUSIVE_SIZE``); else ``anyOf`` with a
                            warning
``allOf``                   merged into one schema when exact
                            (:mod:`.merge`)
``$ref``                    ``#/...`` JSON pointers (``~0``/``~1``,
                            percent-decoding), ``$anchor``, ``$id`` base URIs
                            of embedded resources (:mod:`.refs`);
                            recursion becomes CFG rules (SchemaError with
                            ``cfg=False``, with the indent layout, through a
                            ``$ref`` with sibling keywords, or for a bare
                            ``$ref`` chain that loops); no remote documents;
                            siblings of ``$ref`` apply (2020-12), or are
                            ignored when the root's ``$schema`` is draft 4-7
``unevaluatedProperties``   as ``additionalProperties`` after merging
``unevaluatedItems``        as ``items`` after merging
annotations                 ignored: title, description, default, examples, ...
``contains``                with ``min/maxContains``: items split into
                            matching and not matching (``not contains``),
                            counted; SchemaError next to ``prefixItems``,
                            ``maxItems``, ``unevaluatedItems``
``$dynamicRef``             SchemaError (see ``UNSUPPORTED``)
unknown keywords            ignored (a warning with ``strict_mode=True``)
==========================  ===================================================

Type inference: with ``strict_mode=True`` a schema without ``type`` whose
keywords all belong to one type (``properties`` -> object, ``items`` ->
array, ``pattern`` -> string, ``minimum`` -> number, ...) accepts only that
type; with ``strict_mode=False`` it also accepts every other type, as the spec
says. A schema that allows any value (``{}``, ``true``, ``additionalProperties:
true``, arrays without ``items``) is the rule ``json_value`` (any depth); with
``cfg=False`` or the indent layout, containers inside it nest at most
:data:`.layout.ANY_VALUE_DEPTH` deep, with a warning naming the bound.

Known gaps (all documented where they live): objects in schema order unless
``any_order=True`` (members in ``properties`` order, then names only in
``required``, then extra members; ``enum``/``const`` objects keep their own
order either way); equivalent spellings (``1.0`` for an
integer, ``\u0061`` in a string constrained by ``pattern``, ``format``,
``enum``, ``const`` or a negation, or in a key next to ``patternProperties``
/ ``propertyNames``) are not accepted; bounded numbers, and numbers under
``multipleOf`` or a negated ``enum``, have no exponent unless the bound is 0;
``oneOf`` that cannot be made exclusive is looser (warning); a repeated extra
key is detected only where the extra keys are a finite set of at most 64
names (:mod:`.keyed`; else a warning next to ``minProperties`` /
``maxProperties``).

Layout options (see :func:`json_schema_to_ir`): ``any_whitespace`` (bounded
by ``max_whitespace``), or exact ``separators`` / ``indent``; properties in
schema order, or in any order with ``any_order=True``. Rules: every
``$ref`` target and large array items / property values are rules; those
not recursive are inlined unless copies would blow the automaton up
(:mod:`.rules`), in which case the result is a CFG even without
recursion.

No whitespace is allowed before or after the whole JSON text.
"""

from __future__ import annotations

import json
import re

from leapgen.errors import SchemaError

from .. import ir
from ..ir import Node
from ..cfg import _recursive_rules, inline_rules, rule_refs, simplify_grammar
from .applicators import ANNOTATIONS, Applicators
from .containers import compile_array
from .document import load_schema, too_deep
from .formats import FORMATS, STANDARD_FORMATS
from .layout import ANY_VALUE_DEPTH, Layout, any_value, any_value_rule, make_layout
from .lengths import counted_size, expand_counted_rules
from .merge import (ABSENT, BLIND_ITEMS, MISSING, NON_INTEGER, NOT_ENUM, NOT_FORMATS, NOT_PATTERNS, PROPS,
                    TYPE_NAMES, VALIDATION_KEYWORDS)
from .objects import compile_object
from .refs import RefIndex, join_pointer
from .rules import DUPLICATION_BUDGETS, TARGET_SIZE, expanded_size, grammar_size, kept_rules
from .scalars import compile_integer, compile_number, compile_string, exclude_values
from .values import check, check_json_value, dedupe, json_equal, values_node

TYPE_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties", "unevaluatedProperties", "patternProperties",
               "propertyNames", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
               "dependencies", ABSENT, PROPS),
    "array": ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "unevaluatedItems",
              "uniqueItems", "contains", "minContains", "maxContains", BLIND_ITEMS),
    "string": ("minLength", "maxLength", "pattern", "format", NOT_PATTERNS, NOT_FORMATS),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", NON_INTEGER),
}
KEYWORD_TYPE = {k: t for t, ks in TYPE_KEYWORDS.items() for k in ks}
APPLICATORS = ("$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else")
UNSUPPORTED = {"$dynamicRef": None, "$recursiveRef": None}
"""Validation keywords leapgen cannot enforce yet -> the one argument value
that makes the keyword a no-op (``None``: none)."""

SUPPORTED = frozenset({"type", "enum", "const", NOT_ENUM, *APPLICATORS, *KEYWORD_TYPE}) - UNSUPPORTED.keys()


MAX_WARNINGS = 50
ANY_RULE = "json_value"
MAX_EXCLUSIVE_SIZE = 60_000
"""Largest grammar (IR nodes, rules counted once) kept with exclusive ``oneOf``
branches; beyond it the schema is compiled again with ``oneOf`` as ``anyOf``."""
RULE_MIN_SIZE = 300
"""Array items and property values at least this large (IR nodes, tree
expanded; an array item's copies under ``maxItems`` or ``minItems`` together)
become rule candidates (:meth:`_Compiler.rule`)."""
INLINE_ALL_SIZE = DUPLICATION_BUDGETS[0]
"""Rule candidates alone (no recursion) whose whole expansion is at most this
large are all inlined (:func:`.rules.kept_rules` would keep none)."""


def _refuse_lone_surrogates(schema: object) -> None:
    """Raise SchemaError at the JSON pointer of the first string (a key or a
    value) holding a lone UTF-16 surrogate (JSON text may spell one as
    ``"\\ud800"``): it has no UTF-8 form, so no generated text can hold it."""
    try:  # the common case in one C pass: no surrogate anywhere (the walk below finds the pointer)
        if not _LONE_SURROGATE.search(json.dumps(schema, ensure_ascii=False)):
            return
    except (TypeError, ValueError, RecursionError):
        pass  # not plain JSON data: the walk (and the compiler after it) will say where
    todo = [(schema, "")]
    while todo:
        node, ptr = todo.pop()
        if isinstance(node, str):
            if _LONE_SURROGATE.search(node):
                raise SchemaError("a string holds a lone UTF-16 surrogate, which has no UTF-8 form", pointer=ptr)
        elif isinstance(node, dict):
            for k, v in node.items():
                if isinstance(k, str) and _LONE_SURROGATE.search(k):
                    raise SchemaError(f"the name {k!r} holds a lone UTF-16 surrogate, which has no UTF-8 form",
                                      pointer=join_pointer(ptr, k.encode("utf-8", "backslashreplace").decode()))
                todo.append((v, join_pointer(ptr, k)))
        elif isinstance(node, list):
            todo.extend((v, join_pointer(ptr, i)) for i, v in enumerate(node))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_schema_to_ir(schema, *, any_whitespace: bool = True, indent=None, separators=None,
                      strict_mode: bool = True, max_whitespace: int = 20, any_order: bool = False,
                      cfg: bool = True, whitespace: Node | None = None,
                      count_lengths: bool = False) -> tuple[Node | ir.Grammar, list[str]]:
    """Compile a JSON Schema to byte-level grammar IR.

    Parameters
    ----------
    schema : dict or bool or str
        The schema; a ``str`` is parsed as JSON text.
    any_whitespace : bool, default True
        Allow ``[ \\t\\n\\r]{0,max_whitespace}`` wherever JSON allows
        whitespace; ``indent`` and ``separators`` are then ignored.
    indent : int or str or None, default None
        With ``any_whitespace=False``: the exact layout of
        ``json.dumps(indent=indent)``; None: one line.
    separators : (str, str) or None, default None
        With ``any_whitespace=False``: (item separator, key separator);
        default ``(",", ":")``, or ``(",", ": ")`` with an indent.
    strict_mode : bool, default True
        No extra object members / array items unless the schema allows them
        explicitly, type inference from keywords, unknown formats are errors.
        False: JSON Schema defaults (see the module docstring).
    max_whitespace : int, default 20
        Bound of each whitespace run with ``any_whitespace``.
    any_order : bool, default False
        An object's properties (declared and extra) in any order, each at
        most once, every required one present (a keyed object:
        :mod:`.keyed`); False: schema order.
    cfg : bool, default True
        Use context-free rules where a regular language cannot say it
        exactly: recursive ``$ref`` and any-JSON-value (unbounded nesting).
        False (or the indent layout, whose indentation depends on depth):
        recursion raises SchemaError and any-values nest at most
        :data:`.layout.ANY_VALUE_DEPTH` deep (with a warning).
    whitespace : ir.Node or None, default None
        The language of each whitespace run (implies ``any_whitespace``);
        None: ``[ \\t\\n\\r]{0,max_whitespace}``. The caller makes sure
        it matches JSON whitespace only.
    count_lengths : bool, default False
        Long ``minLength``/``maxLength`` of plain strings as counted regions
        (:class:`ir.Counted`, :mod:`.lengths`): the count is kept by the
        matcher, not by states. Only where the result is one regular node;
        else (recursion, rules kept) they are written out as without it.

    Returns
    -------
    (ir.Node or ir.Grammar, list of str)
        The language and the warnings (approximations made, ignored keywords).
        An :class:`ir.Grammar` (root ``"root"``, recursive rules only, as
        :func:`leapgen.grammar.cfg.simplify_grammar` leaves it) only when the
        schema needs recursion; otherwise one regular :class:`ir.Node`.

    Raises
    ------
    SchemaError
        Malformed schema, unsupported keyword, recursion, or a schema that
        admits no value; ``pointer`` names the place.
    ValueError
        Malformed layout options.

    Does not mutate ``schema``.
    """
    layout = make_layout(any_whitespace, indent, separators, max_whitespace, whitespace)
    any_whitespace = layout.any_whitespace
    schema = load_schema(schema)
    _refuse_lone_surrogates(schema)
    ignored = any_whitespace and (indent is not None or separators is not None)
    options = dict(strict_mode=strict_mode, cfg=cfg, ignored_layout=ignored, any_order=bool(any_order),
                   count_lengths=bool(count_lengths))
    try:
        try:
            return _compile(schema, layout, exclusive_one_of=True, **options)
        except _TooLarge:
            # making overlapping oneOf branches exclusive grew the grammar too much: anyOf with a warning
            return _compile(schema, layout, exclusive_one_of=False, **options)
    except RecursionError:
        raise too_deep(schema) from None


class _TooLarge(Exception):
    """The grammar built with exclusive oneOf branches is too large."""


def _compile(schema, layout: Layout, *, strict_mode: bool, cfg: bool, ignored_layout: bool, any_order: bool,
             exclusive_one_of: bool, count_lengths: bool):
    comp = _Compiler(schema, layout, strict_mode, cfg)
    comp.exclusive_one_of = exclusive_one_of
    comp.any_order = any_order
    comp.count_lengths = count_lengths
    if ignored_layout:
        comp.warn("", "indent/separators are ignored because any_whitespace=True")
    try:
        node = comp.compile(schema, "", 0)
    except SchemaError as exc:
        if comp.used_exclusive and "expands to more than" in str(exc):
            raise _TooLarge() from exc
        raise
    rules = {"root": node, **comp.rules}
    regular = _regular_with_counts(rules) if comp.counted and not comp.used_exclusive else None
    if regular is not None:
        node = regular
    else:
        if comp.counted:
            rules = expand_counted_rules(comp, rules)  # what a compile without counting makes
        node = _decide_rules(comp, rules)
    if node == ir.NOTHING:
        raise SchemaError("the schema admits no JSON value", pointer="")
    return node, comp.warnings


def _decide_rules(comp, rules: dict) -> Node | ir.Grammar:
    """The root with the rules inlined that need not stay (:func:`.rules.kept_rules`)."""
    if comp.used_exclusive and grammar_size(rules) > MAX_EXCLUSIVE_SIZE:
        raise _TooLarge()
    if comp.rules and comp.rules.keys() <= comp.candidate_names and expanded_size(rules) <= INLINE_ALL_SIZE:
        return inline_rules(rules, "root")  # no rule recurses, and kept_rules would keep none: sooner
    if comp.rules:
        refs = {name: rule_refs(body) for name, body in rules.items()}
        kept = kept_rules(rules, "root", refs) | comp.forced_rules
        return simplify_grammar(ir.Grammar(rules, "root", kept, tuple(comp.keyed)), refs)
    return rules["root"]


def _regular_with_counts(rules: dict) -> Node | None:
    """The schema's language as one regular node keeping its counted strings (:class:`ir.Counted`):
    every rule inlined, where none recurses and the automaton stays within the rules' size target
    counting each region once (:func:`.lengths.counted_size`); else None (a context-free grammar
    keeps no counter: the caller writes the counts out and decides the rules as without them)."""
    if len(rules) > 1:
        refs = {name: rule_refs(body) & rules.keys() for name, body in rules.items()}
        if _recursive_rules(refs):
            return None
    node = inline_rules(rules, "root") if len(rules) > 1 else rules["root"]
    return node if counted_size(node) <= TARGET_SIZE else None


_ptr = join_pointer


class _Compiler(Applicators):
    """One compilation: the root document, layout, caches and warnings."""

    ignored_keywords = ANNOTATIONS
    validation_keywords = VALIDATION_KEYWORDS

    def __init__(self, root, layout: Layout, strict: bool, cfg: bool = False):
        self.root = root
        self.refs = RefIndex(root)
        dialect = root.get("$schema") if isinstance(root, dict) else None
        self.legacy_ref = isinstance(dialect, str) and any(f"draft-0{d}" in dialect for d in (3, 4, 6, 7))
        self.layout = layout
        self.strict = bool(strict)
        self.warnings: list[str] = []
        self._cache: dict = {}
        self._keep: list = []
        self._ref_stack: list[str] = []
        self.cfg = bool(cfg) and not layout.depth_dependent
        self.rules: dict[str, Node] = {}  # rule name -> body (cfg mode)
        self.forced_rules: set[str] = set()  # rules kept even when inlining them would be cheap
        self._in_product = 0  # > 0 while compiling an operand of an intersection (no recursive rules there)
        self._any_memo: dict = {}
        self._normal: dict = {}  # id(schema) -> normalized schema
        self._rule_names: dict = {}  # rule body -> its name (see rule())
        self.candidate_names: set[str] = set()  # the rules made by rule(), in self.rules
        self._active: dict = {}  # compile() keys in progress -> rule name once re-entered
        self.exclusive_one_of = True  # overlapping oneOf: conjoin each branch with the others' complements
        self.used_exclusive = False
        self.any_order = False  # objects' members in any order (keyed objects)
        self.keyed: list[ir.KeyedObject] = []  # the keyed objects made (:mod:`.keyed`), their rules in self.rules
        self._cfg_asked = bool(cfg)
        self.count_lengths = False  # long string lengths as counted regions (ir.Counted; see .lengths)
        self.counted = False  # a counted region was made
        self.class_runs: dict = {}  # counted region of a pattern's class -> the pointers of its strings

    # -- bookkeeping ---------------------------------------------------------

    def warn(self, ptr: str, message: str) -> None:
        text = f"{ptr or '/'}: {message}"
        if text in self.warnings:
            return
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)
        elif len(self.warnings) == MAX_WARNINGS:
            self.warnings.append("... further warnings omitted")

    def any_value(self, ptr: str, depth: int) -> Node:
        if self.cfg and not self._in_product:
            if ANY_RULE not in self.rules:
                self.rules[ANY_RULE] = any_value_rule(self.layout, ANY_RULE)
            return ir.RuleRef(ANY_RULE)
        why = ("inside an enum/const or propertyNames intersection" if self.cfg else
               "with the indent layout" if self.layout.depth_dependent else "with cfg=False")
        self.warn(ptr, f"any JSON value allowed here, but containers inside it may nest at most {ANY_VALUE_DEPTH} "
                       f"deep ({why}; deeper values are rejected)")
        return any_value(self.layout, depth, ANY_VALUE_DEPTH, self._any_memo)

    def rule(self, node: Node, name: str, copies: int = 1) -> Node:
        """``node`` as a rule (a candidate for :func:`.rules.kept_rules`) when it, or its ``copies``
        copies in the caller's expansion together (an array item under ``maxItems``/``minItems``), are
        large and rules are allowed here; else ``node``."""
        if (not self.cfg or self._in_product or isinstance(node, ir.RuleRef)
                or ir.tree_size(node) * max(copies, 1) < RULE_MIN_SIZE):
            return node
        key = self._rule_names.get(node)
        if key is None:  # one rule per distinct body
            key = "node:" + name
            while key in self.rules:
                key += "'"
            self.rules[key] = node
            self._rule_names[node] = key
            self.candidate_names.add(key)
        return ir.RuleRef(key)

    def format_asserted(self, fmt) -> bool:
        """Whether ``format: fmt`` constrains values (else it is an annotation)."""
        return isinstance(fmt, str) and (fmt in FORMATS or self.strict or fmt in STANDARD_FORMATS)

    def keep(self, schema):
        """Keep a schema built during compilation alive (caches key on ``id``)."""
        self._keep.append(schema)
        return schema

    # -- entry ---------------------------------------------------------------

    def compile(self, schema, ptr: str, depth: int) -> Node:
        """The IR of ``schema`` (at ``ptr``) for a value at nesting ``depth``."""
        if schema is True:
            return self.any_value(ptr, depth)
        if schema is False:
            return ir.NOTHING
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", pointer=ptr)
        key = (id(schema), depth if self.layout.depth_dependent else 0, self._in_product > 0)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if key in self._active:  # re-entered: a recursion through merged schemas
            if not self.recursion_by_rules:
                raise SchemaError("recursive schema: this subschema contains itself through allOf/$ref merges; "
                                  + ("recursion needs cfg=True" if not self.cfg else
                                     "not inside an enum/const or propertyNames intersection"), pointer=ptr)
            name = self._active[key] or f"rec:{ptr or '#'}#{len(self.rules)}"
            self._active[key] = name
            return ir.RuleRef(name)
        self._active[key] = None
        try:
            node = self._compile_dict(self.normalize(schema, ptr), ptr, depth)
        finally:
            name = self._active.pop(key)
        if name is not None:  # it refers to itself: a rule
            self.rules[name] = node
            node = ir.RuleRef(name)
        self._cache[key] = node
        self._keep.append(schema)
        return node

    @property
    def keyed_ok(self) -> bool:
        """Whether a keyed object (rules whose calls are guarded) can be made here: rules are allowed
        (CFG mode, or the indent layout, where keyed objects are rules per depth) outside intersections."""
        return self._cfg_asked and not self._in_product

    @property
    def recursion_by_rules(self) -> bool:
        """Whether a recursion can become a rule here (CFG mode, outside intersections)."""
        return self.cfg and not self._in_product

    def compile_regular(self, schema, ptr: str, depth: int) -> Node:
        """Like :meth:`compile`, but never a rule reference (bounded any-values)."""
        self._in_product += 1
        try:
            return self.compile(schema, ptr, depth)
        finally:
            self._in_product -= 1

    def _compile_dict(self, schema, ptr: str, depth: int) -> Node:
        if not isinstance(schema, dict):
            return self.compile(schema, ptr, depth)
        self._scan(schema, ptr)
        if "$ref" in schema:
            return self._ref(schema, ptr, depth)
        if "allOf" in schema:
            return self._all_of(schema, ptr, depth)
        if "anyOf" in schema or "oneOf" in schema:
            return self._any_of(schema, ptr, depth)
        if "const" in schema or "enum" in schema:
            return self._enum(schema, ptr, depth)
        if all(k not in SUPPORTED for k in schema):
            return self.any_value(ptr, depth)  # {}: no validation keyword at all
        return self._typed(schema, ptr, depth)

    def _scan(self, schema: dict, ptr: str) -> None:
        """Reject unsupported keywords; warn about unknown ones."""
        for key, arg in schema.items():
            if key in ANNOTATIONS or key in SUPPORTED:
                continue
            if key in UNSUPPORTED:
                noop = UNSUPPORTED[key]
                if noop is not None and arg == noop and type(arg) is type(noop):
                    continue
                raise SchemaError(f"keyword {key!r} is not supported yet", pointer=_ptr(ptr, key))
            if self.strict:
                self.warn(_ptr(ptr, key), f"unknown keyword {key!r} ignored")

    # -- const / enum --------------------------------------------------------

    def _enum(self, schema: dict, ptr: str, depth: int) -> Node:
        values = None
        if "const" in schema:
            values = [schema["const"]]
            self._check_value(values[0], _ptr(ptr, "const"))
        if "enum" in schema:
            enum = schema["enum"]
            if not isinstance(enum, list):
                raise SchemaError("enum must be an array", pointer=_ptr(ptr, "enum"))
            for i, v in enumerate(enum):
                self._check_value(v, _ptr(ptr, "enum", i))
            values = enum if values is None else [v for v in values if any(json_equal(v, e) for e in enum)]
        rest = {k: v for k, v in schema.items() if k not in ("const", "enum")}
        kept, need_rest = [], False
        for v in dedupe(values):
            verdict = check(rest, v, frozenset(k for k in rest if k not in VALIDATION_KEYWORDS))
            if verdict is False:
                continue
            kept.append(v)
            need_rest |= verdict is None
        node = values_node(self.layout, kept, depth)
        if need_rest and kept:
            self._in_product += 1  # a rule cannot sit inside an intersection: bounded any-values there
            try:
                node = ir.intersect(node, self._typed(rest, ptr, depth))
            finally:
                self._in_product -= 1
        return node

    @staticmethod
    def _check_value(v, ptr: str) -> None:
        try:
            check_json_value(v)
        except ValueError as exc:
            raise SchemaError(f"not a JSON value: {exc}", pointer=ptr) from exc

    # -- types ---------------------------------------------------------------

    def _types(self, schema: dict, ptr: str) -> list[str]:
        t = schema.get("type", MISSING)
        if t is MISSING:
            families = {KEYWORD_TYPE[k] for k in schema if k in KEYWORD_TYPE}
            if self.strict and len(families) == 1:
                (fam,) = families
                return [fam]
            return list(TYPE_NAMES[:-1])  # number covers integer
        names = [t] if isinstance(t, str) else t
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise SchemaError("type must be a string or an array of strings", pointer=_ptr(ptr, "type"))
        for n in names:
            if n not in TYPE_NAMES:
                raise SchemaError(f"unknown type {n!r}", pointer=_ptr(ptr, "type"))
        if "number" in names:
            names = [n for n in names if n != "integer"]
        return list(dict.fromkeys(names))

    def _typed(self, schema: dict, ptr: str, depth: int) -> Node:
        """The union over the allowed types of each type's IR (see ``TYPE_BUILDERS``),
        minus the values of ``$lg:notEnum``."""
        excluded = schema.get(NOT_ENUM) or []
        nodes = []
        for t in self._types(schema, ptr):
            node = TYPE_BUILDERS[t](self, schema, ptr, depth)
            if excluded:
                node = exclude_values(self, node, t, excluded, ptr)
            nodes.append(node)
        return ir.alt(*nodes)


TYPE_BUILDERS = {
    "null": lambda c, schema, ptr, depth: ir.lit("null"),
    "boolean": lambda c, schema, ptr, depth: ir.alt(ir.lit("true"), ir.lit("false")),
    "integer": compile_integer,
    "number": compile_number,
    "string": compile_string,
    "array": compile_array,
    "object": compile_object,
}
"""Type name -> builder ``(compiler, schema, pointer, depth) -> Node``; each
builder reads the keywords of its type (``TYPE_KEYWORDS``)."""
