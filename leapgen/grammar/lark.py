"""Lark front-end: Lark grammars (what vLLM's ``grammar`` and outlines users
write) -> grammar IR, with the language of Lark's Earley parser.

Semantics
---------
The language is the one ``lark.Lark(text, parser="earley",
lexer="dynamic_complete")`` accepts. Its lexer is *dynamic*: it has no
token stream of its own but tries, at each position, the terminals the
parser expects, and with ``complete_lex`` every prefix of a terminal's match
that the terminal matches again. So:

- a rule is a context-free rule over its terminals, as in GBNF (Earley
  accepts any context-free grammar; leapgen rewrites left recursion, which
  Lark users write for LALR, into repetition: :mod:`leapgen.grammar.left_recursion`);
- a terminal ``T`` is a regular language, but the one Python's ``re`` gives it:
  the strings ``s`` with ``re.match(T, s)`` matching all of ``s`` (first-match
  semantics: lazy quantifiers and alternative order count; see
  :mod:`leapgen.grammar.pyregex`). Lark's own joining of a terminal's parts
  into one regex is reproduced, alternatives sorted longest first as Lark
  sorts them;
- ``%ignore``: Lark's scanner tries each ignored terminal at every position
  where the parser waits for a terminal (and once the start rule is complete),
  takes its single ``re`` match there and resumes after it. So ignored text
  sits between terminals and at both ends, never inside a terminal, and an
  ignored match is always the one ``re`` returns: ``%ignore WS`` with
  ``WS: /[ \\t\\f\\r\\n]/+`` eats a whole run of blanks, so a terminal right
  after ignored blanks cannot start with a blank. leapgen writes, in front of
  every terminal occurrence, the *gap* of ignored matches (a small automaton
  over the ignored terminals, each match followed only by what keeps ``re``
  from extending it), and the terminal minus the strings that would extend the
  gap's last match; the start rule is followed by one more gap. Ignored
  terminals whose ``re`` match depends on more than one character after it
  are refused;
- ``?rule``, ``_rule``, ``!rule``, aliases (``-> name``), rule and terminal
  priorities (``rule.2``, ``TERM.2``) shape Lark's tree or break ties between
  parses; they do not change which strings parse, so they have no effect on a
  mask (Lark's LALR and basic lexers *do* let terminal priorities change the
  language; the Earley dynamic lexer does not);
- ``%import module.NAME [-> ALIAS]`` and ``%import module (A, B)`` load
  ``module.lark`` from ``import_paths``, then from the installed ``lark``
  package's ``grammars/`` folder (``common``, ``unicode``, ``python``,
  ``lark``), mangling the names they depend on as Lark does;
  ``%override`` and ``%extend`` as in Lark.

Refused with a ``GrammarError`` at ``line L:C``: ``%declare`` (a terminal
with no definition cannot be matched), templates, relative imports, terminals
that match the empty string (Lark refuses them too), recursion in terminals,
rules inside terminals, and the regex constructs :mod:`leapgen.grammar.pyregex`
refuses.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re

from leapgen.errors import GrammarError
from leapgen.grammar import ir
from leapgen.grammar.lark_ignore import Gaps
from leapgen.grammar.lark_syntax import Definition, Expansions, LarkSyntaxParser, Literal, Range, Ref, Statement, \
    line_column
from leapgen.grammar.left_recursion import remove_left_recursion
from leapgen.grammar.pyregex import Terminal, _sre_parse, compile_terminal

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: The root rule leapgen adds: the start rule, then the ignored text after its last terminal.
ROOT = "__root"


def parse_lark(text: str, *, start: str = "start", import_paths=()) -> ir.Grammar:
    """Parse a Lark grammar into a grammar of IR rules.

    Parameters
    ----------
    text : str
        The grammar (Lark syntax).
    start : str, default "start"
        The start rule (Lark's ``start`` option).
    import_paths : sequence of str, default ()
        Folders searched for ``%import``-ed ``.lark`` files before the
        installed ``lark`` package's own grammars (Lark's ``import_paths``).

    Returns
    -------
    ir.Grammar
        Root rule ``"__root"``.

    Raises
    ------
    GrammarError
        Syntax errors and unsupported constructs (``where`` is ``line L:C``),
        undefined or duplicate names, a missing start rule.
    """
    if not isinstance(text, str):
        raise GrammarError(f"a Lark grammar must be a str, got {type(text).__name__}")
    if not isinstance(start, str):
        raise GrammarError(f"start must be a str, got {type(start).__name__}")
    lone = _LONE_SURROGATE.search(text)
    if lone is not None:
        raise GrammarError(f"lone surrogate U+{ord(lone.group()):04X} has no UTF-8 form",
                           where=line_column(text, lone.start()))
    builder = _Builder(tuple(import_paths))
    builder.load(text, mangle=None)
    return _Lowering(builder).grammar(start)


# ---------------------------------------------------------------------------
# loading: definitions, imports, ignores (Lark's GrammarBuilder)


def _stdlib_grammars() -> str | None:
    spec = importlib.util.find_spec("lark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], "grammars")


def _mangler(prefix: str, aliases: dict, base=None):
    def mangle(name: str) -> str:
        if name in aliases:
            name = aliases[name]
        elif name[0] == "_":
            name = f"_{prefix}__{name[1:]}"
        else:
            name = f"{prefix}__{name}"
        return base(name) if base is not None else name
    return mangle


def _rename(node, mangle):
    """A copy of a syntax tree with every reference renamed."""
    if isinstance(node, Ref):
        return Ref(mangle(node.name), node.where)
    if isinstance(node, Expansions):
        return Expansions([type(a)([_rename_expr(e, mangle) for e in a.items], a.alias, a.where)
                           for a in node.alternatives], node.where)
    if isinstance(node, tuple):  # ("maybe", Expansions)
        return (node[0], _rename(node[1], mangle))
    return node


def _rename_expr(e, mangle):
    return type(e)(_rename(e.atom, mangle), e.op, e.where)


def _refs(node, out: set) -> set:
    if isinstance(node, Ref):
        out.add(node.name)
    elif isinstance(node, Expansions):
        for a in node.alternatives:
            for e in a.items:
                _refs(e.atom, out)
    elif isinstance(node, tuple):
        _refs(node[1], out)
    return out


class _Builder:
    def __init__(self, import_paths: tuple):
        self.import_paths = import_paths
        self.defs: dict[str, Definition] = {}
        self.ignore: list[tuple[str, str]] = []  # (terminal name, where)

    def define(self, d: Definition, *, override: bool = False) -> None:
        if d.name.startswith("__"):
            raise GrammarError(f"names starting with a double underscore are reserved ({d.name})", where=d.where)
        if d.name in self.defs and not override:
            kind = "terminal" if d.is_term else "rule"
            raise GrammarError(f"{kind} {d.name!r} is defined twice (first at {self.defs[d.name].where})",
                               where=d.where)
        if override and d.name not in self.defs:
            raise GrammarError(f"cannot override {d.name!r}: it is not defined", where=d.where)
        self.defs[d.name] = d

    def load(self, text: str, mangle) -> None:
        items = LarkSyntaxParser(text).parse()
        imports: dict = {}
        for it in items:
            if isinstance(it, Statement) and it.kind == "import":
                if it.relative:
                    raise GrammarError("relative imports (%import .name) are not supported: the grammar is text "
                                       "with no folder; pass import_paths", where=it.where)
                imports.setdefault(it.path, ({}, it.where))[0].update(it.aliases)
        for path, (aliases, where) in imports.items():
            self.do_import(path, aliases, where, mangle)
        for it in items:
            if isinstance(it, Definition):
                self.define(self._mangled(it, mangle))
            elif it.kind == "override":
                self.define(self._mangled(it.definition, mangle), override=True)
            elif it.kind == "extend":
                d = self._mangled(it.definition, mangle)
                base = self.defs.get(d.name)
                if base is None or base.is_term != d.is_term:
                    raise GrammarError(f"cannot extend {d.name!r}: no such {'terminal' if d.is_term else 'rule'}",
                                       where=d.where)
                base.body.alternatives[:0] = d.body.alternatives  # Lark puts the new alternatives first
            elif it.kind == "ignore" and mangle is None:  # an imported grammar's %ignore does not apply
                self.add_ignore(it)
            elif it.kind == "declare":
                raise GrammarError("%declare is not supported: a declared terminal has no definition, so no text "
                                   "can match it (it is for a custom lexer or postlexer)", where=it.where)

    @staticmethod
    def _mangled(d: Definition, mangle) -> Definition:
        if mangle is None:
            return d
        return Definition(mangle(d.name), d.is_term, _rename(d.body, mangle), d.where, d.modifiers, d.priority)

    def add_ignore(self, st: Statement) -> None:
        alts = st.body.alternatives
        single = alts[0].items[0] if len(alts) == 1 and len(alts[0].items) == 1 else None
        if single is not None and single.op is None and isinstance(single.atom, Ref) \
                and single.atom.name.lstrip("_")[:1].isupper():
            self.ignore.append((single.atom.name, st.where))
            return
        name = f"__IGNORE_{len(self.ignore)}"
        self.defs[name] = Definition(name, True, st.body, st.where)
        self.ignore.append((name, st.where))

    def do_import(self, path: tuple, aliases: dict, where: str, base_mangle) -> None:
        file = os.path.join(*path) + ".lark"
        folders = list(self.import_paths)
        stdlib = _stdlib_grammars()
        if stdlib is not None:
            folders.append(stdlib)
        for folder in folders:
            full = os.path.join(folder, file)
            if os.path.isfile(full):
                with open(full, encoding="utf-8") as f:
                    text = f.read()
                break
        else:
            hint = "" if stdlib is not None else " (the lark package, whose grammars/ folder holds common.lark, " \
                                                "is not installed: pip install lark)"
            raise GrammarError(f"cannot find grammar {'.'.join(path)!r} to import{hint}", where=where)
        sub = _Builder(self.import_paths)
        mangle = _mangler("__".join(path), aliases, base_mangle)
        try:
            sub.load(text, mangle)
        except GrammarError as e:
            raise GrammarError(f"in imported grammar {full}: {e}", where=where) from None
        wanted = [mangle(n) for n in aliases]
        for n, a in zip(aliases, wanted):
            if a not in sub.defs:
                raise GrammarError(f"{'.'.join(path)} has no rule or terminal {n!r}", where=where)
        used, todo = set(), list(wanted)
        while todo:
            n = todo.pop()
            if n in used or n not in sub.defs:
                continue
            used.add(n)
            todo.extend(_refs(sub.defs[n].body, set()))
        for n in sorted(used):
            if n in self.defs:
                raise GrammarError(f"cannot import {n!r} from {'.'.join(path)}: already defined", where=where)
            self.defs[n] = sub.defs[n]


# ---------------------------------------------------------------------------
# lowering


def eval_escaping(s: str, where: str) -> str:
    """A literal's text between its delimiters, unescaped as Lark does (``eval_escaping`` in
    ``lark/load_grammar.py``: backslash escapes other than ``\\U \\u \\x \\n \\f \\t \\r`` and
    ``\\\\`` are kept for the regex)."""
    w = ""
    chars = iter(s)
    for n in chars:
        w += n
        if n == "\\":
            n2 = next(chars, None)
            if n2 is None:
                raise GrammarError(f"literal ends inside an escape: {s!r}", where=where)
            if n2 == "\\":
                w += "\\\\"
            elif n2 not in "Uuxnftr":
                w += "\\"
            w += n2
    w = w.replace('\\"', '"').replace("'", "\\'")
    try:
        return ast.literal_eval(f"u'''{w}'''")
    except (SyntaxError, ValueError) as e:
        raise GrammarError(f"bad escape in literal {s!r}: {e}", where=where) from None


class _Pattern:
    """Lark's PatternStr / PatternRE: a terminal's parts joined into one regex as Lark joins them."""

    __slots__ = ("kind", "value", "flags")

    def __init__(self, kind: str, value: str, flags=()):
        self.kind, self.value, self.flags = kind, value, frozenset(flags)

    def to_regexp(self) -> str:
        value = re.escape(self.value) if self.kind == "str" else self.value
        for f in sorted(self.flags):
            value = f"(?{f}:{value})"
        return value

    def widths(self, where: str) -> tuple[int, int]:
        if self.kind == "str":
            return len(self.value), len(self.value)
        try:
            lo, hi = _sre_parse.parse(self.to_regexp()).getwidth()
        except re.error as e:
            raise GrammarError(f"bad regular expression {self.to_regexp()!r}: {e}", where=where) from None
        return int(lo), int(hi)


class _Lowering:
    def __init__(self, builder: _Builder):
        self.defs = builder.defs
        self.ignore = builder.ignore
        self.patterns: dict[str, _Pattern] = {}
        self.terminals: dict[str, Terminal] = {}  # by regex
        self.gaps: Gaps | None = None

    # -- terminals -------------------------------------------------------------------------------

    def literal_pattern(self, lit) -> _Pattern:
        if isinstance(lit, Range):
            a, b = lit.start[1:-1], lit.end[1:-1]
            if lit.start.endswith("i") or lit.end.endswith("i") or \
                    len(eval_escaping(a, lit.where)) != 1 or len(eval_escaping(b, lit.where)) != 1:
                raise GrammarError(f"a range must be between two one-character strings, got {lit.start}..{lit.end}",
                                   where=lit.where)
            return _Pattern("re", f"[{a}-{b}]")
        v = lit.text
        cut = max(v.rfind("/"), v.rfind('"')) + 1
        flags, v = v[cut:], v[:cut]
        if lit.kind == "STRING" and "\n" in v:
            raise GrammarError("string literals cannot hold a newline", where=lit.where)
        if lit.kind == "REGEXP" and "\n" in v and "x" not in flags:
            raise GrammarError("a regular expression can hold a newline only with the x (verbose) flag",
                               where=lit.where)
        s = eval_escaping(v[1:-1], lit.where)
        if s == "":
            raise GrammarError(f"empty terminals are not allowed ({lit.text})", where=lit.where)
        if lit.kind == "STRING":
            return _Pattern("str", s.replace("\\\\", "\\"), flags)
        return _Pattern("re", s, flags)

    def terminal_pattern(self, name: str, stack=()) -> _Pattern:
        got = self.patterns.get(name)
        if got is not None:
            return got
        d = self.defs[name]
        if name in stack:
            raise GrammarError(f"terminal {name!r} refers to itself (recursion is only allowed in rules)",
                               where=d.where)
        if len(d.body.alternatives) == 1 and not d.body.alternatives[0].items:
            raise GrammarError(f"terminal {name!r} is empty", where=d.where)
        pat = self.expansions_pattern(d.body, stack + (name,))
        self.patterns[name] = pat
        return pat

    def expansions_pattern(self, exp: Expansions, stack) -> _Pattern:
        alts = []
        for a in exp.alternatives:
            if a.alias is not None:
                raise GrammarError("aliases (->) are not allowed in terminals", where=a.where)
            items = [self.expr_pattern(e, stack) for e in a.items]
            if not items:
                alts.append(_Pattern("str", ""))
            elif len(items) == 1:
                alts.append(items[0])
            else:
                alts.append(_Pattern("re", "".join(i.to_regexp() for i in items)))
        if len(alts) == 1:
            return alts[0]
        where = exp.where
        keyed = [(-i.widths(where)[1], -i.widths(where)[0], -len(i.value), k) for k, i in enumerate(alts)]
        alts = [alts[k] for *_, k in sorted(keyed)]  # Lark's sort: longest first, stable
        return _Pattern("re", "(?:%s)" % "|".join(i.to_regexp() for i in alts))

    def expr_pattern(self, e, stack) -> _Pattern:
        atom = e.atom
        if isinstance(atom, Ref):
            if atom.name not in self.defs:
                raise GrammarError(f"terminal {atom.name!r} is used but not defined", where=atom.where)
            if not self.defs[atom.name].is_term:
                raise GrammarError(f"rules are not allowed inside terminals ({atom.name})", where=atom.where)
            inner = self.terminal_pattern(atom.name, stack)
        elif isinstance(atom, (Literal, Range)):
            inner = self.literal_pattern(atom)
        elif isinstance(atom, tuple):  # [ ... ]
            return self.op_pattern(self.expansions_pattern(atom[1], stack), "?")
        else:
            inner = self.expansions_pattern(atom, stack)
        return inner if e.op is None else self.op_pattern(inner, e.op)

    @staticmethod
    def op_pattern(inner: _Pattern, op) -> _Pattern:
        if isinstance(op, tuple):
            op = "{%d}" % op[0] if op[0] == op[1] else "{%d,%d}" % op
        return _Pattern("re", f"(?:{inner.to_regexp()}){op}", inner.flags)

    def compiled(self, pat: _Pattern, what: str, where: str) -> Terminal:
        regexp = pat.to_regexp()
        got = self.terminals.get(regexp)
        if got is None:
            got = compile_terminal(regexp, where=where)
            if got.dfa.accepts_empty():
                raise GrammarError(f"{what} can match the empty string (Lark's Earley lexer refuses zero-width "
                                   "terminals)", where=where)
            if not any(got.dfa.accept):
                raise GrammarError(f"{what} can never match", where=where)
            self.terminals[regexp] = got
        return got

    # -- rules -----------------------------------------------------------------------------------

    def grammar(self, start: str) -> ir.Grammar:
        if start not in self.defs or self.defs[start].is_term:
            raise GrammarError(f"the grammar has no start rule {start!r}")
        ignored = []
        for name, where in self.ignore:
            if name not in self.defs or not self.defs[name].is_term:
                raise GrammarError(f"%ignore names {name!r}, which is not a defined terminal", where=where)
            ignored.append(self.compiled(self.terminal_pattern(name), f"ignored terminal {name!r}", where))
        self.gaps = Gaps(ignored)
        rules: dict[str, ir.Node] = {}
        todo, seen = [start], {start}
        while todo:
            name = todo.pop()
            d = self.defs[name]
            if d.modifiers.count("?") and name.startswith("_"):
                raise GrammarError("inlined rules (_rule) cannot use the ?rule modifier", where=d.where)
            refs: list[str] = []
            rules[name] = self.lower(d.body, refs)
            for r in refs:
                if r not in seen:
                    seen.add(r)
                    todo.append(r)
        rules[ROOT] = ir.seq(ir.RuleRef(start), self.gaps.trailing())
        return ir.Grammar(remove_left_recursion(rules), ROOT)

    def lower(self, exp: Expansions, refs: list) -> ir.Node:
        return ir.alt(*(ir.seq(*(self.lower_expr(e, refs) for e in a.items)) for a in exp.alternatives))

    def lower_expr(self, e, refs: list) -> ir.Node:
        atom = e.atom
        if isinstance(atom, Ref):
            d = self.defs.get(atom.name)
            if d is None:
                kind = "terminal" if atom.name.lstrip("_")[:1].isupper() else "rule"
                raise GrammarError(f"{kind} {atom.name!r} is used but not defined", where=atom.where)
            if d.is_term:
                node = self.terminal_node(self.terminal_pattern(atom.name), f"terminal {atom.name!r}", d.where)
            else:
                refs.append(atom.name)
                node = ir.RuleRef(atom.name)
        elif isinstance(atom, (Literal, Range)):
            node = self.terminal_node(self.literal_pattern(atom), f"literal {getattr(atom, 'text', '')}",
                                      atom.where)
        elif isinstance(atom, tuple):
            return ir.opt(self.lower(atom[1], refs))
        else:
            node = self.lower(atom, refs)
        op = e.op
        if op is None:
            return node
        if op == "?":
            return ir.opt(node)
        if op == "*":
            return ir.star(node)
        if op == "+":
            return ir.plus(node)
        return ir.repeat(node, op[0], op[1])

    def terminal_node(self, pat: _Pattern, what: str, where: str) -> ir.Node:
        """One occurrence of a terminal in a rule: the ignored text before it, then it."""
        return self.gaps.before(self.compiled(pat, what, where))
