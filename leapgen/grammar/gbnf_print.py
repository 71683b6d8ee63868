"""Grammar IR -> GBNF text (the dialect :mod:`leapgen.grammar.ebnf` reads).

``parse_ebnf(to_gbnf(g))`` is the language of ``g`` for IR built from
characters (every front-end's output), with these limits:

- :class:`~leapgen.grammar.ir.Intersect`, :class:`~leapgen.grammar.ir.Diff`
  and :class:`~leapgen.grammar.ir.Quotient` (JSON Schema ``propertyNames``,
  keys that must differ from listed names, lookahead, a structural tag's text
  before a trigger) have no GBNF form: they print as ``( a ) & ( b )``,
  ``( a ) - ( b )`` and ``( a ) / "suffix"``, which the parser refuses;
- a structural tag's token literals (``0xFF`` and a token id) print as
  ``\xff`` escapes, which GBNF reads as characters;
- bytes that are not UTF-8 text (a :class:`~leapgen.grammar.ir.ByteSet` above
  0x7F) print as ``\\xHH``, which GBNF reads as the code point U+00HH.

:class:`~leapgen.grammar.ir.Subsets` prints as helper rules
(``<rule>_item_<i>``), one per item.
"""

from __future__ import annotations

from leapgen.grammar import ir

_SURROGATES = (0xD800, 0xDFFF)
_ESCAPES = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x5C: "\\\\"}


def _char(cp: int, specials: str) -> str:
    if cp in _ESCAPES:
        return _ESCAPES[cp]
    if chr(cp) in specials:
        return "\\" + chr(cp)
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    if cp > 0xFFFF:
        return chr(cp) if chr(cp).isprintable() else f"\\U{cp:08x}"
    return chr(cp) if chr(cp).isprintable() and not 0xD800 <= cp <= 0xDFFF else f"\\u{cp:04x}"


def _literal(data: bytes) -> str:
    out = []
    i = 0
    while i < len(data):
        # decode one character at a time: a byte that is not UTF-8 prints as \xHH
        for width in (1, 2, 3, 4):
            try:
                c = data[i:i + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(_char(ord(c), '"'))
            i += width
            break
        else:
            out.append(f"\\x{data[i]:02x}")
            i += 1
    return '"' + "".join(out) + '"'


def _split_surrogates(ranges) -> list[tuple[int, int]]:
    out = []
    for lo, hi in ranges:
        if lo < _SURROGATES[0] <= hi or lo <= _SURROGATES[1] < hi:
            if lo < _SURROGATES[0]:
                out.append((lo, _SURROGATES[0] - 1))
            if hi > _SURROGATES[1]:
                out.append((_SURROGATES[1] + 1, hi))
        elif not (_SURROGATES[0] <= lo and hi <= _SURROGATES[1]):
            out.append((lo, hi))
    return out


def _class(ranges, limit: int) -> str:
    """A character class for code point (or byte) ranges; negated when shorter."""
    rs = _split_surrogates(ranges) if limit == ir.MAX_UNICODE else list(ranges)
    if not rs:
        return f"[^\\x00-\\U{ir.MAX_UNICODE:08x}]"  # the empty language
    if limit == ir.MAX_UNICODE:
        comp = _split_surrogates(ir.complement_ranges(ir.normalize_ranges(rs + [_SURROGATES], limit), limit))
        if len(comp) < len(rs):
            return "[^" + "".join(_range(lo, hi) for lo, hi in comp) + "]"
    return "[" + "".join(_range(lo, hi) for lo, hi in rs) + "]"


def _range(lo: int, hi: int) -> str:
    a = _char(lo, "]^-")
    return a if lo == hi else a + "-" + _char(hi, "]^-")


_ALT, _SEQ, _POSTFIX, _ATOM = 0, 1, 2, 3


class _Printer:
    def __init__(self, names: set[str]):
        self.taken = set(names)
        self.helpers: list[tuple[str, str]] = []

    def fresh(self, base: str) -> str:
        k = 0
        while f"{base}_{k}" in self.taken:
            k += 1
        self.taken.add(f"{base}_{k}")
        return f"{base}_{k}"

    def expr(self, node: ir.Node, rule: str, need: int = _ALT) -> str:
        text, prec = self._expr(node, rule)
        return text if prec >= need else f"({text})"

    def _expr(self, node: ir.Node, rule: str) -> tuple[str, int]:
        t = type(node)
        if t is ir.Bytes:
            return _literal(node.data), _ATOM
        if t is ir.CharSet:
            return _class(node.ranges, ir.MAX_UNICODE), _ATOM
        if t is ir.ByteSet:
            return _class(node.ranges, 0xFF), _ATOM
        if t is ir.RuleRef:
            return node.name, _ATOM
        if t is ir.Seq:
            return " ".join(self.expr(i, rule, _SEQ) for i in node.items), _SEQ
        if t is ir.Alt:
            if not node.items:
                return _class((), ir.MAX_UNICODE), _ATOM
            return " | ".join(self.expr(i, rule, _SEQ) for i in node.items), _ALT
        if t is ir.Repeat:
            lo, hi = node.lo, node.hi
            op = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
            if op is None:
                op = f"{{{lo}}}" if lo == hi else f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
            return self.expr(node.item, rule, _ATOM) + op, _POSTFIX
        if t is ir.Join:
            item = self.expr(node.item, rule, _SEQ)
            return f"{item} ({self.expr(node.sep, rule, _SEQ)} {item})*", _SEQ
        if t is ir.Subsets:
            names = []
            for item in node.items:
                name = self.fresh(f"{rule}_item")
                self.helpers.append((name, self.expr(item, name)))
                names.append(name)
            sep = self.expr(node.sep, rule, _SEQ)
            alts = [" ".join([first] + [f"({sep} {n})?" for n in names[i + 1:]]) for i, first in enumerate(names)]
            return " | ".join(alts), _ALT
        if t is ir.Intersect:
            return " & ".join(f"({self.expr(i, rule)})" for i in node.items), _ALT
        if t is ir.Diff:
            return f"({self.expr(node.left, rule)}) - ({self.expr(node.right, rule)})", _ALT
        if t is ir.Quotient:
            return f"({self.expr(node.left, rule)}) / {_literal(node.suffix)}", _ALT
        if t is ir.Embed:
            return self.expr(node.item, rule, _ATOM), _ATOM
        raise TypeError(f"cannot print IR node {t.__name__}")


def to_gbnf(grammar: ir.Node | ir.Grammar, *, rule_options: dict[str, str] | None = None) -> str:
    """GBNF text of a regular term (as rule ``root``) or of a grammar of rules.

    Parameters
    ----------
    grammar : ir.Node or ir.Grammar
    rule_options : dict of str to str, optional
        Text to print in brackets after a rule's name (``"temperature=0.7"``).

    Returns
    -------
    str
        One ``name ::= body`` line per rule, the root first, then helper rules;
        ends with a newline. See the module docstring for what cannot be
        printed exactly. Does not mutate ``grammar``.
    """
    if isinstance(grammar, ir.Grammar):
        rules, root = grammar.rules, grammar.root
    else:
        rules, root = {"root": grammar}, "root"
    printer = _Printer(set(rules))
    options = rule_options or {}
    lines = []
    for name in [root] + [n for n in rules if n != root]:
        head = f"{name}[{options[name]}]" if options.get(name) else name
        lines.append(f"{head} ::= {printer.expr(rules[name], name)}")
    lines.extend(f"{name} ::= {body}" for name, body in printer.helpers)
    return "\n".join(lines) + "\n"
