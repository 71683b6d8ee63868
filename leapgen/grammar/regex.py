"""Regex front-end: ECMAScript (ECMA-262) patterns -> grammar IR.

This is the dialect JSON Schema's ``pattern`` keyword uses (JSON Schema 2020-12
Validation, section 6.3.3, refers to ECMA-262). Patterns are matched over
Unicode code points (as with the ``u`` flag) and lowered to byte-level IR, so
any token, even one holding half a UTF-8 character, can be walked.

Supported
---------
============================  ==================================================
literals                      any character; ``\\`` escapes of syntax characters
escapes                       ``\\d \\D \\w \\W \\s \\S \\t \\n \\r \\f \\v \\0 \\a \\e``,
                              ``\\xHH``, ``\\uHHHH``, ``\\u{H...}``, ``\\cX``
classes                       ``[...]``, ``[^...]``, ranges, escapes inside;
                              ``\\b`` inside a class is backspace
``.``                         any character except line terminators
                              (``\\n \\r \\u2028 \\u2029``)
groups                        ``(...)``, ``(?:...)``, ``(?<name>...)``
alternation                   ``a|b``
quantifiers                   ``* + ? {n} {n,} {n,m}`` and lazy forms (``*?``);
                              a ``{`` that starts no quantifier is a literal
anchors                       ``^`` at the start and ``$`` at the end of a
                              top-level alternative (possibly inside groups
                              that span it)
lookahead                     ``(?=...)`` / ``(?!...)`` directly in a top-level
                              sequence (or in one of a lookahead's), compiled
                              exactly by language intersection / difference;
                              inside one, ``$`` at the end of an alternative is
                              the end of the input, ``^`` at its start only
                              where the lookahead stands at the start
============================  ==================================================

Character classes follow ECMA-262: ``\\d`` is ``[0-9]``, ``\\w`` is
``[A-Za-z0-9_]``, ``\\s`` is ECMAScript white space plus line terminators.

Not supported (``RegexError`` naming the construct and its offset):
lookbehind, lookahead nested inside groups or quantifiers, backreferences,
``\\b``/``\\B`` word boundaries, ``\\p{...}`` property escapes, inline flags,
anchors elsewhere than at the ends, possessive quantifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leapgen.errors import RegexError
from leapgen.grammar import ir

MAX_REPEAT = 10_000
# Deepest nesting of groups / lookaheads: parsing and lowering recurse per level.
MAX_GROUP_DEPTH = 100

DIGIT = ((0x30, 0x39),)
WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
SPACE = (
    (0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
    (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF),
)
LINE_TERMINATORS = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
CLASS_ESCAPES = {"d": (DIGIT, False), "D": (DIGIT, True), "w": (WORD, False),
                 "W": (WORD, True), "s": (SPACE, False), "S": (SPACE, True)}
CONTROL_ESCAPES = {"t": 0x09, "n": 0x0A, "r": 0x0D, "f": 0x0C, "v": 0x0B, "0": 0x00,
                   "a": 0x07, "e": 0x1B}
SYNTAX = set("^$\\.*+?()[]{}|/-")


# ---------------------------------------------------------------------------
# Parse tree (private): keeps anchors and lookaheads until lowering.


@dataclass
class _Anchor:
    kind: str  # "^" or "$"
    offset: int


@dataclass
class _Look:
    negative: bool
    body: object
    offset: int


@dataclass
class _Group:
    alts: list  # list of list of terms


@dataclass
class _Quant:
    item: object
    lo: int
    hi: int | None


_LONE_SURROGATE = re.compile('[\ud800-\udfff]')


def parse_regex(pattern: str, *, search: bool = False) -> ir.Node:
    """Parse an ECMAScript regex into grammar IR.

    Parameters
    ----------
    pattern : str
        The pattern, ECMA-262 syntax (see the module docstring).
    search : bool, default False
        False: the IR matches strings the pattern matches in full (anchors at
        the ends are no-ops). True: JSON Schema ``pattern`` semantics, an
        unanchored search: the IR matches every string that *contains* a
        match, unless ``^`` / ``$`` anchor it.

    Returns
    -------
    ir.Node
        The language over UTF-8 bytes.

    Raises
    ------
    RegexError
        Malformed pattern or unsupported construct, with its offset.

    Does not mutate anything.
    """
    if not isinstance(pattern, str):
        raise RegexError(f"pattern must be a str, got {type(pattern).__name__}", pattern=str(pattern), offset=0)
    lone = _LONE_SURROGATE.search(pattern)
    if lone is not None:
        raise RegexError(f"lone surrogate U+{ord(lone.group()):04X} has no UTF-8 form (pass the character itself, "
                         "not half of a UTF-16 pair)", pattern=pattern, offset=lone.start())
    tree = _Parser(pattern).parse()
    return _Lowerer(pattern, search).lower_top(tree)


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.depth = 0  # open groups

    def error(self, msg: str, offset: int | None = None) -> RegexError:
        return RegexError(msg, pattern=self.p, offset=self.i if offset is None else offset)

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.p[j] if j < len(self.p) else None

    def parse(self) -> _Group:
        g = self.disjunction()
        if self.i < len(self.p):
            raise self.error("unbalanced ')'")
        return g

    def disjunction(self) -> _Group:
        alts = [self.alternative()]
        while self.peek() == "|":
            self.i += 1
            alts.append(self.alternative())
        return _Group(alts)

    def alternative(self) -> list:
        terms: list = []
        while self.i < len(self.p) and self.peek() not in ("|", ")"):
            terms.append(self.term())
        return terms

    def term(self):
        start = self.i
        c = self.peek()
        if c in ("^", "$"):
            self.i += 1
            atom = _Anchor(c, start)
        elif c == "(":
            atom = self.group()
        elif c == "[":
            atom = self.char_class()
        elif c == ".":
            self.i += 1
            atom = ir.charset(LINE_TERMINATORS, negate=True)
        elif c == "\\":
            atom = self.atom_escape()
        elif c in ("*", "+", "?"):
            raise self.error(f"nothing to repeat before {c!r}")
        elif c == "{" and self.quantifier_ahead():
            raise self.error("nothing to repeat before '{'")
        else:
            self.i += 1
            atom = ir.lit(c)
        return self.quantified(atom, start)

    def quantifier_ahead(self) -> bool:
        save = self.i
        try:
            return self.braces() is not None
        finally:
            self.i = save

    def braces(self):
        """Parse ``{n}``, ``{n,}``, ``{n,m}`` at self.i; None if not a quantifier."""
        p, j = self.p, self.i + 1
        k = j
        while k < len(p) and p[k].isdigit() and p[k].isascii():
            k += 1
        if k == j:
            return None
        lo = int(p[j:k])
        hi: int | None = lo
        if k < len(p) and p[k] == ",":
            m = k + 1
            while m < len(p) and p[m].isdigit() and p[m].isascii():
                m += 1
            hi = int(p[k + 1:m]) if m > k + 1 else None
            k = m
        if k >= len(p) or p[k] != "}":
            return None
        self.i = k + 1
        return lo, hi

    def quantified(self, atom, start: int):
        quantified = False
        while True:
            c = self.peek()
            q_start = self.i
            if c == "*":
                self.i += 1
                lo, hi = 0, None
            elif c == "+":
                self.i += 1
                lo, hi = 1, None
            elif c == "?":
                self.i += 1
                lo, hi = 0, 1
            elif c == "{" and self.quantifier_ahead():
                lo, hi = self.braces()
            else:
                return atom
            if quantified:
                raise self.error("a quantifier cannot follow another quantifier (possessive or doubled)", q_start)
            if isinstance(atom, (_Anchor, _Look)):
                raise self.error("an assertion cannot be quantified", start)
            if hi is not None and hi < lo:
                raise self.error(f"numbers out of order in {{{lo},{hi}}} quantifier", q_start)
            if max(lo, hi or 0) > MAX_REPEAT:
                raise self.error(f"repetition count above {MAX_REPEAT}", q_start)
            if self.peek() == "?":  # lazy: same language
                self.i += 1
            atom = _Quant(atom, lo, hi)
            quantified = True

    def group(self):
        start = self.i
        if self.depth >= MAX_GROUP_DEPTH:
            raise self.error(f"groups nest deeper than {MAX_GROUP_DEPTH} levels", start)
        self.depth += 1
        try:
            return self._group(start)
        finally:
            self.depth -= 1

    def _group(self, start: int):
        self.i += 1
        if self.peek() == "?":
            k = self.peek(1)
            if k == ":":
                self.i += 2
            elif k in ("=", "!"):
                self.i += 2
                body = self.disjunction()
                self.expect_close(start)
                return _Look(k == "!", body, start)
            elif k == "<" and self.peek(2) in ("=", "!"):
                raise self.error("lookbehind is not supported", start)
            elif k == "<":
                end = self.p.find(">", self.i)
                name = self.p[self.i + 2:end] if end > 0 else ""
                if end < 0 or not name or not all(ch.isalnum() or ch in "_$" for ch in name):
                    raise self.error("malformed group name", start)
                self.i = end + 1
            elif k == "P" and self.peek(2) == "<":  # Python-style named group
                end = self.p.find(">", self.i)
                if end < 0:
                    raise self.error("malformed group name", start)
                self.i = end + 1
            else:
                raise self.error(f"unsupported group syntax '(?{k or ''}' (inline flags are not ECMAScript)", start)
        body = self.disjunction()
        self.expect_close(start)
        return body

    def expect_close(self, start: int) -> None:
        if self.peek() != ")":
            raise self.error("missing ')'", start)
        self.i += 1

    def atom_escape(self):
        start = self.i
        self.i += 1
        c = self.peek()
        if c is None:
            raise self.error("pattern ends with a lone backslash", start)
        if c in ("b", "B"):
            raise self.error(f"word boundary '\\{c}' is not supported", start)
        if c.isdigit() and c != "0":
            raise self.error("backreferences are not supported", start)
        if c == "k" and self.peek(1) == "<":
            raise self.error("named backreferences are not supported", start)
        if c in CLASS_ESCAPES:
            self.i += 1
            ranges, neg = CLASS_ESCAPES[c]
            return ir.charset(ranges, negate=neg)
        return ir.lit(chr(self.char_escape(start)))

    def char_escape(self, start: int) -> int:
        """Parse the escape after a backslash (self.i at the letter); return the code point."""
        c = self.peek()
        if c in ("p", "P"):
            raise self.error(f"Unicode property escape '\\{c}' is not supported", start)
        if c == "0" and self.peek(1) is not None and self.peek(1).isdigit():
            raise self.error("octal escapes are not supported", start)
        if c in CONTROL_ESCAPES:
            self.i += 1
            return CONTROL_ESCAPES[c]
        if c == "x":
            return self.hex_digits(2, start)
        if c == "u":
            if self.peek(1) == "{":
                end = self.p.find("}", self.i)
                digits = self.p[self.i + 2:end] if end > 0 else ""
                if not digits or not all(ch in "0123456789abcdefABCDEF" for ch in digits) or int(digits, 16) > ir.MAX_UNICODE:
                    raise self.error("malformed \\u{...} escape", start)
                self.i = end + 1
                return int(digits, 16)
            cp = self.hex_digits(4, start)
            # A surrogate pair written as two \\u escapes is one character.
            if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i):
                save = self.i
                self.i += 1
                low = self.hex_digits(4, start)
                if 0xDC00 <= low <= 0xDFFF:
                    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                self.i = save
            if 0xD800 <= cp <= 0xDFFF:
                raise self.error("lone surrogate escapes cannot match UTF-8 text", start)
            return cp
        if c == "c":
            letter = self.peek(1)
            if letter is None or not ("a" <= letter.lower() <= "z"):
                raise self.error("malformed \\c escape", start)
            self.i += 2
            return ord(letter) % 32
        self.i += 1
        if c.isalnum():
            raise self.error(f"unknown escape '\\{c}'", start)
        return ord(c)  # identity escape of a syntax or other non-word character

    def hex_digits(self, n: int, start: int) -> int:
        digits = self.p[self.i + 1:self.i + 1 + n]
        if len(digits) != n or not all(ch in "0123456789abcdefABCDEF" for ch in digits):
            raise self.error(f"malformed \\{self.p[self.i]} escape (expected {n} hex digits)", start)
        self.i += 1 + n
        return int(digits, 16)

    def char_class(self) -> ir.Node:
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.error("missing ']'", start)
            if c == "]" and not first:
                self.i += 1
                break
            if c == "]":  # ECMAScript: [] matches nothing, [^] anything
                self.i += 1
                return ir.charset([], negate=negate) if negate else ir.NOTHING
            first = False
            lo = self.class_atom(ranges)
            if lo is None:
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", None):
                dash = self.i
                self.i += 1
                hi = self.class_atom(ranges)
                if hi is None:  # [\d-x]: the dash is literal (Annex B)
                    ranges.append((lo, lo))
                    ranges.append((0x2D, 0x2D))
                    continue
                if hi < lo:
                    raise self.error("range out of order in character class", dash)
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        return ir.charset(ranges, negate=negate)

    def class_atom(self, ranges: list) -> int | None:
        """One class atom; returns its code point, or None after adding a class escape."""
        c = self.peek()
        if c != "\\":
            self.i += 1
            return ord(c)
        start = self.i
        self.i += 1
        e = self.peek()
        if e is None:
            raise self.error("pattern ends with a lone backslash", start)
        if e in CLASS_ESCAPES:
            self.i += 1
            cls, neg = CLASS_ESCAPES[e]
            ranges.extend(ir.complement_ranges(cls, ir.MAX_UNICODE) if neg else cls)
            return None
        if e == "b":
            self.i += 1
            return 0x08
        if e == "-":
            self.i += 1
            return 0x2D
        return self.char_escape(start)


class _Lowerer:
    """Parse tree -> IR, resolving anchors and top-level lookaheads."""

    def __init__(self, pattern: str, search: bool):
        self.pattern = pattern
        self.search = search

    def error(self, msg: str, offset: int) -> RegexError:
        return RegexError(msg, pattern=self.pattern, offset=offset)

    def lower_top(self, tree: _Group) -> ir.Node:
        return ir.alt(*(self.lower_alternative(terms) for terms in tree.alts))

    def lower_alternative(self, terms: list) -> ir.Node:
        terms = self.flatten_spanning_groups(terms)
        anchored_start = bool(terms) and isinstance(terms[0], _Anchor) and terms[0].kind == "^"
        if anchored_start:
            terms = terms[1:]
        anchored_end = bool(terms) and isinstance(terms[-1], _Anchor) and terms[-1].kind == "$"
        if anchored_end:
            terms = terms[:-1]
        free = ir.star(ir.ANY_CHAR) if self.search else ir.EMPTY
        body = self.lower_terms(terms, ir.EMPTY if anchored_end else free, anchored_start or not self.search)
        return ir.seq(ir.EMPTY if anchored_start else free, body)

    def lower_terms(self, terms: list, rest: ir.Node, at_start: bool) -> ir.Node:
        """``terms`` followed by ``rest`` (the language of what comes after them, up to the end
        of the input); ``at_start``: the terms begin where the input does. Lowered right to
        left, so a lookahead constrains everything after it: ``(?=A)B`` is ``A.* & B``."""
        pending: list[ir.Node] = []  # lowered terms after the last lookahead, in reverse; one seq for a run
        for i in reversed(range(len(terms))):
            t = terms[i]
            if isinstance(t, _Look):
                if pending:
                    rest, pending = ir.seq(*reversed(pending), rest), []
                look = self.lower_look(t, at_start and all(isinstance(x, _Look) for x in terms[:i]))
                rest = ir.diff(rest, look) if t.negative else ir.intersect(look, rest)
            else:
                pending.append(self.lower(t))
        return ir.seq(*reversed(pending), rest)

    def lower_look(self, look: _Look, at_start: bool) -> ir.Node:
        """What a lookahead asserts about the rest of the input: one of its body's alternatives,
        then anything, or nothing more where the alternative ends with ``$`` (the end of the
        input, in either mode). A leading ``^`` holds only where the lookahead stands at the
        start of the input (``at_start``); elsewhere it is refused."""
        alts = []
        for terms in look.body.alts:
            terms = self.flatten_spanning_groups(terms)
            if terms and isinstance(terms[0], _Anchor) and terms[0].kind == "^":
                if not at_start:
                    raise self.error("'^' inside a lookahead is only supported where the lookahead stands at the "
                                     "start of the input", terms[0].offset)
                terms = terms[1:]
            anchored_end = bool(terms) and isinstance(terms[-1], _Anchor) and terms[-1].kind == "$"
            if anchored_end:
                terms = terms[:-1]
            alts.append(self.lower_terms(terms, ir.EMPTY if anchored_end else ir.star(ir.ANY_CHAR), at_start))
        return ir.alt(*alts)

    def flatten_spanning_groups(self, terms: list) -> list:
        """``(^a$)`` or ``^(a)$``-style groups spanning a whole alternative are
        inlined when they have a single alternative, so their anchors count."""
        while len(terms) == 1 and isinstance(terms[0], _Group) and len(terms[0].alts) == 1:
            terms = terms[0].alts[0]
        out = []
        for i, t in enumerate(terms):
            edge = i == 0 or i == len(terms) - 1
            if edge and isinstance(t, _Group) and len(t.alts) == 1 and any(isinstance(x, _Anchor) for x in t.alts[0]):
                out.extend(t.alts[0])
            else:
                out.append(t)
        return out

    def lower(self, t) -> ir.Node:
        if isinstance(t, ir.Node):
            return t
        if isinstance(t, _Group):
            return ir.alt(*(self.lower_seq(terms) for terms in t.alts))
        if isinstance(t, _Quant):
            return ir.repeat(self.lower(t.item), t.lo, t.hi)
        if isinstance(t, _Anchor):
            raise self.error(f"anchor {t.kind!r} is only supported at the start/end of the pattern", t.offset)
        if isinstance(t, _Look):
            raise self.error("lookahead is only supported directly in the top-level sequence", t.offset)
        raise TypeError(t)

    def lower_seq(self, terms: list) -> ir.Node:
        return ir.seq(*(self.lower(x) for x in terms))
