"""Objects for the JSON Schema front-end.

Layout: the listed members in schema order (``properties``, then names only in
``required``, then names only constrained by the internal ``$lg:props`` /
``$lg:absent``), optional ones skippable, then extra members; commas are right
in every combination.

* **Listed names.** A name's value must satisfy its ``properties`` schema and
  the schema of every ``patternProperties`` regex that matches the name (a
  name only in ``required`` gets the matching patterns' schemas, else
  ``additionalProperties``). A name rejected by ``propertyNames`` (or in
  ``$lg:absent``) cannot appear. Names are matched at compile time
  (:mod:`.match`).
* **Extra keys.** Without ``patternProperties``/``propertyNames`` an extra key
  is any string (any spelling) that is not a listed name in any spelling, and
  its value satisfies ``additionalProperties``. With them, keys are written in
  the canonical spelling (see :mod:`.strings`) and the key space is split
  into regions: for each non-empty set of pattern groups (patterns with the
  same schema form one group; at most :data:`MAX_PATTERN_GROUPS` groups), the
  keys matching exactly those groups, whose value satisfies the merged
  schemas; the keys matching no pattern get ``additionalProperties``. Every
  key is also intersected with the ``propertyNames`` language.
* **Counting** (``minProperties``/``maxProperties``): exact. Trivial bounds
  (below the required count, above the most members possible, or
  ``minProperties: 1`` with nothing required) cost nothing; otherwise the
  members are unrolled by the count written so far (capped at the bound), and
  extra members repeat within the remaining range. The unrolled IR is
  refused (SchemaError) when it would exceed :data:`MAX_COUNTED_SIZE` IR nodes.

* **Keys as matcher state** (:mod:`.keyed`): with ``any_order=True``, or
  where the extra keys form a finite set of at most
  :data:`.keyed.MAX_KEYED_NAMES` names, the object is a keyed object whose
  keys written are remembered by the matcher: members in any order (or the
  listed ones in schema order, then the extras), none repeated. Elsewhere a
  repeated extra key is not detected (a warning where ``minProperties`` /
  ``maxProperties`` count members).
"""

from __future__ import annotations

import json

from leapgen.errors import RegexError, SchemaError

from .. import ir
from ..ir import Node
from .containers import count_arg
from .keyed import MAX_KEYED_NAMES, keyed_members, keyed_object, satisfiable
from .layout import Layout, container
from .match import Unsupported, is_empty, matches
from .merge import ABSENT, MISSING, PROPS, join_pointer
from .scalars import compile_pattern, parse_pattern
from .strings import json_encode_regex, quoted, spell_any, string_content

MAX_PATTERN_GROUPS = 4
MAX_COUNTED_SIZE = 60_000
CANONICAL_CONTENT = ir.star(json_encode_regex(ir.ANY_CHAR))
"""Any string content in the canonical spelling."""


