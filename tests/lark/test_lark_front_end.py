"""The Lark front-end's errors, refusals and terminal semantics.

Terminal languages are checked against Python's ``re`` itself (no lark
needed): a string is in a terminal's language iff ``re.match(T, s)`` matches
all of ``s``.
"""

from __future__ import annotations

import random
import re

import pytest

from leapgen.errors import GrammarError
from leapgen.grammar.lark import parse_lark
from leapgen.grammar.pyregex import compile_terminal


def error_of(text: str) -> GrammarError:
    with pytest.raises(GrammarError) as info:
        parse_lark(text)
    return info.value


@pytest.mark.parametrize("text, where, words", [
    ('start: "a"\n  b: "x" (\n', "line 2:", "expected"),
    ('start: "a"\nstart: "b"\n', "line 2:1", "defined twice"),
    ('start: foo\n', "line 1:8", "not defined"),
    ('start: A\n', "line 1:8", "not defined"),
    ('start: "a"\n%declare X\n', "line 2:1", "%declare"),
    ('start: sep{"a"}\n', "line 1:8", "templates"),
    ('start: A\nA: "a" | ""\n', "line 2:", "empty"),
    ('start: A\nA: /a*/\n', "line 2:1", "empty string"),
    ('start: A\nA: /a(?=b)/\n', "line 2:1", "lookahead"),
    ('start: A\nA: /^a/\n', "line 2:1", "anchors"),
    ('start: A\nA: /(a)\\1/\n', "line 2:1", "backreferences"),
    ('start: A\nA: /a[/\n', "line 2:1", "bad regular expression"),
    ('start: A\nA: B\nB: A\n', "line 2:1", "refers to itself"),
    ('start: A\nA: "a" start\n', "line 2:", "rules are not allowed inside terminals"),
    ('start: "a"\n%import common.NOPE\n', "line 2:1", "no rule or terminal"),
    ('start: "a"\n%import nosuchmodule.X\n', "line 2:1", "cannot find grammar"),
    ('start: "a"\n%import .rel.X\n', "line 2:1", "relative imports"),
    ('start: "a"\n%ignore /a(bc)?/\n', None, "more than the next character"),
    ('start: "a" ~ 3..2\n', "line 1:", "bad range"),
    ('start: "a"\n@\n', "line 2:1", "unexpected character"),
])
def test_errors_name_what_and_where(text, where, words):
    err = error_of(text)
    assert words.lower() in str(err).lower(), str(err)
    if where is not None:
        assert err.where is not None and err.where.startswith(where), (err.where, str(err))


def test_missing_start_rule():
    assert "start rule" in str(error_of('rule: "a"\n'))
    assert parse_lark('top: "a"\n', start="top").root == "__root"


def test_modifiers_aliases_priorities_do_not_change_the_language(toy_compiler):
    plain = toy_compiler.compile_lark('start: a b\na: "x"\nb: B\nB: "y"\n')
    decorated = toy_compiler.compile_lark('?start.3: _a b -> alias\n_a: "x"\n!b.2: B\nB.5: "y"\n')
    for s in ["xy", "x", "y", "xyy", ""]:
        for g in (plain, decorated):
            st = g.walk(g.start_state, s.encode())
            assert (st is not None and g.is_accepting(st)) == (s == "xy")


def test_override_and_extend(toy_compiler):
    g = toy_compiler.compile_lark('start: a\na: "x"\n%override a: "y"\n%extend a: "z"\n')
    accepted = [s for s in "xyz" if (st := g.walk(g.start_state, s.encode())) is not None and g.is_accepting(st)]
    assert accepted == ["y", "z"]


def test_import_with_alias_and_list(toy_compiler):
    g = toy_compiler.compile_lark('start: N ("," INT)*\n%import common.SIGNED_NUMBER -> N\n%import common (INT)\n')
    for s, ok in [("-1.5e3,2,3", True), ("+2", True), ("1,-2", False), ("1,", False)]:
        st = g.walk(g.start_state, s.encode())
        assert (st is not None and g.is_accepting(st)) == ok, s


# -- terminals: first-match semantics, checked against re --------------------------------------

PATTERNS = [
    r"a|ab", r"ab|a", r"a*(ab)?", r"(a|ab)(c|bcd)", r"[a-c]+?c", r"a{2,3}?b?", r'"(?:.*?(?<!\\)(\\\\)*?)"',
    r"(?i:ab|k)", r"\d+\.?\d*", r"\w+", r"(?s:.)\S?", r"x(?:y|yz|z)*", r"(?:a|b)*?b", r"[^a]a?|aa",
    r"(?:ab)*(?:a)?", r"\s\S", r"[\w-]+",
]
ALPHABET = "abcdkKz\"\\.0129 \n\u212a\u0660_-"


def in_language(dfa, s: str) -> bool:
    state = 0
    for ch in s:
        cp = ord(ch)
        for lo, hi, t in dfa.trans[state]:
            if lo <= cp <= hi:
                state = t
                break
        else:
            return False
    return dfa.accept[state]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_terminal_language_is_re_first_match(pattern):
    term = compile_terminal(pattern, where="test")
    rx = re.compile(pattern)
    rng = random.Random(pattern)
    for _ in range(3000):
        s = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 7)))
        m = rx.match(s)
        want = m is not None and m.end() == len(s)
        assert in_language(term.dfa, s) == want, (pattern, s)


def test_case_folding_is_re_s():
    """``i`` folds as re does: the Kelvin sign matches k, the long s matches s."""
    term = compile_terminal("(?i:ks)", where="test")
    for s in ["ks", "KS", "\u212a\u017f", "kS"]:
        assert in_language(term.dfa, s)
    assert not in_language(term.dfa, "kz")


@pytest.mark.parametrize("pattern", [
    "a", "k", "s", "\u00df", "\u03c3", "i", "\u0130", "[a-z]", "[^a-z]", r"\w", r"[^\W\d]", "[\u0391-\u03a9]",
    "[^\u212a]", "\u01c5", "[0-9A-F]", "(?a:k)", "(?a:[^k])", r"\D",
])
def test_character_classes_under_i_match_re_on_every_code_point(pattern):
    """Under ``i`` only the cased code points are asked of ``re``; the answer must equal asking ``re``
    about every code point (surrogates aside: they have no UTF-8 form)."""
    term = compile_terminal(f"(?i:{pattern})", where="test")
    got = {(lo, hi) for lo, hi, _ in term.dfa.trans[0]}
    everything = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    want_points = {m.start() if m.start() < 0xD800 else m.start() + 0x800
                   for m in re.finditer(f"(?i:{pattern})", everything)}
    got_points = set()
    for lo, hi in got:
        got_points.update(p for p in range(lo, hi + 1) if not 0xD800 <= p <= 0xDFFF)
    assert got_points == want_points
