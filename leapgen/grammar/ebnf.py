"""EBNF front-end: the GBNF dialect of llama.cpp and xgrammar -> grammar IR.

Syntax
------
::

    # a comment
    root  ::= "{" ws pair ("," ws pair)* "}"
    pair  ::= string ws ":" ws value
    digit ::= [0-9]
    name  ::= [a-zA-Z_] [a-zA-Z0-9_]{0,31}

- ``name ::= body``; a rule ends where the next ``name ::=`` starts.
- Literals in double (or single) quotes with escapes ``\\n \\r \\t \\\\ \\" \\'``,
  ``\\xHH``, ``\\uHHHH``, ``\\UHHHHHHHH``; ``""`` is the empty string.
- Character classes ``[a-z]``, ``[^"\\\\]``, over Unicode code points.
- ``.`` is any character; ``( ... )`` groups; ``|`` alternation.
- Quantifiers ``* + ?`` and ``{m}``, ``{m,}``, ``{m,n}``, ``{,n}``.
- Rule options, xgrammar's, in brackets right after the name:
  ``value[temperature=0.7, max_tokens=32, max_chars=128] ::= ...``
  (:class:`~leapgen.grammar.ir.RuleOptions`): ``temperature`` a finite
  number >= 0, ``max_tokens`` an int in [1, 1,000,000], ``max_chars`` an int
  in [0, 2**31 - 1]. xgrammar's ``capture``, ``lazy`` and capture-suffix
  options are refused, naming the option.
- Refused with a clear error: xgrammar's lookahead assertions ``(= ...)`` and
  macros (``TagDispatch(...)``, ``Regex(...)``...).

Errors raise :class:`~leapgen.errors.GrammarError` with ``line:column`` and
what was expected there.
"""

from __future__ import annotations

import re

from leapgen.errors import GrammarError
from leapgen.grammar import ir

NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
SIMPLE_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "\\": 0x5C, '"': 0x22, "'": 0x27, "[": 0x5B,
                  "]": 0x5D, "-": 0x2D, "^": 0x5E, "/": 0x2F, "0": 0x00, "f": 0x0C, "v": 0x0B, "b": 0x08}
HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
# Deepest nesting of ( ... ) groups: the parser and the IR passes recurse per level.
MAX_GROUP_DEPTH = 100