def compile_object(c, schema: dict, ptr: str, depth: int) -> Node:
    """The IR of an object under ``schema`` (see the module docstring)."""
    props = _dict_arg(schema, "properties", ptr)
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaError("required must be an array of strings", pointer=join_pointer(ptr, "required"))
    patterns = _dict_arg(schema, "patternProperties", ptr)
    also = _dict_arg(schema, PROPS, ptr)
    absent = set(schema.get(ABSENT) or [])
    extra = schema.get("additionalProperties", MISSING)
    extra_ptr = join_pointer(ptr, "additionalProperties")
    if extra is MISSING and "unevaluatedProperties" in schema:
        extra, extra_ptr = schema["unevaluatedProperties"], join_pointer(ptr, "unevaluatedProperties")
    explicit = extra is not MISSING
    if not explicit:
        extra = False if (c.strict and (props or patterns)) else True
    lo = count_arg(schema, "minProperties", ptr) or 0
    hi = count_arg(schema, "maxProperties", ptr)
    if hi is not None and lo > hi:
        return ir.NOTHING  # minProperties > maxProperties: no object fits
    pats = [_Pattern(c, p, s, join_pointer(ptr, "patternProperties", p)) for p, s in patterns.items()]
    if not isinstance(schema.get("propertyNames", True), (dict, bool)):
        raise SchemaError(f"propertyNames must be a schema (an object or a boolean), got "
                          f"{type(schema['propertyNames']).__name__}", pointer=join_pointer(ptr, "propertyNames"))
    names = _Names(c, schema.get("propertyNames", True), join_pointer(ptr, "propertyNames"), depth)

    listed: dict[str, tuple] = {}
    for name, sub in props.items():
        listed[name] = (sub, join_pointer(ptr, "properties", name), [p.schema for p in pats if p.matches(name)])
    for name, where in ([(n, "required") for n in required] + [(n, PROPS) for n in also]
                        + [(n, ABSENT) for n in sorted(absent)]):
        if name not in listed:
            hits = [p.schema for p in pats if p.matches(name)]
            base = (hits[0] if len(hits) == 1 else {"allOf": hits}) if hits else (extra if explicit else True)
            listed[name] = (base, join_pointer(ptr, where), [])
    req = set(required)
    named = []  # (key, value, required) in schema order
    for name, (sub, sp, more) in listed.items():
        if name in absent or not names.accepts(name):
            value = ir.NOTHING
        else:
            parts = [sub, *more, *([also[name]] if name in also else [])]
            merged = parts[0] if len(parts) == 1 else c.keep({"allOf": parts})
            value = c.rule(c.compile(merged, sp, depth + 1), sp)
        if value == ir.NOTHING:
            if name in req:
                return ir.NOTHING
            continue
        named.append((ir.lit(json.dumps(name, ensure_ascii=False)), value, name in req))
    regions = _extra_regions(c, list(listed), pats, names, extra, extra_ptr, depth)
    plan = keyed_members(named, regions, c.any_order)
    if plan is not None and c.keyed_ok:
        members, ordered = plan
        if any(m.repeatable for m in members):
            _warn_repeats(c, lo, hi, ptr)
        if not satisfiable(members, lo, hi):
            return ir.NOTHING
        return keyed_object(c, depth, members, ordered, lo, hi, ptr)
    if plan is not None:
        c.warn(ptr, "keys written are not remembered inside an intersection: " +
               ("any_order is not honoured here (schema order)" if c.any_order else "a repeated extra key is accepted"))
    if regions:
        _warn_repeats(c, lo, hi, ptr)
    colon = c.layout.colon()
    members = [(ir.seq(key, colon, value), r) for key, value, r in named]
    extra_member = ir.alt(*(ir.seq(key, colon, value) for key, value in regions)) if regions else None
    return object_node(c.layout, depth, members, extra_member, lo, hi, ptr)


def _warn_repeats(c, lo: int, hi: int | None, ptr: str) -> None:
    """Warn where a repeated extra key (not detected) would count towards minProperties/maxProperties
    (with at most one member allowed, nothing can repeat)."""
    if lo >= 2 or (hi is not None and hi >= 2):
        c.warn(ptr, "a repeated extra key is not detected (the extra keys are not a finite set of at most "
                    f"{MAX_KEYED_NAMES} names); minProperties/maxProperties count every member written")


def _dict_arg(schema: dict, key: str, ptr: str) -> dict:
    arg = schema.get(key, {})
    if not isinstance(arg, dict):
        raise SchemaError(f"{key} must be an object", pointer=join_pointer(ptr, key))
    return arg


class _Pattern:
    """One ``patternProperties`` entry: its regex (code points) and JSON-encoded key content."""

    def __init__(self, c, pattern: str, schema, ptr: str):
        self.pattern, self.schema, self.ptr = pattern, schema, ptr
        self.node = parse_pattern(pattern, ptr)
        self.content = compile_pattern(c, pattern, ptr)
        self._memo: dict = {}

    def matches(self, name: str) -> bool:
        try:
            return matches(self.node, name, self._memo)
        except Unsupported as exc:
            raise SchemaError(f"patternProperties: cannot decide whether {name!r} matches {self.pattern!r} ({exc})",
                              pointer=self.ptr) from exc


class _Names:
    """The ``propertyNames`` schema as a language of quoted keys (None: any key)."""

    def __init__(self, c, schema, ptr: str, depth: int):
        self.ptr = ptr
        self.none = schema is False
        self.node = None
        self._memo: dict = {}
        if schema is True or schema is False or schema == {}:
            return
        as_string = c.keep({"allOf": [{"type": "string"}, schema]})
        node = c.compile_regular(as_string, ptr, depth + 1)
        if ir.contains_ruleref(node):
            raise SchemaError("propertyNames: a recursive name schema is not supported", pointer=ptr)
        self.none = node == ir.NOTHING
        self.node = node

    def accepts(self, name: str) -> bool:
        if self.none:
            return False
        if self.node is None:
            return True
        try:
            return matches(self.node, json.dumps(name, ensure_ascii=False), self._memo)
        except (Unsupported, RegexError) as exc:
            raise SchemaError(f"propertyNames: cannot decide whether {name!r} is allowed ({exc})",
                              pointer=self.ptr) from exc


