"""Provable disjointness of ``oneOf`` branches (JSON Schema 2020-12, section
10.2.1.3: an instance must match exactly one branch).

:func:`kinds` summarises what a branch can be (:class:`Kinds`) and
:func:`disjoint` proves that two summaries share no value: no common type, no
common ``enum``/``const`` value, string ``pattern``/value sets that cannot
meet (the regexes' intersection is empty, decided by derivatives,
:mod:`.match`), a property one requires on which the two say disjoint
things, or a branch whose own ``anyOf``/``oneOf`` alternatives are each
disjoint from the other. Each test only ever looks at a superset of a
branch's values, so "disjoint" is always a proof; "not disjoint" may be wrong
(the caller then makes the branches exclusive by negation, or warns).
"""

from __future__ import annotations

import functools

from leapgen.errors import RegexError, SchemaError

from .. import ir
from .match import Unsupported, is_empty, matches
from .merge import ABSENT, MISSING, PROPS, TYPE_NAMES, Patterns, _eq, _name_matches
from .values import json_type
from ..regex import parse_regex

MAX_KINDS_DEPTH = 4
"""Deepest nesting (members, alternatives) :func:`disjoint` looks into."""
MAX_PATTERN_STATES = 500
"""Derivative states explored to show two patterns disjoint (beyond: not shown)."""


def values_type_names(values) -> set:
    """JSON Schema type names of a list of values (``integer`` also counts as ``number``)."""
    out = set()
    for v in values:
        t = json_type(v)
        out.add(t)
        if t == "integer":
            out.add("number")
    return out


class Kinds:
    """What a oneOf branch can be (see :func:`kinds`).

    Attributes
    ----------
    types : set of str
        Possible type names (``integer`` also as ``number``).
    values : list or None
        Its finite set of values, if it has one.
    required : list of str
        Property names an object instance must have.
    patterns : list of str
        ``pattern`` regexes a string instance must match.
    alternatives : list of Kinds
        Its ``anyOf``/``oneOf`` branches (of the innermost such keyword), each
        alone: a value of the branch is a value of one of them.
    """

    def __init__(self, c, schema, ptr: str, depth: int):
        self.c, self.schema, self.ptr, self.depth = c, schema, ptr, depth
        self.types: set = set(TYPE_NAMES)
        self.values = None
        self.required: list = []
        self.patterns: list = []
        self.alternatives: list = []
        self._members: dict = {}

    def member(self, name: str) -> list:
        """Kinds of the schemas a present property ``name`` must satisfy."""
        hit = self._members.get(name)
        if hit is not None:
            return hit
        s = self.schema
        out = []
        if isinstance(s, dict) and self.depth < MAX_KINDS_DEPTH:
            if name in (s.get(ABSENT) or []):
                out.append(kinds(self.c, False, self.ptr, self.depth + 1))
            props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
            pats = s.get("patternProperties") if isinstance(s.get("patternProperties"), dict) else {}
            parts = [props[name]] if name in props else []
            for pattern, sub in pats.items():
                try:
                    if _name_matches(pattern, name, self.ptr):
                        parts.append(sub)
                except SchemaError:
                    pass
            if not parts:
                extra = s.get("additionalProperties", MISSING)
                if extra is not MISSING:
                    parts.append(extra)
            if isinstance(s.get(PROPS), dict) and name in s[PROPS]:
                parts.append(s[PROPS][name])
            out.extend(kinds(self.c, p, self.ptr, self.depth + 1) for p in parts)
        self._members[name] = out
        return out


