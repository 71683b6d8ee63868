"""Keyed objects: members as guarded rule calls, the keys written kept as matcher state.

An object becomes a :class:`~leapgen.grammar.ir.KeyedObject` (rules: the
object, one per member written first and after a comma, two closes; the
guards live in :mod:`leapgen.automata.keyed`) when

* ``any_order=True`` and it may hold two members or more: declared
  properties and extra keys in any order, each at most once, every required
  one present, ``minProperties`` / ``maxProperties`` counted; or
* its extra keys (``patternProperties`` / ``propertyNames`` / ``additional``
  regions) form a finite language of at most :data:`MAX_KEYED_NAMES`
  names: schema order for the declared properties, then the extra keys in
  any order, none repeated (issue 15: ``propertyNames: {pattern: "^[a-c]$"}``
  with ``minProperties: 2`` accepted ``{"b":1,"b":2}``).

Extra keys from an infinite region (any string, or more than
:data:`MAX_KEYED_NAMES` names) are one *repeatable* member: counted, not
remembered, so a repeat there is not detected; where ``minProperties`` or
``maxProperties`` depend on distinct keys the compile warns. Keyed objects
need rules: inside an intersection (``propertyNames`` schemas, exclusive
``oneOf`` complements' products) the object is compiled as before, with a
warning where ``any_order`` or duplicate detection is given up.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..ir import Node
from .match import finite_language

MAX_KEYED_NAMES = 64
"""Most names of a finite extra-key language remembered one by one (a bitset bit each)."""


@dataclass(frozen=True)
class Member:
    """One member of a keyed object: its key (quoted key text), value, and whether it is required or repeatable."""

    key: Node
    value: Node
    required: bool = False
    repeatable: bool = False


def keyed_members(named: list, regions: list, any_order: bool) -> tuple[list[Member], int] | None:
    """The members of a keyed object, and the bitmask of those kept in schema order; None when the
    object needs no keys remembered (see the module docstring).

    ``named``: ``(key, value, required)`` of the declared properties in schema order; ``regions``:
    ``(key, value)`` of the extra-key regions (``key`` the quoted key language).
    """
    members = [Member(k, v, r) for k, v, r in named]
    finite = False
    for key, value in regions:
        names = finite_language(key, MAX_KEYED_NAMES)
        if names is None:
            members.append(Member(key, value, repeatable=True))
        else:
            finite = finite or bool(names)
            members += [Member(ir.lit(n), value) for n in names]
    if not finite and not (any_order and (len(members) >= 2 or any(m.repeatable for m in members))):
        return None
    ordered = 0 if any_order else (1 << len(named)) - 1
    return members, ordered


def satisfiable(members: list[Member], lo: int, hi: int | None) -> bool:
    """Whether some set of members closes the object: the required ones fit under ``hi`` and enough
    members exist for ``lo`` (what the guards check before the first member)."""
    n_req = sum(m.required for m in members)
    if hi is not None and (n_req > hi or lo > hi):
        return False
    return any(m.repeatable for m in members) or len(members) >= lo


def keyed_object(c, depth: int, members: list[Member], ordered: int, lo: int, hi: int | None, ptr: str) -> Node:
    """A reference to the rule of a keyed object over ``members`` (its rules added to ``c.rules`` and its
    :class:`~leapgen.grammar.ir.KeyedObject` to ``c.keyed``)."""
    layout = c.layout
    name = f"keyed:{ptr or '#'}#{len(c.keyed)}"
    colon = layout.colon()
    first, nxt = [], []
    for i, m in enumerate(members):
        body = ir.seq(m.key, colon, m.value)
        first.append(f"{name}.first.{i}")
        c.rules[first[-1]] = ir.seq(layout.after_open(depth), body)
        nxt.append(f"{name}.next.{i}")
        c.rules[nxt[-1]] = ir.seq(layout.comma(depth), body)
    close, close_empty = f"{name}.close", f"{name}.close-empty"
    c.rules[close] = layout.close("}", depth)
    c.rules[close_empty] = layout.empty_tail("}")
    refs = lambda names: ir.alt(*(ir.RuleRef(n) for n in names))  # noqa: E731
    body = ir.seq(refs(first), ir.star(refs(nxt)), ir.RuleRef(close)) if members else ir.NOTHING
    c.rules[name] = ir.seq(ir.lit("{"), ir.alt(body, ir.RuleRef(close_empty)))
    bits = lambda pick: sum(1 << i for i, m in enumerate(members) if pick(m))  # noqa: E731
    c.keyed.append(ir.KeyedObject(
        rule=name, keys=tuple(_text(m.key) for m in members), first=tuple(first), next=tuple(nxt),
        close_empty=close_empty, close=close, required=bits(lambda m: m.required), lo=lo, hi=hi,
        repeatable=bits(lambda m: m.repeatable), ordered=ordered))
    return ir.RuleRef(name)


def _text(key: Node) -> str:
    """A member's key for messages: its text, or ``*`` for a key region."""
    return key.data.decode("utf-8") if isinstance(key, ir.Bytes) else "*"
