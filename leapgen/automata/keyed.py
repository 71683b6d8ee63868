"""Keys already written in a JSON object, as matcher state (see :class:`leapgen.grammar.ir.KeyedObject`).

A keyed object's rule calls one member rule per member and a close rule; the
pushdown automaton (:mod:`leapgen.automata.pda`) asks :class:`KeyGuards`
before it follows such a call. The object's parse frame carries ``keys``, an
int: bit ``i`` set once member ``i`` was written, and above the member bits
the count of *repeatable* members written (an infinite key region, counted
up to what the bounds need). Calling member ``i`` (:meth:`KeyGuards.admit`)
gives the frame the object returns to its new ``keys``, or None when the
call is refused:

- ``i`` was written already (and is not repeatable), or comes out of order
  (schema order: the ordered members in index order, before the others);
- after it the object could not be completed: a required member no longer
  reachable, more members than ``maxProperties`` needed, fewer than
  ``minProperties`` left to write.

The close rule is called only with every required member written and at
least ``minProperties`` members (:meth:`KeyGuards.may_close`). Since a member
is admitted only when the object can still be completed, some member or the
close is always admissible after it: the guards never lead into a dead end,
so token masks built over them stay exact.

Source: the seen-key bitset is the design asked for in issue 15 (after
xgrammar's persistent stacks, whose frames here carry the bitset).
"""

from __future__ import annotations

from leapgen.grammar import ir

#: What a guarded call is: member ``i`` written first or after a comma, or the close.
FIRST, NEXT, CLOSE = 0, 1, 2


class KeyGuards:
    """The guarded calls of a grammar's keyed objects (immutable).

    Parameters
    ----------
    objects : sequence of ir.KeyedObject
    rule_ids : dict of str to int
        Rule name -> rule id of the pushdown automaton; objects whose rule
        was dropped (unproductive) are skipped.
    """

    def __init__(self, objects, rule_ids: dict[str, int]):
        self.objects: list[ir.KeyedObject] = []
        #: callee rule id -> (object index, member index or -1, FIRST / NEXT / CLOSE)
        self.by_callee: dict[int, tuple[int, int, int]] = {}
        for obj in objects:
            if obj.rule not in rule_ids:
                continue
            k = len(self.objects)
            self.objects.append(obj)
            for kind, names in ((FIRST, obj.first), (NEXT, obj.next)):
                for i, name in enumerate(names):
                    if name in rule_ids:
                        self.by_callee[rule_ids[name]] = (k, i, kind)
            for name in (obj.close_empty, obj.close):
                if name in rule_ids:
                    self.by_callee[rule_ids[name]] = (k, -1, CLOSE)

    def __bool__(self) -> bool:
        return bool(self.by_callee)

    def admit(self, callee: int, keys: int) -> int | None:
        """The ``keys`` of the object's frame after calling rule ``callee`` from a frame holding ``keys``
        (unchanged for an unguarded callee and for the close), or None when the call is refused. Pure."""
        guard = self.by_callee.get(callee)
        if guard is None:
            return keys
        k, i, kind = guard
        obj = self.objects[k]
        if kind == CLOSE:
            return keys if self.may_close(obj, keys) else None
        n = len(obj.keys)
        seen, extra = keys & ((1 << n) - 1), keys >> n
        bit = 1 << i
        if obj.repeatable & bit:
            extra = min(extra + 1, _count_cap(obj))
        elif seen & bit or not _in_order(obj, seen, extra, i):
            return None
        else:
            seen |= bit
        if not _can_finish(obj, seen, extra):
            return None
        return seen | (extra << n)

    @staticmethod
    def may_close(obj: ir.KeyedObject, keys: int) -> bool:
        """Whether an object with ``keys`` written may close: every required member, ``minProperties`` met."""
        n = len(obj.keys)
        seen, extra = keys & ((1 << n) - 1), keys >> n
        return obj.required & ~seen == 0 and seen.bit_count() + extra >= obj.lo


def _count_cap(obj: ir.KeyedObject) -> int:
    """Repeatable members counted beyond this many behave alike (the bounds are met or passed)."""
    return (obj.hi + 1) if obj.hi is not None else obj.lo


def _in_order(obj: ir.KeyedObject, seen: int, extra: int, i: int) -> bool:
    """Whether member ``i`` may come next: an ordered member only after lower ordered ones and before
    every other member."""
    if not obj.ordered & (1 << i):
        return True
    return seen & ~obj.ordered == 0 and extra == 0 and seen & obj.ordered < (1 << i)


def _future(obj: ir.KeyedObject, seen: int, extra: int) -> int:
    """Bitmask of the members that may still be written after ``seen`` (order kept)."""
    n = len(obj.keys)
    unseen = ((1 << n) - 1) & ~seen | obj.repeatable
    if seen & ~obj.ordered or extra:  # past the ordered members
        return unseen & ~obj.ordered
    highest = seen & obj.ordered
    below = (1 << highest.bit_length()) - 1 if highest else 0  # ordered members at or before the last written
    return unseen & ~(obj.ordered & below)


def _can_finish(obj: ir.KeyedObject, seen: int, extra: int) -> bool:
    """Whether some way of writing further members closes the object (see the module docstring)."""
    count = seen.bit_count() + extra
    future = _future(obj, seen, extra)
    missing = obj.required & ~seen
    if missing & ~future:
        return False
    least = count + missing.bit_count()
    if obj.hi is not None and least > obj.hi:
        return False
    return bool(future & obj.repeatable) or count + future.bit_count() >= obj.lo
