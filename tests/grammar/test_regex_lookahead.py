"""Anchors inside lookaheads (issue 15, fault 2).

``(?=\\d{3}$)\\w+`` used to accept ``"1234"`` and ``"123abc"``: the ``$`` at the
end of the lookahead's body was dropped and the body taken as a prefix. A
``$`` there is the end of the input (full match and JSON Schema's search
alike); a lookahead is checked where it stands, so in search mode its body is
not searched for further on either. The verdicts below are ECMAScript's
(``/(?=\\d{3}$)\\w+/`` in a JavaScript console), written out by hand; the
differential fuzzer (``tests/fuzz``) checks random lookaheads against the
``regex`` module.
"""

from __future__ import annotations

import pytest

from leapgen import GrammarMatcher, RegexError

FULL = [
    # (pattern, text, fullmatch verdict)
    (r"(?=\d{3}$)\w+", "123", True),
    (r"(?=\d{3}$)\w+", "1234", False),
    (r"(?=\d{3}$)\w+", "123abc", False),
    (r"(?=\w+$)\d+", "12", True),
    (r"(?=a$|b)\w+", "a", True),
    (r"(?=a$|b)\w+", "ab", False),
    (r"(?=a$|b)\w+", "bcd", True),
    (r"(?!\d+$)\w+", "123", False),
    (r"(?!\d+$)\w+", "12a", True),
    (r"(?=.*x$)[a-z]+", "abx", True),
    (r"(?=.*x$)[a-z]+", "axb", False),
    (r"(?=(?=\d$)\w)\w", "5", True),
    (r"(?=(?=\d$)\w)\w", "a", False),
    (r"(?=^a)a", "a", True),
]

SEARCH = [
    # (pattern, text, JSON Schema ``pattern`` verdict: an unanchored search)
    (r"^(?=\d)\w+$", "1a", True),
    (r"^(?=\d)\w+$", "a1", False),  # the lookahead is at the start, not anywhere
    (r"^(?=\d{3}$)", "123", True),
    (r"^(?=\d{3}$)", "1234", False),
    (r"(?=\d{2}$)", "ab12", True),  # searched: found where two digits end the text
    (r"(?=\d{2}$)", "12ab", False),
    (r"x(?=y$)", "axy", True),
    (r"x(?=y$)", "axyz", False),
]


def full_verdict(compiler, pattern: str, text: str) -> bool:
    matcher = GrammarMatcher(compiler.compile_regex(pattern))
    return matcher.accept_string(text) and matcher.is_completed()


@pytest.mark.parametrize("pattern, text, want", FULL)
def test_anchor_inside_lookahead_full_match(toy_compiler, pattern, text, want):
    assert full_verdict(toy_compiler, pattern, text) is want


@pytest.mark.parametrize("pattern, text, want", SEARCH)
def test_anchor_inside_lookahead_in_a_schema_pattern(toy_compiler, pattern, text, want):
    import json

    compiled = toy_compiler.compile_json_schema({"type": "string", "pattern": pattern}, any_whitespace=False)
    matcher = GrammarMatcher(compiled)
    assert (matcher.accept_string(json.dumps(text)) and matcher.is_completed()) is want


@pytest.mark.parametrize("pattern, offset", [(r"b(?=^a)a", 4), (r"(?=x)(?!y)z(?=(?:^q))", 17)])
def test_start_anchor_in_a_lookahead_past_the_start_is_refused(toy_compiler, pattern, offset):
    with pytest.raises(RegexError) as info:
        toy_compiler.compile_regex(pattern)
    assert info.value.offset == offset and "lookahead" in str(info.value)
