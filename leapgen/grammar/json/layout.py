"""JSON layout (where whitespace goes) and the any-JSON-value grammar
(a recursive rule, or bounded nesting).

Three layouts:

* ``any_whitespace=True``: ``[ \\t\\n\\r]{0,max_whitespace}`` at every place
  RFC 8259 allows whitespace *between* tokens (not before or after the whole
  document). The bound (default 20) stops whitespace runaway. A given
  ``whitespace`` language (vLLM's ``whitespace_pattern``) takes the place of
  that run.
* ``any_whitespace=False, indent=None``: exactly the separators, default
  ``(",", ":")``; empty containers are ``{}`` and ``[]``.
* ``any_whitespace=False, indent=N``: exactly ``json.dumps(indent=N)``
  (separators default ``(",", ": ")``, as ``json.dumps`` uses with an indent):
  a newline and ``N * depth`` spaces before each member and before the closing
  bracket; empty containers are ``{}`` and ``[]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..ir import Node
from .numbers import number_node
from .strings import quoted, string_content

WS_BYTES = ir.byteset([(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)])

ANY_VALUE_DEPTH = 2
"""Container nesting allowed inside a *bounded* any-JSON-value (``{}`` schema,
``additionalProperties: true``, array without ``items``), used with
``cfg=False`` and with the indent layout (whose indentation depends on depth,
so no finite set of rules expresses it). ``[]``/``{}`` count as one level.
Kept at 2: the tree-expanding NFA construction grows about 4x per level."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where whitespace goes between JSON tokens.

    Parameters
    ----------
    any_whitespace : bool
        Flexible whitespace, bounded by ``max_whitespace``.
    indent : int or str or None
        ``json.dumps`` indent (ignored with ``any_whitespace``).
    item_sep, key_sep : str
        Separators (ignored with ``any_whitespace``).
    max_whitespace : int
        Bound of each whitespace run with ``any_whitespace``.
    whitespace : Node or None
        With ``any_whitespace``: the language of each whitespace run instead
        of ``[ \t\n\r]{0,max_whitespace}`` (vLLM's ``whitespace_pattern``).
    """

    any_whitespace: bool
    indent: str | None
    item_sep: str
    key_sep: str
    max_whitespace: int
    whitespace: Node | None = None

    @property
    def depth_dependent(self) -> bool:
        """Whether a value's text depends on its nesting depth (indent layout)."""
        return not self.any_whitespace and self.indent is not None

    def ws(self) -> Node:
        if self.whitespace is not None:
            return self.whitespace
        return ir.repeat(WS_BYTES, 0, self.max_whitespace)

    def _nl(self, depth: int) -> str:
        return "\n" + self.indent * depth

    def open(self, bracket: str, depth: int) -> Node:
        """The opening bracket of a non-empty container at ``depth`` and what follows it."""
        return ir.seq(ir.lit(bracket), self.after_open(depth))

    def after_open(self, depth: int) -> Node:
        """What follows the opening bracket of a non-empty container at ``depth``."""
        if self.any_whitespace:
            return self.ws()
        if self.indent is not None:
            return ir.lit(self._nl(depth + 1))
        return ir.EMPTY

    def close(self, bracket: str, depth: int) -> Node:
        """The closing bracket of a non-empty container at ``depth`` and what precedes it."""
        if self.any_whitespace:
            return ir.seq(self.ws(), ir.lit(bracket))
        if self.indent is not None:
            return ir.lit(self._nl(depth) + bracket)
        return ir.lit(bracket)

    def empty(self, brackets: str) -> Node:
        """An empty container (``"{}"`` or ``"[]"``)."""
        return ir.seq(ir.lit(brackets[0]), self.empty_tail(brackets[1]))

    def empty_tail(self, bracket: str) -> Node:
        """An empty container after its opening bracket: the closing ``bracket`` (whitespace before it)."""
        if self.any_whitespace:
            return ir.seq(self.ws(), ir.lit(bracket))
        return ir.lit(bracket)

    def comma(self, depth: int) -> Node:
        """Between two members/items of a container at ``depth``."""
        if self.any_whitespace:
            return ir.seq(self.ws(), ir.lit(","), self.ws())
        if self.indent is not None:
            return ir.lit(self.item_sep + self._nl(depth + 1))
        return ir.lit(self.item_sep)

    def colon(self) -> Node:
        """Between a key and its value."""
        if self.any_whitespace:
            return ir.seq(self.ws(), ir.lit(":"), self.ws())
        return ir.lit(self.key_sep)


def make_layout(any_whitespace: bool, indent, separators, max_whitespace: int,
                whitespace: Node | None = None) -> Layout:
    """Validate the layout options (see :func:`json_schema_to_ir`); a
    ``whitespace`` language implies ``any_whitespace``.

    Raises
    ------
    ValueError
        On a negative ``max_whitespace``/``indent`` or malformed separators.
    """
    if not isinstance(max_whitespace, int) or max_whitespace < 0:
        raise ValueError(f"max_whitespace must be a non-negative int, got {max_whitespace!r}")
    ind: str | None
    if indent is None:
        ind = None
    elif isinstance(indent, bool) or not isinstance(indent, (int, str)):
        raise ValueError(f"indent must be None, an int or a str, got {indent!r}")
    elif isinstance(indent, int):
        if indent < 0:
            raise ValueError(f"indent must be >= 0, got {indent}")
        ind = " " * indent
    else:
        ind = indent
    if separators is None:
        item_sep, key_sep = (",", ":") if ind is None else (",", ": ")
    else:
        if (not isinstance(separators, (tuple, list)) or len(separators) != 2
                or not all(isinstance(s, str) for s in separators)):
            raise ValueError(f"separators must be a pair of str, got {separators!r}")
        item_sep, key_sep = separators
    if whitespace is not None and not isinstance(whitespace, Node):
        raise ValueError(f"whitespace must be grammar IR, got {type(whitespace).__name__}")
    return Layout(bool(any_whitespace) or whitespace is not None, ind, item_sep, key_sep, max_whitespace, whitespace)


def container(layout: Layout, brackets: str, depth: int, first: Node, rest: Node, *,
              empty_ok: bool) -> Node:
    """A container whose non-empty body is ``first`` then ``rest`` (``rest``
    already holds its own commas), or the empty container when ``empty_ok``."""
    body = ir.seq(layout.open(brackets[0], depth), first, rest, layout.close(brackets[1], depth))
    return ir.alt(body, layout.empty(brackets)) if empty_ok else body


def any_value(layout: Layout, depth: int, levels: int = ANY_VALUE_DEPTH, memo: dict | None = None) -> Node:
    """Any JSON value at nesting ``depth`` with at most ``levels`` container levels.

    Parameters
    ----------
    layout : Layout
    depth : int
        Absolute nesting depth (matters for the indent layout only).
    levels : int
        Container levels allowed inside the value.
    memo : dict, optional
        Cache (mutated).
    """
    if memo is None:
        memo = {}
    key = (depth if layout.depth_dependent else 0, levels)
    hit = memo.get(key)
    if hit is not None:
        return hit
    scalars = [quoted(string_content()), number_node(), ir.lit("true"), ir.lit("false"), ir.lit("null")]
    if levels <= 0:
        out = ir.alt(*scalars)
    else:
        inner = any_value(layout, depth + 1, levels - 1, memo)
        comma = layout.comma(depth)
        arr = container(layout, "[]", depth, ir.join(inner, comma), ir.EMPTY, empty_ok=True)
        member = ir.seq(quoted(string_content()), layout.colon(), inner)
        obj = container(layout, "{}", depth, ir.join(member, comma), ir.EMPTY, empty_ok=True)
        out = ir.alt(*scalars, arr, obj)
    memo[key] = out
    return out


def any_value_rule(layout: Layout, name: str) -> Node:
    """The body of a rule ``name`` matching any JSON value, nested to any depth
    through ``RuleRef(name)`` (for a layout whose text does not depend on depth)."""
    inner = ir.RuleRef(name)
    comma = layout.comma(0)
    scalars = [quoted(string_content()), number_node(), ir.lit("true"), ir.lit("false"), ir.lit("null")]
    arr = container(layout, "[]", 0, ir.join(inner, comma), ir.EMPTY, empty_ok=True)
    member = ir.seq(quoted(string_content()), layout.colon(), inner)
    obj = container(layout, "{}", 0, ir.join(member, comma), ir.EMPTY, empty_ok=True)
    return ir.alt(*scalars, arr, obj)