def _extra_regions(c, listed: list, pats: list, names: _Names, extra, extra_ptr: str, depth: int) -> list:
    """The extra members' key regions: ``(key, value)`` pairs (quoted key language, value IR), none empty."""
    if names.none or (extra is False and not pats):
        return []
    if not pats and names.node is None:
        value = c.rule(c.compile(extra, extra_ptr, depth + 1), extra_ptr)
        if value == ir.NOTHING:
            return []
        key = quoted(string_content())
        if listed:
            key = ir.diff(key, ir.alt(*(quoted(spell_any(n)) for n in listed)))
        return [(key, value)]
    base = CANONICAL_CONTENT
    if listed:
        base = ir.diff(base, ir.alt(*(json_encode_regex(ir.lit(n)) for n in listed)))
    groups: dict[str, list] = {}
    for p in pats:
        groups.setdefault(json.dumps(p.schema, sort_keys=True), []).append(p)
    groups_list = list(groups.values())
    if len(groups_list) > MAX_PATTERN_GROUPS:
        raise SchemaError(f"patternProperties with more than {MAX_PATTERN_GROUPS} distinct value schemas is not "
                          "supported yet", pointer=groups_list[0][0].ptr.rpartition("/")[0])
    cp = [ir.alt(*(p.node for p in g)) for g in groups_list]
    enc = [ir.alt(*(p.content for p in g)) for g in groups_list]
    regions = []
    m = len(groups_list)
    for mask in range(1, 1 << m):
        inside = [j for j in range(m) if mask >> j & 1]
        outside = [j for j in range(m) if not mask >> j & 1]
        if m > 1:
            lang = ir.intersect(*(cp[j] for j in inside))
            if outside:
                lang = ir.diff(lang, ir.alt(*(cp[j] for j in outside)))
            if is_empty(lang) is True:
                continue
        content = ir.intersect(base, *(enc[j] for j in inside))
        if outside:
            content = ir.diff(content, ir.alt(*(enc[j] for j in outside)))
        subs = [groups_list[j][0].schema for j in inside]
        where = groups_list[inside[0]][0].ptr
        regions.append((content, subs[0] if len(subs) == 1 else c.keep({"allOf": subs}), where))
    if extra is not False:
        regions.append((ir.diff(base, ir.alt(*enc)) if enc else base, extra, extra_ptr))
    out = []
    for content, sub, where in regions:
        value = c.rule(c.compile(sub, where, depth + 1), where)
        if value == ir.NOTHING:
            continue
        key = quoted(content)
        if names.node is not None:
            key = ir.intersect(key, names.node)
        out.append((key, value))
    return out


def object_node(layout: Layout, depth: int, members: list, extra: Node | None, lo: int = 0,
                hi: int | None = None, ptr: str = "") -> Node:
    """An object: the listed members in order (each ``(node, required)``), then
    extra members (``extra``: one extra member, or None), with between ``lo``
    and ``hi`` members in all.

    Raises
    ------
    SchemaError
        The counted form would be larger than :data:`MAX_COUNTED_SIZE`.
    """
    n_req = sum(1 for _, r in members if r)
    most = None if extra is not None else len(members)
    if (most is not None and lo > most) or (hi is not None and hi < n_req):
        return ir.NOTHING
    free_hi = hi is None or (most is not None and hi >= most)
    if free_hi and lo <= n_req:
        return _free_object(layout, depth, members, extra, empty_ok=True)
    if free_hi and lo == 1 and n_req == 0:
        return _free_object(layout, depth, members, extra, empty_ok=False)
    return _counted_object(layout, depth, members, extra, lo, hi, ptr)