def parse_ebnf(text: str, *, root_rule_name: str = "root") -> ir.Grammar:
    """Parse GBNF text into a grammar of IR rules.

    Parameters
    ----------
    text : str
        The grammar.
    root_rule_name : str, default "root"
        The start rule.

    Returns
    -------
    ir.Grammar

    Raises
    ------
    GrammarError
        Syntax errors (``where`` is ``"line L:C"``), duplicate or undefined
        rules, a missing root.
    """
    if not isinstance(text, str):
        raise GrammarError(f"EBNF grammar must be a str, got {type(text).__name__}")
    if not isinstance(root_rule_name, str):
        raise GrammarError(f"root_rule_name must be a str, got {type(root_rule_name).__name__}")
    lone = _LONE_SURROGATE.search(text)
    if lone is not None:
        # Half of a UTF-16 pair, or a byte that was not UTF-8 decoded with errors="surrogateescape".
        raise GrammarError(f"lone surrogate U+{ord(lone.group()):04X} has no UTF-8 form (pass the character "
                           "itself, not half of a UTF-16 pair)", where=_Parser(text).where(lone.start()))
    return _Parser(text).parse(root_rule_name)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: Supported rule options and their inclusive bounds (xgrammar's).
_OPTION_LIMITS = {"temperature": (0.0, 1.7976931348623157e308), "max_tokens": (1, 1_000_000),
                  "max_chars": (0, 2**31 - 1)}
#: xgrammar's EBNF macros (``Name(...)``), refused by name.
_XGRAMMAR_MACROS = frozenset({"Regex", "Substring", "TagDispatch", "Token", "ExcludeToken", "TokenTagDispatch"})
#: xgrammar's other rule options, refused by name.
_UNSUPPORTED_OPTIONS = frozenset({"capture", "lazy", "suffix", "stop", "stop_capture", "capture_hidden_suffix_bytes",
                                  "capture_hidden_stop_bytes", "capture_hidden_body_rule_id",
                                  "capture_hidden_marker_rule_id"})


class _Parser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self.refs: list[tuple[str, int]] = []
        self.depth = 0  # open groups

    # -- positions and errors -------------------------------------------------------------------

    def where(self, pos: int | None = None) -> str:
        pos = self.i if pos is None else pos
        line = self.s.count("\n", 0, pos) + 1
        col = pos - (self.s.rfind("\n", 0, pos) + 1) + 1
        return f"line {line}:{col}"

    def error(self, msg: str, pos: int | None = None) -> GrammarError:
        return GrammarError(msg, where=self.where(pos))

    def skip_space(self) -> None:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end + 1
            else:
                break

    def peek(self) -> str:
        self.skip_space()
        return self.s[self.i] if self.i < len(self.s) else ""

    def name_at(self, pos: int) -> str:
        j = pos
        while j < len(self.s) and self.s[j] in NAME_CHARS:
            j += 1
        return self.s[pos:j]

    def rule_starts_here(self) -> bool:
        self.skip_space()
        name = self.name_at(self.i)
        if not name:
            return False
        j = self.i + len(name)
        if j < len(self.s) and self.s[j] == "[":
            j = self.options_end(j)
            if j < 0:
                return False
        while j < len(self.s) and self.s[j] in " \t":
            j += 1
        return self.s.startswith("::=", j)

    def options_end(self, j: int) -> int:
        """The index after the ``]`` closing the option list opened at ``j`` (quotes
        skipped, same line), or -1."""
        quote = None
        j += 1
        while j < len(self.s) and self.s[j] != "\n":
            c = self.s[j]
            if quote:
                if c == "\\":
                    j += 1
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == "]":
                return j + 1
            j += 1
        return -1

    # -- grammar ----------------------------------------------------------------------------------

    def parse(self, root: str) -> ir.Grammar:
        rules: dict[str, ir.Node] = {}
        options: dict[str, ir.RuleOptions] = {}
        while self.peek():
            start = self.i
            name = self.name_at(self.i)
            if not name:
                raise self.error(f"expected a rule name, found {self.s[self.i]!r}")
            self.i += len(name)
            if self.i < len(self.s) and self.s[self.i] == "[":
                opts = self.rule_options(name)
                if opts != ir.RuleOptions():
                    options[name] = opts
            self.skip_space()
            if not self.s.startswith("::=", self.i):
                raise self.error(f"expected '::=' after rule name {name!r}")
            self.i += 3
            if name in rules:
                raise self.error(f"rule {name!r} is defined twice", start)
            rules[name] = self.alternation()
            if self.peek() == ")":
                raise self.error("unbalanced ')'")
        for ref, pos in self.refs:
            if ref not in rules:
                raise self.error(f"rule {ref!r} is not defined", pos)
        if root not in rules:
            raise GrammarError(f"the grammar has no root rule {root!r}")
        return ir.Grammar(rules, root, options=options)

    def rule_options(self, rule: str) -> ir.RuleOptions:
        """Parse ``[name=value, ...]`` after a rule name (``self.i`` at the ``[``)."""
        start = self.i
        end = self.options_end(self.i)
        if end < 0:
            raise self.error(f"the option list of rule {rule!r} has no closing ']' on its line", start)
        seen: dict[str, object] = {}
        for item_start, item in self.option_items(start + 1, end - 1):
            key, eq, value = (part.strip() for part in item.partition("="))
            if not key:
                raise self.error(f"rule {rule!r}: empty option", item_start)
            if key in seen:
                raise self.error(f"rule {rule!r}: option {key!r} is given twice", item_start)
            if key in _UNSUPPORTED_OPTIONS:
                raise self.error(f"rule {rule!r}: the rule option {key!r} is not supported by leapgen "
                                 f"(supported: {', '.join(_OPTION_LIMITS)})", item_start)
            if key not in _OPTION_LIMITS:
                raise self.error(f"rule {rule!r}: unknown rule option {key!r}; expected one of "
                                 f"{', '.join(_OPTION_LIMITS)}", item_start)
            if not eq or not value:
                raise self.error(f"rule {rule!r}: option {key!r} needs a value ({key}=...)", item_start)
            seen[key] = self.option_value(rule, key, value, item_start)
        self.i = end
        return ir.RuleOptions(**seen)

    def option_items(self, lo: int, hi: int):
        """(offset, text) of each comma-separated item in ``s[lo:hi]`` (quotes respected)."""
        items, quote, begin = [], None, lo
        for j in range(lo, hi):
            c = self.s[j]
            if quote:
                quote = None if c == quote else quote
            elif c in "\"'":
                quote = c
            elif c == ",":
                items.append((begin, self.s[begin:j]))
                begin = j + 1
        items.append((begin, self.s[begin:hi]))
        return [(b + len(t) - len(t.lstrip()), t) for b, t in items]

    def option_value(self, rule: str, key: str, text: str, pos: int):
        lo, hi = _OPTION_LIMITS[key]
        if key == "temperature":
            try:
                value = float(text)
            except ValueError:
                value = float("nan")
            if not (lo <= value <= hi):  # also refuses nan and inf
                raise self.error(f"rule {rule!r}: temperature must be a finite non-negative number, got {text!r}", pos)
            return value
        if not re.fullmatch(r"[0-9]+", text) or not lo <= int(text) <= hi:
            raise self.error(f"rule {rule!r}: {key} must be an integer in [{lo}, {hi}], got {text!r}", pos)
        return int(text)

    def alternation(self) -> ir.Node:
        alts = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            alts.append(self.sequence())
        return ir.alt(*alts)

    def sequence(self) -> ir.Node:
        items = []
        while True:
            c = self.peek()
            if c in ("", "|", ")") or self.rule_starts_here():
                return ir.seq(*items)
            items.append(self.quantified(self.primary()))

    def primary(self) -> ir.Node:
        c = self.peek()
        start = self.i
        if c in ('"', "'"):
            return self.literal(c)
        if c == "[":
            return self.char_class()
        if c == ".":
            self.i += 1
            return ir.ANY_CHAR
        if c == "(":
            j = self.i + 1
            while j < len(self.s) and self.s[j] in " \t\r\n":
                j += 1
            if self.s.startswith("=", j):
                raise self.error("lookahead assertions '(= ...)' (xgrammar's EBNF extension) are not supported by "
                                 "leapgen; remove it", start)
            if self.depth >= MAX_GROUP_DEPTH:
                raise self.error(f"groups nest deeper than {MAX_GROUP_DEPTH} levels", start)
            self.i += 1
            self.depth += 1
            body = self.alternation()
            self.depth -= 1
            if self.peek() != ")":
                raise self.error("expected ')' to close the group opened", start)
            self.i += 1
            return body
        name = self.name_at(self.i)
        if name:
            if name in _XGRAMMAR_MACROS and self.s.startswith("(", self.i + len(name)):
                raise self.error(f"xgrammar's EBNF macro {name}(...) is not supported by leapgen", start)
            self.i += len(name)
            self.refs.append((name, start))
            return ir.RuleRef(name)
        raise self.error(f"expected a literal, character class, rule name or '(', found {c!r}")

    def quantified(self, node: ir.Node) -> ir.Node:
        while True:
            c = self.peek()  # spaces may precede a quantifier, as in llama.cpp and xgrammar
            if c == "*":
                self.i += 1
                node = ir.star(node)
            elif c == "+":
                self.i += 1
                node = ir.plus(node)
            elif c == "?":
                self.i += 1
                node = ir.opt(node)
            elif c == "{":
                lo, hi = self.braces()
                node = ir.repeat(node, lo, hi)
            else:
                return node

    def braces(self) -> tuple[int, int | None]:
        start = self.i
        self.i += 1
        lo = self.number(default=0)
        hi: int | None = lo
        if self.peek() == ",":
            self.i += 1
            hi = self.number(default=None)
        if self.peek() != "}":
            raise self.error("expected '}' to close the repetition", start)
        self.i += 1
        if hi is not None and hi < lo:
            raise self.error(f"repetition {{{lo},{hi}}} has its bounds out of order", start)
        return lo, hi

    def number(self, default):
        self.skip_space()
        j = self.i
        while j < len(self.s) and self.s[j] in "0123456789":  # ASCII only: int() refuses '²'
            j += 1
        if j == self.i:
            return default
        value = int(self.s[self.i:j])
        self.i = j
        return value

    # -- literals and classes ---------------------------------------------------------------------

    def escape(self) -> int:
        start = self.i
        self.i += 1  # the backslash
        if self.i >= len(self.s):
            raise self.error("the grammar ends inside an escape", start)
        c = self.s[self.i]
        if c in HEX_ESCAPES:
            n = HEX_ESCAPES[c]
            digits = self.s[self.i + 1:self.i + 1 + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"expected {n} hex digits after '\\{c}'", start)
            self.i += 1 + n
            cp = int(digits, 16)
            if cp > ir.MAX_UNICODE or 0xD800 <= cp <= 0xDFFF:
                raise self.error(f"escape '\\{c}{digits}' is not a Unicode scalar value", start)
            return cp
        if c in SIMPLE_ESCAPES:
            self.i += 1
            return SIMPLE_ESCAPES[c]
        raise self.error(f"unknown escape '\\{c}'", start)

    def literal(self, quote: str) -> ir.Node:
        start = self.i
        self.i += 1
        chars = []
        while True:
            if self.i >= len(self.s) or self.s[self.i] == "\n":
                raise self.error("unterminated string literal", start)
            c = self.s[self.i]
            if c == quote:
                self.i += 1
                return ir.lit("".join(chars))
            if c == "\\":
                chars.append(chr(self.escape()))
            else:
                chars.append(c)
                self.i += 1

    def class_char(self) -> int:
        if self.s[self.i] == "\\":
            return self.escape()
        c = self.s[self.i]
        self.i += 1
        return ord(c)

    def char_class(self) -> ir.Node:
        start = self.i
        self.i += 1
        negate = self.i < len(self.s) and self.s[self.i] == "^"
        if negate:
            self.i += 1
        ranges = []
        while True:
            if self.i >= len(self.s):
                raise self.error("unterminated character class", start)
            if self.s[self.i] == "]":
                self.i += 1
                break
            lo = self.class_char()
            hi = lo
            if self.s.startswith("-", self.i) and not self.s.startswith("-]", self.i):
                self.i += 1
                if self.i >= len(self.s):
                    raise self.error("unterminated character class", start)
                hi = self.class_char()
                if hi < lo:
                    raise self.error("character range out of order", start)
            ranges.append((lo, hi))
        if not ranges and not negate:
            raise self.error("empty character class", start)
        return ir.charset(ranges, negate=negate)
