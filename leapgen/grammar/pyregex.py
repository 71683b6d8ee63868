"""Python ``re`` patterns, the dialect of Lark terminals -> grammar IR, with
the language a first-match engine gives them.

Lark hands each terminal to Python's ``re``, and ``re`` is a backtracking
engine: at a position it returns the *first* match in priority order (the
earlier alternative, the greedy or lazy count), not every string the pattern
could match. Lark's Earley parser with the dynamic lexer and
``complete_lex=True`` (``lexer="dynamic_complete"``) then tries every prefix of
that match that ``re`` matches again on its own. So the strings a terminal
``T`` can be at a position are the prefixes of the text that are in

    F(T) = {s : re.match(T, s) matches all of s}

(exactly so for patterns with no assertion that looks past the match, which is
why lookahead, ``$``, ``\\b`` and ``\\Z`` are refused). ``F(T)`` is smaller
than the pattern's textbook language when order matters: ``a|ab`` is ``{a}``,
``".*?"`` stops at the first quote, ``a*(ab)?`` never ends in ``ab``.

How it is computed: the pattern is parsed by Python's own parser
(``re._parser``, so syntax, escapes and flags are Python's), built into a
Thompson NFA whose epsilon edges are ordered by priority, and determinized by
the ordered subset construction of leftmost-first matching (RE2's, Cox 2009,
"Regular Expression Matching: the Virtual Machine Approach"): a DFA state is
the priority-ordered list of threads, and the threads after one that reached
the end are dropped, since a higher-priority match overrides them. The same
NFA determinized without order gives the textbook language; when the two
agree (almost always) the IR is written from the pattern's structure,
otherwise from the minimal first-match DFA by state elimination.

Character classes follow ``re`` exactly: ``\\d``, ``\\w``, ``\\s`` and the ``i``
flag's case folding are Unicode-aware unless the ``a`` flag is set; classes
with a category or under ``i`` are computed by ``re`` itself over every code
point (once per class). Lookbehind of a single character is kept (common
Lark terminals use ``(?<!\\\\)``) when it is not at the pattern's start.
Refused, with the construct named: lookahead, anchors, word boundaries,
backreferences, conditionals, possessive quantifiers and atomic groups, the
``L`` flag, and lookbehind of more than one character.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from leapgen.errors import GrammarError
from leapgen.grammar import ir
from leapgen.grammar.char_dfa import CharDfa, equivalent, minimize, to_ir

try:  # Python >= 3.11
    from re import _constants as _C
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _C  # noqa: N812
    import sre_parse as _sre_parse

MAX_NFA_STATES = 20_000
MAX_DFA_STATES = 5_000

_MATCH = -1  # the end marker in a thread list
_I, _S, _A, _L = re.IGNORECASE, re.DOTALL, re.ASCII, re.LOCALE
_REFUSED = {
    "AT": "anchors and word boundaries (^ $ \\A \\Z \\b \\B)",
    "GROUPREF": "backreferences",
    "GROUPREF_EXISTS": "conditional groups (?(id)...)",
    "POSSESSIVE_REPEAT": "possessive quantifiers",
    "ATOMIC_GROUP": "atomic groups (?>...)",
}


@dataclass(frozen=True)
class Terminal:
    """A terminal's language and what Lark's ignore handling needs of it.

    Attributes
    ----------
    node : ir.Node
        ``F(T)``, the strings the terminal can be (see the module docstring).
    dfa : CharDfa
        Its minimal DFA over code points; each accepting state is coloured by
        its *exit set* (see :attr:`CharDfa.exit`).
    """

    node: ir.Node
    dfa: CharDfa


def compile_terminal(pattern: str, *, where: str) -> Terminal:
    """Compile a Python regex as Lark matches a terminal.

    Parameters
    ----------
    pattern : str
        Python ``re`` syntax (what Lark joins a terminal's parts into).
    where : str
        Where the terminal is defined (``"line L:C"``), for errors.

    Returns
    -------
    Terminal

    Raises
    ------
    GrammarError
        A syntax error or an unsupported construct, naming it.
    """
    tree = _parse(pattern, where)
    nfa = _Nfa(pattern, where)
    nfa.root = nfa.build(tree.data, tree.state.flags, nfa.add(("match",)))
    first = _determinize(nfa, ordered=True)
    plain = _determinize(nfa, ordered=False)
    dfa = minimize(first)
    if not nfa.looks and equivalent(first, plain):
        node = _Structural(pattern, where).lower(tree.data, tree.state.flags)
    else:
        node = to_ir(dfa)
    return Terminal(node, dfa)


@functools.lru_cache(maxsize=1024)
def _parse(pattern: str, where: str):
    try:
        return _sre_parse.parse(pattern, 0)
    except re.error as e:
        raise GrammarError(f"bad regular expression {pattern!r}: {e.msg} at offset {e.pos}", where=where) from None
    except (OverflowError, RecursionError):
        raise GrammarError(f"regular expression {pattern!r} is too large or nests too deeply", where=where) from None


# ---------------------------------------------------------------------------
# character sets, computed as re computes them


@functools.lru_cache(maxsize=1)
def _all_chars() -> str:
    """Every code point but the surrogates, in order (for running ``re`` over all of them)."""
    return "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, ir.MAX_UNICODE + 1)))


def _code_point(index: int) -> int:
    return index if index < 0xD800 else index + 0x800


_CATEGORY_ESCAPES = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
                     "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}


def _esc(cp: int) -> str:
    return f"\\U{cp:08x}"


@functools.lru_cache(maxsize=1)
def _cased() -> str:
    """Every code point the ``i`` flag can relate to another one, in order: those whose simple
    lowercase differs from them, those lowercase forms, and ``re``'s extra equivalences
    (``re._casefix``). A character outside matches a class under ``i`` exactly when it does
    without it: ``re`` compares lowercase forms, and its lowercase form is itself and no other
    character's."""
    import numpy as np

    text = _all_chars()
    cut = text.index("\u0130")  # the one character whose full lowercase is two: its simple one is "i"
    lower = text[:cut].lower() + "i" + text[cut + 1:].lower()
    if len(lower) != len(text):  # pragma: no cover - a Unicode version with other expansions
        return text
    a = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    b = np.frombuffer(lower.encode("utf-32-le"), np.uint32)
    points = set(a[a != b].tolist()) | set(b[a != b].tolist())
    try:
        from re import _casefix

        for k, vs in _casefix._EXTRA_CASES.items():
            points.add(k)
            points.update(vs)
    except ImportError:  # pragma: no cover - Python 3.10: fall back to every code point
        return text
    return "".join(map(chr, sorted(points)))


def _matching(item_pattern: str, flags: int, universe: str) -> list[tuple[int, int]]:
    """The code points of ``universe`` (a string of code points in order) that ``item_pattern``
    (one character) matches under ``flags``, as ranges."""
    if universe is _all_chars():
        out = []
        for m in re.finditer(f"(?:{item_pattern})+", universe, flags):  # a run of matches is a range
            lo, hi = _code_point(m.start()), _code_point(m.end() - 1)
            out += [(lo, 0xD7FF), (0xE000, hi)] if lo <= 0xD7FF < hi else [(lo, hi)]
        return out
    return [(ord(m.group()), ord(m.group())) for m in re.finditer(item_pattern, universe, flags)]


@functools.lru_cache(maxsize=4096)
def _ranges_by_re(item_pattern: str, flags: int, plain: tuple | None = None) -> tuple[tuple[int, int], ...]:
    """The code points ``item_pattern`` (one character) matches under ``flags``: every code point
    is tried by ``re`` (the maximal runs of ``(?:item)+`` over all code points in order are the
    ranges), or, under ``i`` with the ranges ``plain`` it matches without ``i`` known, only the
    cased ones (see :func:`_cased`)."""
    if plain is None:
        return ir.normalize_ranges(_matching(item_pattern, flags, _all_chars()), ir.MAX_UNICODE)
    cased = _cased()
    if len(cased) > 0x10000:
        return ir.normalize_ranges(_matching(item_pattern, flags, cased), ir.MAX_UNICODE)
    cased_ranges = [(ord(c), ord(c)) for c in cased]
    outside = ir.complement_ranges(cased_ranges, ir.MAX_UNICODE)
    keep = [(max(a, x), min(b, y)) for a, b in plain for x, y in outside if max(a, x) <= min(b, y)]
    return ir.normalize_ranges(keep + _matching(item_pattern, flags, cased), ir.MAX_UNICODE)


def char_ranges(op, av, flags: int, where: str) -> tuple[tuple[int, int], ...]:
    """The code points one ``re`` character item (LITERAL, NOT_LITERAL, ANY, IN) matches under
    ``flags`` (IGNORECASE, DOTALL, ASCII)."""
    name = str(op)
    if name == "ANY":
        return ((0, ir.MAX_UNICODE),) if flags & _S else ir.complement_ranges(((10, 10),), ir.MAX_UNICODE)
    if name in ("LITERAL", "NOT_LITERAL"):
        ranges = ((av, av),)
        plain = ir.complement_ranges(ranges, ir.MAX_UNICODE) if name == "NOT_LITERAL" else ranges
        if not flags & _I:
            return plain
        text = ("[^%s]" if name == "NOT_LITERAL" else "%s") % _esc(av)
        return _ranges_by_re(text, flags & (_I | _A), plain)
    if name != "IN":
        raise GrammarError(f"unexpected regex item {name}", where=where)
    negate = bool(av) and str(av[0][0]) == "NEGATE"
    items = av[1:] if negate else av
    parts, ranges = [], []
    for o, a in items:
        kind = str(o)
        if kind == "LITERAL":
            parts.append(_esc(a))
            ranges.append((a, a))
        elif kind == "RANGE":
            parts.append(f"{_esc(a[0])}-{_esc(a[1])}")
            ranges.append(a)
        elif kind == "CATEGORY" and str(a) in _CATEGORY_ESCAPES:
            parts.append(_CATEGORY_ESCAPES[str(a)])
            ranges.extend(_ranges_by_re(_CATEGORY_ESCAPES[str(a)], flags & _A))
        else:
            raise GrammarError(f"unsupported character class item {kind} {a}", where=where)
    plain = ir.complement_ranges(ranges, ir.MAX_UNICODE) if negate else ir.normalize_ranges(ranges, ir.MAX_UNICODE)
    if not flags & _I:
        return plain
    return _ranges_by_re("[%s%s]" % ("^" if negate else "", "".join(parts)), flags & (_I | _A), plain)


def _check_flags(flags: int, where: str) -> None:
    if flags & _L:
        raise GrammarError("the L (locale) regex flag is not supported", where=where)


# ---------------------------------------------------------------------------
# the ordered NFA


class _Nfa:
    """Thompson NFA built back to front: a state is ``("char", ranges, next)``,
    ``("eps", (targets in priority order))``, ``("look", ranges, negate, next)``
    (the last character read is, or is not, in ``ranges``) or ``("match",)``."""

    def __init__(self, pattern: str, where: str):
        self.pattern = pattern
        self.where = where
        self.states: list[tuple] = []
        self.looks: list[tuple] = []  # the look states' character ranges
        self.root = -1

    def add(self, state: tuple) -> int:
        if len(self.states) >= MAX_NFA_STATES:
            raise GrammarError(f"regular expression {self.pattern!r} is too large (over {MAX_NFA_STATES} NFA states)",
                               where=self.where)
        self.states.append(state)
        return len(self.states) - 1

    def refuse(self, what: str) -> GrammarError:
        return GrammarError(f"regular expression {self.pattern!r} uses {what}, which is not supported in a "
                            "terminal", where=self.where)

    def build(self, items, flags: int, nxt: int) -> int:
        """The start state of ``items`` (a list of (op, av)) followed by state ``nxt``."""
        _check_flags(flags, self.where)
        for op, av in reversed(list(items)):
            nxt = self.item(op, av, flags, nxt)
        return nxt

    def item(self, op, av, flags: int, nxt: int) -> int:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
            return self.add(("char", char_ranges(op, av, flags, self.where), nxt))
        if name == "BRANCH":
            return self.add(("eps", tuple(self.build(alt, flags, nxt) for alt in av[1])))
        if name == "SUBPATTERN":
            _group, add_flags, del_flags, body = av
            return self.build(body, (flags | add_flags) & ~del_flags, nxt)
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            lo, hi, body = av
            greedy = name == "MAX_REPEAT"
            if hi == _C.MAXREPEAT:
                loop = self.add(("eps", ()))
                inner = self.build(body, flags, loop)
                self.states[loop] = ("eps", (inner, nxt) if greedy else (nxt, inner))
                cur = loop
            else:
                cur = nxt
                for _ in range(hi - lo):
                    inner = self.build(body, flags, cur)
                    cur = self.add(("eps", (inner, nxt) if greedy else (nxt, inner)))
            for _ in range(lo):
                cur = self.build(body, flags, cur)
            return cur
        if name in ("ASSERT", "ASSERT_NOT"):
            direction, body = av
            if direction == 1:
                raise self.refuse("lookahead (?=...) / (?!...)")
            if len(body) != 1 or str(body[0][0]) not in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
                raise self.refuse("a lookbehind longer than one character")
            ranges = char_ranges(body[0][0], body[0][1], flags, self.where)
            self.looks.append(ranges)
            return self.add(("look", ranges, name == "ASSERT_NOT", nxt))
        raise self.refuse(_REFUSED.get(name, name))

    def closure(self, starts, last: int | None, seen: set, out: list) -> None:
        """Append to ``out`` the char and match states reachable from ``starts`` by epsilon
        moves, in priority order (depth first, each state once: a Pike VM's thread order)."""
        stack = list(reversed(starts))
        states = self.states
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            st = states[s]
            kind = st[0]
            if kind == "eps":
                stack.extend(reversed(st[1]))
            elif kind == "look":
                if last is None:
                    raise self.refuse("a lookbehind at the start of the terminal (it would read the text before it)")
                inside = any(lo <= last <= hi for lo, hi in st[1])
                if inside != st[2]:
                    stack.append(st[3])
            else:
                out.append(_MATCH if kind == "match" else s)


def _boundaries(ranges_list) -> list[int]:
    points = set()
    for ranges in ranges_list:
        for lo, hi in ranges:
            points.add(lo)
            points.add(hi + 1)
    return sorted(points)


def _determinize(nfa: _Nfa, *, ordered: bool) -> CharDfa:
    """Subset construction over code-point intervals. ``ordered``: first-match semantics (threads
    kept in priority order, those after a match dropped); else the pattern's textbook language."""
    states = nfa.states
    look_ranges = nfa.looks

    def key_of(threads: list) -> tuple:
        if ordered:
            if _MATCH in threads:
                threads = threads[:threads.index(_MATCH) + 1]
            return tuple(threads)
        return tuple(sorted(set(threads)))

    start: list = []
    nfa.closure([nfa.root], None, set(), start)
    keys = {key_of(start): 0}
    todo = [key_of(start)]
    trans: list[list] = [[]]
    while todo:
        key = todo.pop()
        index = keys[key]
        chars = [t for t in key if t != _MATCH]
        points = _boundaries([states[t][1] for t in chars] + look_ranges)
        row = []
        for lo, nxt_lo in zip(points, points[1:]):
            hi = nxt_lo - 1
            targets = [states[t][2] for t in chars if any(a <= lo and hi <= b for a, b in states[t][1])]
            if not targets:
                continue
            threads: list = []
            nfa.closure(targets, lo, set(), threads)
            k = key_of(threads)
            if k not in keys:
                if len(keys) >= MAX_DFA_STATES:
                    raise GrammarError(f"regular expression {nfa.pattern!r} is too large (over {MAX_DFA_STATES} "
                                       "DFA states)", where=nfa.where)
                keys[k] = len(keys)
                trans.append([])
                todo.append(k)
            row.append((lo, hi, keys[k]))
        trans[index] = _merge_row(row)
    by_index = sorted(keys.items(), key=lambda kv: kv[1])
    accept = [_MATCH in k for k, _ in by_index]
    exit_sets = [_exit_set(nfa, k) if ordered and _MATCH in k else () for k, _ in by_index]
    return CharDfa(trans, accept, exit_sets)


def _merge_row(row: list) -> list:
    merged: list = []
    for lo, hi, t in row:
        if merged and merged[-1][2] == t and merged[-1][1] + 1 == lo:
            merged[-1] = (merged[-1][0], hi, t)
        else:
            merged.append((lo, hi, t))
    return merged


def _exit_set(nfa: _Nfa, key: tuple) -> tuple:
    """What must not follow a first match ending in this DFA state for ``re`` to end it here.

    The threads before the match have higher priority: if one of them matches again later,
    ``re`` returns that longer match. The characters ``d`` after which one of them reaches the
    end at once are the exit set ``D``; the match ends here exactly when the next character is
    not in ``D``, provided every longer continuation also starts with a character of ``D``
    (else which match ``re`` takes depends on more than one character ahead).
    Returns the ranges of ``D`` (empty: no condition), or None in that last case."""
    states = nfa.states
    pre = [t for t in key[:key.index(_MATCH)]]
    if not pre:
        return ()
    alive = _can_finish(nfa)
    points = _boundaries([states[t][1] for t in pre] + nfa.looks)
    exit_ranges, first_ranges = [], []
    for lo, nxt_lo in zip(points, points[1:]):
        targets = [states[t][2] for t in pre if any(a <= lo and nxt_lo - 1 <= b for a, b in states[t][1])]
        if not targets:
            continue
        threads: list = []
        nfa.closure(targets, lo, set(), threads)
        if _MATCH in threads:
            exit_ranges.append((lo, nxt_lo - 1))
        if any(t == _MATCH or t in alive for t in threads):
            first_ranges.append((lo, nxt_lo - 1))
    exit_norm = ir.normalize_ranges(exit_ranges, ir.MAX_UNICODE)
    if exit_norm != ir.normalize_ranges(first_ranges, ir.MAX_UNICODE):
        return None
    return exit_norm


def _can_finish(nfa: _Nfa) -> set:
    """NFA states from which the match state is reachable (lookbehinds taken as passable)."""
    states = nfa.states
    preds: dict[int, list[int]] = {}
    match = None
    for s, st in enumerate(states):
        kind = st[0]
        succ = st[1] if kind == "eps" else (st[2],) if kind == "char" else (st[3],) if kind == "look" else ()
        if kind == "match":
            match = s
        for t in succ:
            preds.setdefault(t, []).append(s)
    alive, todo = set(), [match]
    while todo:
        s = todo.pop()
        if s in alive:
            continue
        alive.add(s)
        todo.extend(preds.get(s, ()))
    return alive


# ---------------------------------------------------------------------------
# structural IR, when first-match semantics changes nothing


class _Structural:
    def __init__(self, pattern: str, where: str):
        self.pattern = pattern
        self.where = where

    def lower(self, items, flags: int) -> ir.Node:
        return ir.seq(*(self.item(op, av, flags) for op, av in items))

    def item(self, op, av, flags: int) -> ir.Node:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
            return ir.charset(char_ranges(op, av, flags, self.where))
        if name == "BRANCH":
            return ir.alt(*(self.lower(alt, flags) for alt in av[1]))
        if name == "SUBPATTERN":
            _group, add_flags, del_flags, body = av
            return self.lower(body, (flags | add_flags) & ~del_flags)
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            lo, hi, body = av
            return ir.repeat(self.lower(body, flags), lo, None if hi == _C.MAXREPEAT else hi)
        raise GrammarError(f"unexpected regex item {name}", where=self.where)  # the NFA refused the others