def _free_object(layout: Layout, depth: int, members: list, extra: Node | None, *, empty_ok: bool) -> Node:
    """Before the first required member, any ordered subset of the optional
    members may appear (:func:`leapgen.grammar.ir.subsets`: linear size),
    the rest is one linear chain."""
    comma = layout.comma(depth)
    extra_tail = ir.star(ir.seq(comma, extra)) if extra is not None else ir.EMPTY
    first_req = next((i for i, (_, req) in enumerate(members) if req), None)
    if first_req is None:
        nodes = [n for n, _ in members]
        firsts = [ir.subsets(nodes, comma)] if nodes else []
        if extra is not None:
            firsts.append(extra)
        if not firsts:
            return layout.empty("{}") if empty_ok else ir.NOTHING
        if not nodes:  # a map: extra members only
            return container(layout, "{}", depth, ir.join(extra, comma), ir.EMPTY, empty_ok=empty_ok)
        body = ir.seq(ir.alt(*firsts), extra_tail)
        return container(layout, "{}", depth, body, ir.EMPTY, empty_ok=empty_ok)
    prefix = [n for n, _ in members[:first_req]]
    lead = ir.opt(ir.seq(ir.subsets(prefix, comma), comma)) if prefix else ir.EMPTY
    chain = [ir.seq(comma, n) if req else ir.opt(ir.seq(comma, n)) for n, req in members[first_req + 1:]]
    body = ir.seq(lead, members[first_req][0], *chain, extra_tail)
    return container(layout, "{}", depth, body, ir.EMPTY, empty_ok=False)


def _counted_object(layout: Layout, depth: int, members: list, extra: Node | None, lo: int, hi: int | None,
                    ptr: str) -> Node:
    """Members unrolled by the number written so far (see the module docstring)."""
    comma = layout.comma(depth)
    n = len(members)
    cap = hi if hi is not None else lo  # with no upper bound, counts >= lo behave alike
    sizes: dict = {}
    memo: dict = {}

    def extras(c: int) -> tuple[Node, int]:
        need, room = max(lo - c, 0), None if hi is None else hi - c
        if extra is None or room == 0:
            return (ir.EMPTY if need == 0 and c > 0 else ir.NOTHING), 0
        unit = ir_size(extra, sizes) + 1
        if c > 0:
            node = ir.repeat(ir.seq(comma, extra), need, room)
            return node, unit * ((room or need) + 1)
        more = ir.seq(extra, ir.repeat(ir.seq(comma, extra), max(need - 1, 0), None if room is None else room - 1))
        return more, unit * ((room or need) + 1)

    def f(i: int, c: int) -> tuple[Node, int]:
        key = (i, c)
        hit = memo.get(key)
        if hit is not None:
            return hit
        if i == n:
            out = extras(c)
        else:
            node, req = members[i]
            nc = c + 1 if hi is not None else min(c + 1, cap)
            take, take_size = ir.NOTHING, 0
            if hi is None or c + 1 <= hi:
                rest, rest_size = f(i + 1, nc)
                if rest != ir.NOTHING:
                    take = ir.seq(comma if c > 0 else ir.EMPTY, node, rest)
                    take_size = ir_size(node, sizes) + rest_size + 1
            skip, skip_size = (ir.NOTHING, 0) if req else f(i + 1, c)
            out = ir.alt(take, skip), take_size + skip_size
            if out[1] > MAX_COUNTED_SIZE:
                raise SchemaError(f"minProperties/maxProperties ({lo}..{hi}) over {n} properties would need more "
                                  f"than {MAX_COUNTED_SIZE} grammar nodes; not supported", pointer=ptr)
        memo[key] = out
        return out

    body, _ = f(0, 0)
    empty_ok = lo == 0 and not any(r for _, r in members)
    if body == ir.NOTHING:
        return layout.empty("{}") if empty_ok else ir.NOTHING
    return container(layout, "{}", depth, body, ir.EMPTY, empty_ok=empty_ok)


def ir_size(node: Node, memo: dict, cap: int = 10**7) -> int:
    """Nodes in the tree expansion of ``node`` (what a Thompson construction
    builds), counting bounded repeats by their copies; at most ``cap``."""
    hit = memo.get(node)
    if hit is not None:
        return hit
    if isinstance(node, (ir.Seq, ir.Alt, ir.Intersect)):
        out = 1 + sum(ir_size(i, memo, cap) for i in node.items)
    elif isinstance(node, ir.Repeat):
        out = 1 + ir_size(node.item, memo, cap) * max(node.hi if node.hi is not None else node.lo + 1, 1)
    elif isinstance(node, ir.Embed):
        out = 1 + ir_size(node.item, memo, cap)
    elif isinstance(node, ir.Subsets):
        out = 1 + sum(ir_size(i, memo, cap) for i in node.items) + ir_size(node.sep, memo, cap) * (len(node.items) - 1)
    elif isinstance(node, ir.Join):
        out = 1 + ir_size(node.item, memo, cap) + ir_size(node.sep, memo, cap)
    elif isinstance(node, ir.Diff):
        out = 1 + ir_size(node.left, memo, cap) + ir_size(node.right, memo, cap)
    else:
        out = 1
    out = min(out, cap)
    memo[node] = out
    return out
