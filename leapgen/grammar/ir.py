"""Grammar IR: the byte-level regular-expression terms every front-end emits.

Regex, JSON Schema and EBNF front-ends build these immutable, hashable nodes;
the automata layer (:mod:`leapgen.automata`) turns them into byte-level DFAs.
Nothing here knows about tokens.

Nodes
-----
``Bytes(data)``            the exact byte string ``data`` (``b""`` is epsilon).
``ByteSet(ranges)``        one byte in the inclusive ranges ``((lo, hi), ...)``.
``CharSet(ranges)``        one Unicode scalar value (code point, surrogates
                           excluded) in the inclusive ranges, matched as its
                           UTF-8 encoding.
``Seq(items)``             concatenation.
``Alt(items)``             union (``Alt(())`` is the empty language).
``Repeat(item, lo, hi)``   ``item{lo,hi}``; ``hi=None`` means unbounded.
``Join(item, sep)``        ``item (sep item)*``: a list of any length >= 1
                           (array items, a map's members); automata hold one
                           copy of ``item``, entered again after each ``sep``.
``Subsets(items, sep)``    a non-empty ordered subset of ``items``, joined by
                           ``sep`` (the optional members of a JSON object);
                           automata share each item between the subsets
                           that start with it and those where it follows a
                           ``sep``, so the size stays linear.
``Intersect(items)``       language intersection (built by DFA product).
``Diff(left, right)``      language difference ``left \\ right``.
``Quotient(left, suffix)`` the right quotient ``left / suffix``: the strings
                           ``w`` such that ``w + suffix`` is in ``left``.
``Embed(item)``            the language of ``item`` (no rule reference), built
                           as a minimal DFA of its own and embedded in the
                           enclosing automaton (many large alternatives, each
                           compiled once, instead of one subset construction
                           over all their NFA states).
``RuleRef(name)``          a reference to a named rule of a context-free
                           grammar (resolved by the CFG layer).
``Counted(item, lo, hi)``  ``item{lo,hi}`` with the count kept at run time,
                           not in the automaton: one copy of ``item`` in a
                           loop, ``item`` a prefix code (a JSON string's
                           characters); see :func:`counted`.

A *token literal* (:func:`token_literal`) stands for one special or added
token of the vocabulary, not for text: the byte ``0xFF`` (which no UTF-8
text holds) and the token id in three bytes. Only the structural-tag
front-end emits them; the compiler walks the token's id through them and
keeps every ordinary token that holds a ``0xFF`` byte out of such grammars
(see :mod:`leapgen.compiler.token_literals`).

Use the helper constructors (:func:`seq`, :func:`alt`, :func:`lit`, ...): they
flatten and simplify, so structurally equal languages mostly get equal terms.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

MAX_UNICODE = 0x10FFFF


class Node:
    """Base class of IR nodes (immutable, hashable).

    Each node caches its hash (``_h``): IR built by the front-ends shares
    subterms (a DAG), and a recomputed structural hash would walk the
    tree expansion, exponential in the depth of sharing. For the same
    reason it caches the rule names it refers to (``_r``, see
    :func:`ref_names`) and its tree-expanded size (``_s``, see
    :func:`tree_size`): the rule passes of a compile ask them again and
    again of the same subterms.
    """

    __slots__ = ()

    def __hash__(self) -> int:
        h = self._h
        if h == -1:
            h = hash((type(self).__name__, self._fields(self)))
            h = -2 if h == -1 else h
            object.__setattr__(self, "_h", h)
        return h


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Bytes(Node):
    data: bytes
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class ByteSet(Node):
    ranges: tuple[tuple[int, int], ...]
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class CharSet(Node):
    ranges: tuple[tuple[int, int], ...]
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Seq(Node):
    items: tuple[Node, ...]
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Alt(Node):
    items: tuple[Node, ...]
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Repeat(Node):
    item: Node
    lo: int
    hi: int | None
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Join(Node):
    item: Node
    sep: Node
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Subsets(Node):
    items: tuple[Node, ...]
    sep: Node
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Intersect(Node):
    items: tuple[Node, ...]
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Diff(Node):
    left: Node
    right: Node
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Quotient(Node):
    left: Node
    suffix: bytes
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Embed(Node):
    item: Node
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class RuleRef(Node):
    name: str
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


@dataclass(frozen=True, slots=True, unsafe_hash=False)
class Counted(Node):
    item: Node
    lo: int
    hi: int | None
    _h: int = field(default=-1, init=False, repr=False, compare=False)
    _r: frozenset | None = field(default=None, init=False, repr=False, compare=False)
    _s: int = field(default=-1, init=False, repr=False, compare=False)
    __hash__ = Node.__hash__


for _cls in Node.__subclasses__():  # the fields hashed, read in one C call
    _cls._fields = operator.attrgetter(*_cls.__match_args__)
del _cls

EMPTY = Bytes(b"")
"""The language holding only the empty string."""

NOTHING = Alt(())
"""The empty language (matches nothing)."""


def normalize_ranges(ranges, limit: int) -> tuple[tuple[int, int], ...]:
    """Sort and merge inclusive integer ranges, clipped to ``[0, limit]``."""
    out: list[list[int]] = []
    for lo, hi in sorted((max(0, lo), min(limit, hi)) for lo, hi in ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def complement_ranges(ranges, limit: int) -> tuple[tuple[int, int], ...]:
    """The ranges of ``[0, limit]`` not covered by ``ranges``."""
    out = []
    nxt = 0
    for lo, hi in normalize_ranges(ranges, limit):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= limit:
        out.append((nxt, limit))
    return tuple(out)


def lit(text: str | bytes) -> Node:
    """The exact text, UTF-8 encoded when given as ``str``."""
    return Bytes(text.encode("utf-8") if isinstance(text, str) else bytes(text))


def byteset(ranges) -> Node:
    """One byte from inclusive ranges; a single byte becomes :class:`Bytes`."""
    rs = normalize_ranges(ranges, 0xFF)
    if not rs:
        return NOTHING
    if len(rs) == 1 and rs[0][0] == rs[0][1]:
        return Bytes(bytes([rs[0][0]]))
    return ByteSet(rs)


def charset(ranges, *, negate: bool = False) -> Node:
    """One Unicode scalar value from inclusive code point ranges.

    Parameters
    ----------
    ranges : iterable of (int, int)
        Inclusive code point ranges; may overlap and be unsorted.
    negate : bool, default False
        Match every scalar value *not* in ``ranges``.
    """
    rs = normalize_ranges(ranges, MAX_UNICODE)
    if negate:
        rs = complement_ranges(rs, MAX_UNICODE)
    if not rs:
        return NOTHING
    if len(rs) == 1 and rs[0][0] == rs[0][1] and not 0xD800 <= rs[0][0] <= 0xDFFF:
        return lit(chr(rs[0][0]))
    return CharSet(rs)


ANY_CHAR = CharSet(((0, MAX_UNICODE),))
"""Any one Unicode scalar value."""

TOKEN_LEAD = 0xFF
"""The first byte of a token literal (never in UTF-8 text)."""
TOKEN_LITERAL_BYTES = 4
"""Bytes of a token literal: :data:`TOKEN_LEAD`, then the id (24 bits, big-endian)."""
MAX_TOKEN_LITERAL_ID = (1 << 24) - 1


def token_literal(token_id: int) -> Node:
    """The token literal of ``token_id``: exactly that token, not its text.

    Raises
    ------
    ValueError
        ``token_id`` outside ``[0, 2**24)``.
    """
    if not 0 <= token_id <= MAX_TOKEN_LITERAL_ID:
        raise ValueError(f"token id {token_id} cannot be a token literal (ids are below 2**24)")
    return Bytes(bytes((TOKEN_LEAD,)) + token_id.to_bytes(3, "big"))


def seq(*items: Node) -> Node:
    """Concatenation, flattened; adjacent literals are merged."""
    flat: list[Node] = []
    run: list[bytes] = []  # adjacent literal bytes, joined once (not copied per piece: linear, not quadratic)
    for it in items:
        parts = it.items if isinstance(it, Seq) else (it,)
        for p in parts:
            if type(p) is Alt and not p.items:  # NOTHING (by value, without a dataclass __eq__ call)
                return NOTHING
            if type(p) is Bytes:
                run.append(p.data)
                continue
            if run:
                data = b"".join(run)
                run.clear()
                if data:
                    flat.append(Bytes(data))
            flat.append(p)
    if run:
        data = b"".join(run)
        if data:
            flat.append(Bytes(data))
    if not flat:
        return EMPTY
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat))


def alt(*items: Node) -> Node:
    """Union, flattened and deduplicated (order kept)."""
    flat: list[Node] = []
    seen: set[Node] = set()
    for it in items:
        parts = it.items if isinstance(it, Alt) else (it,)
        for p in parts:
            if p not in seen:
                seen.add(p)
                flat.append(p)
    if len(flat) == 1:
        return flat[0]
    return Alt(tuple(flat))


def repeat(item: Node, lo: int, hi: int | None) -> Node:
    """``item{lo,hi}`` (``hi=None``: unbounded).

    Raises
    ------
    ValueError
        If ``lo < 0`` or ``hi < lo``.
    """
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"bad repetition bounds {{{lo},{hi}}}")
    if hi == 0 or item == EMPTY:
        return EMPTY
    if item == NOTHING:
        return EMPTY if lo == 0 else NOTHING
    if lo == 1 and hi == 1:
        return item
    return Repeat(item, lo, hi)


def opt(item: Node) -> Node:
    """``item?``"""
    return repeat(item, 0, 1)


def star(item: Node) -> Node:
    """``item*``"""
    return repeat(item, 0, None)


def plus(item: Node) -> Node:
    """``item+``"""
    return repeat(item, 1, None)


def counted(item: Node, lo: int, hi: int | None) -> Node:
    """``item{lo,hi}`` counted at run time (:class:`Counted`): the automaton holds one copy of
    ``item`` in a loop, and a matcher counts the items it starts (a counter beside its state), so a
    bound of thousands costs no states. ``item`` must be a *prefix code* (no string of it is a
    proper prefix of another, as a JSON string's characters in any spelling): each place where
    an item may start is then known from the bytes read. Where no counter can be kept (inside an
    intersection or a difference, in a context-free grammar's rules), the automaton builds
    :func:`expand` instead.

    Raises
    ------
    ValueError
        If ``lo < 0`` or ``hi < lo``.
    """
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"bad repetition bounds {{{lo},{hi}}}")
    if hi == 0 or item in (EMPTY, NOTHING) or (lo == 0 and hi is None):
        return repeat(item, lo, hi)
    return Counted(item, lo, hi)


def expand(node: Counted) -> Node:
    """The same language as an ordinary :class:`Repeat` (a copy of the item per count)."""
    return repeat(node.item, node.lo, node.hi)


def join(item: Node, sep: Node) -> Node:
    """``item (sep item)*``: one or more ``item`` separated by ``sep``."""
    if item == NOTHING:
        return NOTHING
    if sep == NOTHING:
        return item
    return Join(item, sep)


def subsets(items, sep: Node) -> Node:
    """A non-empty ordered subset of ``items`` (a subsequence, order kept),
    consecutive chosen items joined by ``sep``; items that match nothing are
    dropped, and no item left is the empty language."""
    kept = tuple(i for i in items if i != NOTHING)
    if not kept:
        return NOTHING
    if len(kept) == 1:
        return kept[0]
    if sep == NOTHING:  # no two items can be joined: one of them alone
        return alt(*kept)
    return Subsets(kept, sep)


def intersect(*items: Node) -> Node:
    """Language intersection of ``items``."""
    flat = []
    for it in items:
        flat.extend(it.items if isinstance(it, Intersect) else (it,))
    if any(i == NOTHING for i in flat):
        return NOTHING
    flat = list(dict.fromkeys(flat))
    if len(flat) == 1:
        return flat[0]
    return Intersect(tuple(flat))


def diff(left: Node, right: Node) -> Node:
    """Language difference ``left \\ right``."""
    if right == NOTHING or left == NOTHING:
        return left
    return Diff(left, right)


def quotient(left: Node, suffix: str | bytes) -> Node:
    """The right quotient ``left / suffix``: every ``w`` with ``w + suffix`` in ``left``
    (``suffix`` UTF-8 encoded when given as ``str``; built from ``left``'s DFA)."""
    data = suffix.encode("utf-8") if isinstance(suffix, str) else bytes(suffix)
    if not data or left == NOTHING:
        return left
    return Quotient(left, data)


def embed(item: Node) -> Node:
    """``item``, compiled on its own and embedded (see :class:`Embed`); leaves and
    nodes already built apart (``Intersect``, ``Diff``, ``Quotient``) stay as they are."""
    if isinstance(item, (Bytes, ByteSet, CharSet, Embed, Intersect, Diff, Quotient)):
        return item
    return Embed(item)


_CHILDREN = {
    Seq: operator.attrgetter("items"),
    Alt: operator.attrgetter("items"),
    Intersect: operator.attrgetter("items"),
    Repeat: lambda n: (n.item,),
    Counted: lambda n: (n.item,),
    Subsets: lambda n: (*n.items, n.sep),
    Join: lambda n: (n.item, n.sep),
    Diff: lambda n: (n.left, n.right),
    Quotient: lambda n: (n.left,),
    Embed: lambda n: (n.item,),
}


def children(node: Node) -> tuple[Node, ...]:
    """The direct subterms of ``node``."""
    get = _CHILDREN.get(type(node))
    return get(node) if get is not None else ()


def rewriter(replace, keep=None):
    """A memoized function that rebuilds IR with some nodes replaced: at each node,
    ``replace(node, rebuild)`` gives its replacement (``rebuild`` is the function itself, to rebuild
    what it returns), or None to rebuild the node from its rebuilt children through the smart
    constructors (:func:`seq`, :func:`alt`, ...). A node where ``keep(node)`` is true is returned as
    it is (nothing to replace below it). Recursive over the IR's depth; pure but for its memo."""
    memo: dict[Node, Node] = {}

    def rebuild(node: Node) -> Node:
        if keep is not None and keep(node):
            return node
        got = memo.get(node)
        if got is not None:
            return got
        out = replace(node, rebuild)
        if out is None:
            kind = type(node)
            if kind is Seq:
                out = seq(*(rebuild(i) for i in node.items))
            elif kind is Alt:
                out = alt(*(rebuild(i) for i in node.items))
            elif kind is Intersect:
                out = intersect(*(rebuild(i) for i in node.items))
            elif kind is Repeat:
                out = repeat(rebuild(node.item), node.lo, node.hi)
            elif kind is Counted:
                out = counted(rebuild(node.item), node.lo, node.hi)
            elif kind is Subsets:
                out = subsets([rebuild(i) for i in node.items], rebuild(node.sep))
            elif kind is Join:
                out = join(rebuild(node.item), rebuild(node.sep))
            elif kind is Diff:
                out = diff(rebuild(node.left), rebuild(node.right))
            elif kind is Quotient:
                out = quotient(rebuild(node.left), node.suffix)
            elif kind is Embed:
                out = embed(rebuild(node.item))
            else:
                out = node
        memo[node] = out
        return out

    return rebuild


def iter_nodes(node: Node):
    """Every distinct subterm object of ``node`` (``node`` included), once each,
    iteratively: deep or heavily shared IR costs its size, never the recursion
    limit or an exponential walk."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(children(n))


def contains_ruleref(node: Node) -> bool:
    """Whether ``node`` refers to a named rule anywhere (needs the CFG layer)."""
    return bool(ref_names(node))


NO_REFS: frozenset = frozenset()


def _analyse(node: Node) -> None:
    """Set the cached rule names (``_r``) and tree size (``_s``) of ``node`` and of every
    subterm not analysed yet, children first: iterative, so deep IR never meets the
    recursion limit. Mutates only those caches."""
    stack: list = [(node, None)]
    while stack:
        n, kids = stack.pop()
        if n._s >= 0:
            continue
        if kids is None:
            kids = children(n)
            pending = [k for k in kids if k._s < 0]
            if pending:
                stack.append((n, kids))
                stack.extend((k, None) for k in pending)
                continue
        if kids:
            refs = NO_REFS
            for k in kids:
                if k._r:
                    refs = refs | k._r if refs else k._r
            size = size_from_children(n, [k._s for k in kids])
        else:
            refs = frozenset((n.name,)) if type(n) is RuleRef else NO_REFS
            size = _leaf_size(n)
        object.__setattr__(n, "_r", refs)
        object.__setattr__(n, "_s", size)


def ref_names(node: Node) -> frozenset:
    """Names of the rules ``node`` refers to anywhere (:class:`RuleRef`), cached on every
    subterm (IR is immutable). Pure."""
    if node._s < 0:
        _analyse(node)
    return node._r


SIZE_CAP = 10**9
"""The most :func:`tree_size` counts."""


def _leaf_size(node: Node) -> int:
    kind = type(node)
    if kind is Bytes:
        return max(len(node.data), 1)
    return 1 if kind in (RuleRef, Seq, Alt, Intersect) else 2  # an empty Seq or Alt: 1 + nothing


def size_from_children(node: Node, sizes: list) -> int:
    """:func:`tree_size` of a node with children, from ``sizes``, the children's sizes in
    :func:`children`'s order (the sizes a caller counts its own way, as with rule references
    costing their bodies). Pure."""
    kind = type(node)
    if kind is Repeat or kind is Counted:  # a Counted as its expansion: the front-end's rule decisions unchanged
        out = 1 + sizes[0] * max(node.hi if node.hi is not None else node.lo + 1, 1)
    elif kind is Subsets:
        out = 1 + sum(sizes[:-1]) + sizes[-1] * (len(node.items) - 1)
    elif kind in (Seq, Alt, Intersect, Join, Diff, Embed):  # an Embed's DFA: about as large as its item
        out = 1 + sum(sizes)
    else:  # Quotient: built apart, small in the enclosing automaton
        out = 2
    return min(out, SIZE_CAP)


def tree_size(node: Node) -> int:
    """Nodes of the tree expansion of ``node`` (about the NFA states a Thompson construction
    builds from it): bounded repeats count their copies, a literal its bytes, a character
    set 2, a rule reference 1; an :class:`Embed` one more than its item, a :class:`Quotient` 2, a
    :class:`Counted` as the repetition it counts; at most :data:`SIZE_CAP`. Cached on every subterm. Pure."""
    if node._s < 0:
        _analyse(node)
    return node._s


@dataclass(frozen=True, slots=True)
class RuleOptions:
    """Options of one rule (EBNF ``name[temperature=0.7, max_tokens=32] ::= ...``).

    Attributes
    ----------
    temperature : float or None
        The sampling temperature while the rule is active (an inner rule's
        overrides an outer one's); finite, >= 0.
    max_tokens : int or None
        Token budget of each occurrence (>= 1): once spent, the occurrence
        ends at the first token boundary where it can.
    max_chars : int or None
        Character (code point) budget of each occurrence (>= 0): once spent,
        the occurrence ends at the first character boundary where it can.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    max_chars: int | None = None

    @property
    def has_budget(self) -> bool:
        """Whether the rule has a token or character budget."""
        return self.max_tokens is not None or self.max_chars is not None

    def to_text(self) -> str:
        """The options as EBNF writes them (``"temperature=0.7, max_tokens=32"``)."""
        parts = [f"{k}={v!r}" for k in ("temperature", "max_tokens", "max_chars")
                 if (v := getattr(self, k)) is not None]
        return ", ".join(parts)


@dataclass(frozen=True)
class KeyedObject:
    """A JSON object whose members are rules called one at a time, each key at most once.

    The keys already written are matcher state (a bitset in the object's
    parse frame, see :mod:`leapgen.automata.keyed`), not automaton states:
    the rule ``rule`` is ``"{"`` then calls of ``first`` / ``next`` members
    and a ``close`` rule, and each call is *guarded*: a member whose key was
    written, or after which the object could not be completed (a required
    key out of reach, ``maxProperties`` met), is not called; the object
    closes only with every required key and at least ``lo`` members. So no
    subset of keys is ever enumerated and masks stay exact.

    Attributes
    ----------
    rule : str
        The object's rule.
    keys : tuple of str
        Each member's key, by member index (for messages and tools).
    first, next : tuple of str
        Per member index, the rule that writes it as the first member (after
        ``{``) and after a comma.
    close_empty, close : str
        The rules closing an empty and a non-empty object.
    required : int
        Bitmask of the members that must be written.
    lo : int
        Fewest members (``minProperties``).
    hi : int or None
        Most members (``maxProperties``).
    repeatable : int
        Bitmask of members that may be written again (a key region with
        infinitely many keys: counted, not remembered).
    ordered : int
        Bitmask of members written in index order and before every other
        member (schema order); 0 for any order.
    """

    rule: str
    keys: tuple
    first: tuple
    next: tuple
    close_empty: str
    close: str
    required: int = 0
    lo: int = 0
    hi: int | None = None
    repeatable: int = 0
    ordered: int = 0

    @property
    def rules(self) -> tuple:
        """Every rule of the object."""
        return (self.rule, *self.first, *self.next, self.close_empty, self.close)


@dataclass(frozen=True)
class Grammar:
    """A context-free grammar: named rules whose bodies are IR and may refer to
    each other with :class:`RuleRef`.

    Attributes
    ----------
    rules : dict of str to Node
        Rule name -> body. Not mutated after construction.
    root : str
        The start rule.
    keep : frozenset of str
        Rules :func:`leapgen.grammar.cfg.simplify_grammar` keeps as rules
        even when they do not recurse (large bodies used in several places:
        inlining would copy them).
    keyed : tuple of KeyedObject
        Objects whose keys are matcher state; their rules are kept too.
    options : dict of str to RuleOptions
        Rule options (temperature, budgets); such rules are kept as rules too,
        so a matcher sees when they are active. Not mutated after construction.
    """

    rules: dict
    root: str
    keep: frozenset = frozenset()
    keyed: tuple = ()
    options: dict = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.root, tuple(self.rules.items()), self.keep, self.keyed,
                     tuple(sorted(self.options.items()))))