def kinds(c, schema, ptr: str, depth: int = 0) -> Kinds:
    """What a oneOf branch can be: its possible types, its finite set of
    values (or None), the properties it requires, its string patterns, its
    alternatives and what it says about each property (:class:`Kinds`).
    ``c`` is the running compiler (for ``$ref`` and type inference)."""
    try:
        schema, ptr, _ = c._deref(schema, ptr, merging=False)
    except SchemaError:
        schema = True
    out = Kinds(c, schema, ptr, depth)
    if schema is True or not isinstance(schema, dict):
        if schema is False:
            out.types, out.values = set(), []
        return out
    types = set(c._types(schema, ptr))
    if "integer" in types:
        types.add("number")
    values = None
    if "const" in schema:
        values = [schema["const"]]
    if isinstance(schema.get("enum"), list):
        values = schema["enum"] if values is None else [v for v in values if any(
            _eq(v, e) for e in schema["enum"])]
    if values is not None:
        try:
            types &= values_type_names(values)
        except ValueError:
            pass
    for kw in ("anyOf", "oneOf"):
        if isinstance(schema.get(kw), list) and depth < MAX_KINDS_DEPTH:
            out.alternatives = [kinds(c, b, ptr, depth + 1) for b in schema[kw]]
            types &= set().union(*(k.types for k in out.alternatives))
    out.types, out.values = types, values
    if isinstance(schema.get("required"), list):
        out.required = [r for r in schema["required"] if isinstance(r, str)]
    pattern = schema.get("pattern")
    out.patterns = list(pattern) if isinstance(pattern, Patterns) else [pattern] if isinstance(pattern, str) else []
    return out


def disjoint(a: Kinds, b: Kinds, depth: int = 0) -> bool:
    """Whether two :func:`kinds` provably share no value (see the module docstring)."""
    ta, tb = a.types, b.types
    if not (ta & tb):
        return True
    va, vb = a.values, b.values
    if va is not None and vb is not None:
        return not any(_eq(x, y) for x in va for y in vb)
    for vals, types in ((va, tb), (vb, ta)):
        if vals is not None and not any(_has_any_type(v, types) for v in vals):
            return True
    if (ta & tb) <= {"string"} and _strings_disjoint(a, b):
        return True
    if depth >= MAX_KINDS_DEPTH:
        return False
    if (ta & tb) == {"object"}:
        for x, y in ((a, b), (b, a)):
            for name in x.required:
                mx, my = x.member(name), y.member(name)
                if any(disjoint(p, q, depth + 1) for p in mx for q in my):
                    return True
    return any(x.alternatives and all(disjoint(k, y, depth + 1) for k in x.alternatives)
               for x, y in ((a, b), (b, a)))


def _strings_disjoint(a: Kinds, b: Kinds) -> bool:
    """Two string-only summaries: values failing the other's patterns, or patterns that never meet."""
    for x, y in ((a, b), (b, a)):
        if x.values is not None and y.patterns:
            nodes = [_pattern(p) for p in y.patterns]
            if None not in nodes and all(not isinstance(v, str) or not _all_match(nodes, v) for v in x.values):
                return True
    if a.patterns and b.patterns:
        return _patterns_disjoint(tuple(sorted({*a.patterns, *b.patterns})))
    return False


@functools.lru_cache(maxsize=1024)
def _patterns_disjoint(patterns: tuple[str, ...]) -> bool:
    """Whether no string matches every one of ``patterns`` (False: not shown). Searches that no
    anchor pins at either end (``NEW``, ``a|b``) always meet: the concatenation of a match of each
    matches all of them, so only a pattern anchored somewhere needs the derivatives."""
    nodes = [_pattern(p) for p in patterns]
    if None in nodes or all(_free_at_both_ends(n) for n in nodes):
        return False
    return is_empty(ir.intersect(*nodes), MAX_PATTERN_STATES) is True


def _free_at_both_ends(node: ir.Node) -> bool:
    """Whether ``node`` (a search, as :func:`_pattern` gives it) has the form ``.*R.*`` or a
    union of such: its language is closed under adding any text on either side."""
    if isinstance(node, ir.Alt):
        return all(_free_at_both_ends(i) for i in node.items)
    return (isinstance(node, ir.Seq) and len(node.items) >= 2
            and node.items[0] == _ANY_TEXT and node.items[-1] == _ANY_TEXT)


_ANY_TEXT = ir.star(ir.CharSet(((0, ir.MAX_UNICODE),)))


def _all_match(nodes: list, text: str) -> bool:
    try:
        return all(matches(n, text) for n in nodes)
    except Unsupported:
        return True


@functools.lru_cache(maxsize=1024)
def _pattern(pattern: str):
    """A ``pattern`` as code-point IR (unanchored search), or None when it cannot be parsed."""
    try:
        return parse_regex(pattern, search=True)
    except (RegexError, Unsupported, TypeError):
        return None


def _has_any_type(value, types) -> bool:
    try:
        t = json_type(value)
    except ValueError:
        return True
    return t in types or (t == "integer" and "number" in types)
