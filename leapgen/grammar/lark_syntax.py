"""The syntax of Lark grammars -> a small syntax tree (no meaning yet).

The grammar of grammars is Lark's own (``lark/load_grammar.py``: its
``TERMINALS`` and ``RULES``), parsed here by recursive descent:

- one definition or statement per line; a line that starts with ``|``
  continues the alternatives above; ``//`` and ``#`` comments; a backslash
  before a newline joins lines;
- ``rule: ...`` with the modifiers ``?`` ``!`` ``_`` and a priority
  ``rule.2: ...``; ``TERMINAL: ...`` and ``TERMINAL.2: ...``;
- alternatives ``|`` with aliases ``-> name``; ``( ... )``, ``[ ... ]``;
  ``x?`` ``x*`` ``x+`` ``x ~ 3`` ``x ~ 2..5``; ``"literal"i``, ``/regex/flags``,
  ``"a".."z"``;
- ``%ignore``, ``%import a.b.NAME [-> ALIAS]``, ``%import a.b (N1, N2)``,
  ``%override``, ``%extend``, ``%declare`` (the last refused when lowered).

Positions are kept as ``line L:C`` strings for errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from leapgen.errors import GrammarError

_TOKEN = re.compile(r"""
  (?P<STRING>"(?:\\"|\\\\|[^"\n])*?"i?)
| (?P<REGEXP>/(?!/)(?:\\/|\\\\|[^/])*?/[imslux]*)
| (?P<ARROW>->)
| (?P<DOTDOT>\.\.)
| (?P<STATEMENT>%(?:ignore|import|declare|override|extend)\b)
| (?P<MODIFIERS>(?:!|![?]?|[?]!?)(?=[_a-z]))
| (?P<OP>[+*]|[?](?![a-z_]))
| (?P<RULE>_?[a-z][_a-z0-9]*)
| (?P<TERMINAL>_?[A-Z][_A-Z0-9]*)
| (?P<NUMBER>[+-]?\d+)
| (?P<PUNCT>[.:,|()\[\]{}~])
""", re.VERBOSE)


@dataclass
class Ref:
    name: str
    where: str


@dataclass
class Literal:
    kind: str  # "STRING" or "REGEXP": the token as written, quotes/slashes and flags included
    text: str
    where: str


@dataclass
class Range:
    start: str  # the STRING tokens as written
    end: str
    where: str


@dataclass
class Expr:
    atom: object  # Ref, Literal, Range, Expansions, or ("maybe", Expansions)
    op: object  # None, "?", "*", "+", or (lo, hi)
    where: str


@dataclass
class Alternative:
    items: list  # of Expr
    alias: str | None
    where: str


@dataclass
class Expansions:
    alternatives: list  # of Alternative
    where: str


@dataclass
class Definition:
    name: str
    is_term: bool
    body: Expansions
    where: str
    modifiers: str = ""
    priority: int | None = None


@dataclass
class Statement:
    kind: str  # "ignore", "import", "declare", "override", "extend"
    where: str
    body: Expansions | None = None
    definition: Definition | None = None
    path: tuple = ()  # import: dotted module path
    relative: bool = False
    aliases: dict = field(default_factory=dict)  # import: name in the module -> local name


@dataclass
class Tok:
    kind: str
    text: str
    pos: int


def line_column(text: str, pos: int) -> str:
    """``"line L:C"`` (1-based) of offset ``pos`` in ``text``."""
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}:{col}"


class _Lexer:
    def __init__(self, text: str):
        self.s = text

    def where(self, pos: int) -> str:
        return line_column(self.s, pos)

    def tokens(self) -> list[Tok]:
        s, i, out = self.s, 0, []
        while i < len(s):
            c = s[i]
            if c in " \t":
                i += 1
            elif c == "\\" and re.match(r"\\[ ]*\r?\n", s[i:i + 64]):
                i = s.index("\n", i) + 1
            elif s.startswith("//", i) or c == "#":
                j = s.find("\n", i)
                i = len(s) if j < 0 else j
            elif c in "\r\n":
                start = i
                while i < len(s):  # newlines, blank space and comment lines fold into one separator
                    if s[i] in " \t\r\n\f\v":
                        i += 1
                    elif s.startswith("//", i) or s[i] == "#":
                        j = s.find("\n", i)
                        i = len(s) if j < 0 else j
                    else:
                        break
                if i < len(s) and s[i] == "|":
                    out.append(Tok("|", "|", i))  # a line starting with | continues the alternatives
                    i += 1
                elif not out or out[-1].kind != "NL":
                    out.append(Tok("NL", "\n", start))
            else:
                m = _TOKEN.match(s, i)
                if m is None:
                    raise GrammarError(f"unexpected character {c!r} in the Lark grammar", where=self.where(i))
                kind = m.lastgroup
                text = m.group()
                out.append(Tok(text if kind == "PUNCT" else kind, text, i))
                i = m.end()
        out.append(Tok("NL", "\n", len(s)))
        out.append(Tok("EOF", "", len(s)))
        return out


class LarkSyntaxParser:
    """Parse Lark grammar text into definitions and statements.

    Raises
    ------
    GrammarError
        With ``line L:C`` and what was expected.
    """

    def __init__(self, text: str):
        self.lexer = _Lexer(text)
        self.toks = self.lexer.tokens()
        self.k = 0

    # -- helpers ---------------------------------------------------------------------------------

    def where(self, tok: Tok | None = None) -> str:
        return self.lexer.where((tok or self.toks[self.k]).pos)

    def peek(self, ahead: int = 0) -> Tok:
        return self.toks[min(self.k + ahead, len(self.toks) - 1)]

    def take(self, kind: str | None = None, what: str | None = None) -> Tok:
        tok = self.peek()
        if kind is not None and tok.kind != kind:
            found = "the end of the line" if tok.kind == "NL" else "the end" if tok.kind == "EOF" else repr(tok.text)
            raise GrammarError(f"expected {what or repr(kind)}, found {found}", where=self.where(tok))
        self.k += 1
        return tok

    # -- grammar ---------------------------------------------------------------------------------

    def parse(self) -> list:
        items = []
        while self.peek().kind != "EOF":
            if self.peek().kind == "NL":
                self.k += 1
                continue
            items.append(self.item())
            if self.peek().kind not in ("NL", "EOF"):
                raise GrammarError(f"unexpected {self.peek().text!r} after the definition", where=self.where())
        return items

    def item(self):
        tok = self.peek()
        if tok.kind == "STATEMENT":
            return self.statement()
        if tok.kind in ("MODIFIERS", "RULE", "TERMINAL"):
            return self.definition()
        raise GrammarError(f"expected a rule, a terminal or a %statement, found {tok.text!r}", where=self.where(tok))

    def definition(self) -> Definition:
        start = self.peek()
        modifiers = self.take().text if start.kind == "MODIFIERS" else ""
        name_tok = self.take()
        if name_tok.kind not in ("RULE", "TERMINAL") or (modifiers and name_tok.kind != "RULE"):
            raise GrammarError(f"expected a rule or terminal name, found {name_tok.text!r}", where=self.where(name_tok))
        is_term = name_tok.kind == "TERMINAL"
        if self.peek().kind == "{":
            raise GrammarError(f"templates ({name_tok.text}{{...}}) are not supported", where=self.where())
        priority = None
        if self.peek().kind == ".":
            self.k += 1
            priority = int(self.take("NUMBER", "a priority number").text)
        self.take(":", "':'")
        body = self.expansions()
        return Definition(name_tok.text, is_term, body, self.where(start), modifiers, priority)

    def statement(self) -> Statement:
        tok = self.take()
        kind = tok.text[1:]
        where = self.where(tok)
        if kind == "ignore":
            return Statement("ignore", where, body=self.expansions())
        if kind in ("override", "extend"):
            return Statement(kind, where, definition=self.definition())
        if kind == "declare":
            while self.peek().kind in ("RULE", "TERMINAL"):
                self.k += 1
            return Statement("declare", where)
        relative = self.peek().kind == "."
        if relative:
            self.k += 1
        path = [self.take_name()]
        while self.peek().kind == ".":
            self.k += 1
            path.append(self.take_name())
        if self.peek().kind == "(":
            self.k += 1
            names = [self.take_name()]
            while self.peek().kind == ",":
                self.k += 1
                names.append(self.take_name())
            self.take(")", "')'")
            return Statement("import", where, path=tuple(path), relative=relative, aliases={n: n for n in names})
        if len(path) < 2:
            raise GrammarError(f"nothing imported from grammar {path[0]!r}", where=where)
        name = path.pop()
        alias = name
        if self.peek().kind == "ARROW":
            self.k += 1
            alias = self.take_name()
        return Statement("import", where, path=tuple(path), relative=relative, aliases={name: alias})

    def take_name(self) -> str:
        tok = self.peek()
        if tok.kind not in ("RULE", "TERMINAL"):
            raise GrammarError(f"expected a name, found {tok.text!r}", where=self.where(tok))
        self.k += 1
        return tok.text

    def expansions(self) -> Expansions:
        where = self.where()
        alts = [self.alternative()]
        while self.peek().kind == "|":
            self.k += 1
            alts.append(self.alternative())
        return Expansions(alts, where)

    def alternative(self) -> Alternative:
        where = self.where()
        items = []
        while self.peek().kind in ("(", "[", "STRING", "REGEXP", "RULE", "TERMINAL"):
            items.append(self.expr())
        alias = None
        if self.peek().kind == "ARROW":
            self.k += 1
            alias = self.take("RULE", "an alias name (a rule name)").text
        return Alternative(items, alias, where)

    def expr(self) -> Expr:
        where = self.where()
        atom = self.atom()
        tok = self.peek()
        op = None
        if tok.kind == "OP":
            self.k += 1
            op = tok.text
        elif tok.kind == "~":
            self.k += 1
            lo = int(self.take("NUMBER", "a repetition count").text)
            hi = lo
            if self.peek().kind == "DOTDOT":
                self.k += 1
                hi = int(self.take("NUMBER", "a repetition count").text)
            if lo < 0 or hi < lo:
                raise GrammarError(f"bad range {lo}..{hi} (it must be 0 <= lo <= hi)", where=self.where(tok))
            op = (lo, hi)
        return Expr(atom, op, where)

    def atom(self):
        tok = self.take()
        if tok.kind == "(":
            body = self.expansions()
            self.take(")", "')'")
            return body
        if tok.kind == "[":
            body = self.expansions()
            self.take("]", "']'")
            return ("maybe", body)
        if tok.kind == "STRING":
            if self.peek().kind == "DOTDOT":
                self.k += 1
                end = self.take("STRING", "a one-character string after '..'")
                return Range(tok.text, end.text, self.where(tok))
            return Literal("STRING", tok.text, self.where(tok))
        if tok.kind == "REGEXP":
            return Literal("REGEXP", tok.text, self.where(tok))
        if self.peek().kind == "{":
            raise GrammarError(f"templates ({tok.text}{{...}}) are not supported", where=self.where(tok))
        return Ref(tok.text, self.where(tok))
