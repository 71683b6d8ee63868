"""leapgen's Lark front-end against ``lark`` itself on small grammars that
probe the semantics where a character-level grammar could go wrong, with
*every* string over a small alphabet up to a length as input.

Each grammar targets one point: first-match terminals (``a|ab``), lazy
quantifiers and lookbehind (Lark's own ``ESCAPED_STRING``), complete lexing
(a terminal shorter than its regex's match), ``%ignore`` at terminal
boundaries (a terminal that starts with an ignored character), several
ignored terminals in one gap, a lazy comment, case-insensitive literals,
Lark's longest-first sorting of terminal alternatives, ``~`` repetition,
direct and indirect left recursion. The oracle is
``lark.Lark(parser="earley", lexer="dynamic_complete")``.
"""

from __future__ import annotations

import itertools

import pytest

from tests.lark.lark_oracle import lark_accepts, leapgen_accepts

CASES = {
    "first_match": (r"""
start: A B
A: /a|ab/
B: /b?c/
""", "abc", 5),
    "complete_lex": (r"""
start: WORD "b" WORD?
WORD: /[a-z]+/
""", "abz", 5),
    "ignore_boundary": (r"""
start: "a" SPB+
SPB: " b"
%ignore WS
%import common.WS
""", "ab \t", 6),
    "escaped_string": (r"""
start: ESCAPED_STRING ("," ESCAPED_STRING)*
%import common.ESCAPED_STRING
%import common.WS
%ignore WS
""", "\"\\a, ", 6),
    "two_ignores": (r"""
start: (NAME | NUMBER)+
NAME: /[a-z]+/
NUMBER: /[0-9]+/
%ignore /[ ]+/
%ignore /#[^\n]*/
""", "a1 #\n", 6),
    "lazy_comment": (r"""
start: "x" ("," "x")*
%ignore /\/\*(.|\n)*?\*\//
""", "x,/*", 7),
    "case_insensitive": (r"""
start: "ab"i+ KW
KW: "k"i
%ignore " "
""", "aAbBkK ", 5),
    "sorted_alternatives": (r"""
start: T ("-" T)*
T: "a" | "ab" | /a+b?/ | "b"
""", "ab-", 6),
    "repeat_range": (r"""
start: ("a" ~ 2..3) ("b" ~ 2) "c"?
""", "abc", 7),
    "left_recursion": (r"""
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom
?atom: "1" | "(" sum ")"
%ignore " "
""", "1+*( )", 5),
    "indirect_left_recursion": (r"""
start: s
s: t "x" | "y"
t: s "z" | "w" | u
u: [s] "v"
""", "xyzwv", 5),
    "keyword_vs_name": (r"""
start: (KW | NAME)+
KW: "if"
NAME: /[a-z]+/
%ignore /\s+/
""", "if \n", 5),
    "optional_prefix_terminal": (r"""
start: item+
item: JOIN | NAME
JOIN: (NAME " ")? "j"
NAME: /[a-z]/
%ignore " "
""", "aj ", 6),
}


def all_strings(alphabet: str, max_len: int):
    for n in range(max_len + 1):
        for chars in itertools.product(alphabet, repeat=n):
            yield "".join(chars)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_short_string(name, toy_compiler):
    text, alphabet, max_len = CASES[name]
    compiled = toy_compiler.compile_lark(text)
    accepted = rejected = 0
    wrong = []
    for s in all_strings(alphabet, max_len):
        want = lark_accepts(text, s)
        got = leapgen_accepts(compiled, s)
        accepted += want
        rejected += not want
        if want != got:
            wrong.append((s, want, got))
    assert not wrong, f"{len(wrong)} disagreements with lark, e.g. (string, lark, leapgen): {wrong[:10]}"
    assert accepted and rejected  # both verdicts are exercised


def test_dynamic_lexer_differs_where_documented(toy_compiler):
    """``lexer="dynamic"`` (no complete lexing) rejects ``ab`` for ``WORD "b"``; leapgen follows
    ``dynamic_complete`` and accepts it, as a character-level grammar must."""
    text = 'start: WORD "b"\nWORD: /[a-z]+/\n'
    compiled = toy_compiler.compile_lark(text)
    assert lark_accepts(text, "ab", lexer="dynamic_complete") and leapgen_accepts(compiled, "ab")
    assert not lark_accepts(text, "ab", lexer="dynamic")
