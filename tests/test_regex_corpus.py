"""Regex conformance on shared material (issue #2).

* ``../shared/cases/*.json`` with ``kind == "regex"``: must_accept accepted
  (``accept_string`` + ``is_completed``), must_reject rejected, and the
  behaviour their notes ask for (jump-forward, token spans, size).
* ``../shared/corpora/xgrammar/test_vectors.jsonl`` (``grammar_kind ==
  "regex"``): the recorded verdicts. All 132 records are in leapgen's dialect
  (``\\e \\a \\u{...} \\cJ (?<name>...)`` included); a record whose pattern
  leapgen refuses as unsupported would be skipped with the construct named,
  and the counts are asserted so a regression cannot hide as a skip.
* ``compile_errors.jsonl``: regexes xgrammar refuses must raise
  ``RegexError``, except the ones listed in ``LEGIT_ECMASCRIPT`` (valid
  ECMA-262, each with why and what leapgen does with it).
* Unsupported constructs raise ``GrammarError`` with the offset.

Everything here runs on the toy byte vocabulary of ``conftest.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from leapgen import GrammarError, GrammarMatcher, RegexError
from vocab_loaders import shared_missing

SHARED = Path(__file__).resolve().parents[2] / "shared"
CASES = SHARED / "cases"
XGRAMMAR = SHARED / "corpora" / "xgrammar"

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=shared_missing(SHARED))


def _load_cases() -> list[dict]:
    if not CASES.is_dir():
        return []
    out = []
    for path in sorted(CASES.glob("*.json")):
        case = json.loads(path.read_text("utf-8"))
        if case["kind"] == "regex":
            case["name"] = path.stem
            out.append(case)
    return out


def _load_jsonl(name: str) -> list[dict]:
    path = XGRAMMAR / name
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


REGEX_CASES = _load_cases()
VECTORS = [r for r in _load_jsonl("test_vectors.jsonl") if r["grammar_kind"] == "regex"]
COMPILE_ERRORS = [r for r in _load_jsonl("compile_errors.jsonl") if r["grammar_kind"] == "regex"]

# xgrammar refuses these, but they are valid ECMA-262: what leapgen does instead.
LEGIT_ECMASCRIPT = {
    # An empty class matches no character (ECMA-262 22.2.2.9); the regex is valid but its language is
    # empty, so compiling it raises GrammarError (not a RegexError: the syntax is fine).
    "[]": "empty",
    # A lookahead with nothing after it, matched in full: (?=abc) needs "abc" ahead of the empty
    # match, so the language is empty -> GrammarError at compile.
    "(?=abc)": "empty",
    "(?=a)": "empty",
    # A negative lookahead with nothing after it, matched in full: the empty string only.
    "(?!abc)": "only-empty",
    "(?!a)": "only-empty",
    # Annex B (B.1.2, ExtendedPatternCharacter): a '{' that starts no quantifier is a literal, so this is
    # the 5-character text "a{,3}". (With the u flag it would be a SyntaxError; leapgen follows Annex B.)
    "a{,3}": "literal",
}


def verdict(compiler, pattern: str, text: str) -> bool:
    m = GrammarMatcher(compiler.compile_regex(pattern))
    return m.accept_string(text) and m.is_completed()


def allowed_ids(matcher: GrammarMatcher, vocab_size: int) -> set[int]:
    bitmask = np.zeros((1, (vocab_size + 31) // 32), np.int32)
    matcher.fill_next_token_bitmask(bitmask)
    bits = np.unpackbits(bitmask.astype("<i4").view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


# ---------------------------------------------------------------- ../shared/cases


@needs_shared
def test_shared_cases_found():
    names = {c["name"] for c in REGEX_CASES}
    assert {"jf-final-state-loop", "jf-utf8-partial-char-regex", "regex-emoji-range", "token-spans-grammar-end",
            "whitespace-bounded-regex"} <= names


@needs_shared
@pytest.mark.parametrize("case", REGEX_CASES, ids=[c["name"] for c in REGEX_CASES])
def test_case_accept_reject(toy_compiler, case):
    pattern = case["grammar"]
    for text in case["must_accept"]:
        assert re.fullmatch(pattern, text), f"ground truth disagrees: {text!r}"
        assert verdict(toy_compiler, pattern, text), f"{case['name']}: {text!r} should be accepted"
    for text in case["must_reject"]:
        assert not re.fullmatch(pattern, text), f"ground truth disagrees: {text!r}"
        assert not verdict(toy_compiler, pattern, text), f"{case['name']}: {text!r} should be rejected"


def _case(name: str) -> dict:
    for c in REGEX_CASES:
        if c["name"] == name:
            return c
    pytest.skip(f"case {name} is not in {CASES}")


@needs_shared
def test_jf_final_state_loop(toy_compiler, toy_info):
    m = GrammarMatcher(toy_compiler.compile_regex(_case("jf-final-state-loop")["grammar"]))
    assert m.find_jump_forward_string() == ""  # '-', '+' or a digit
    assert m.accept_string("42") and m.is_completed()
    assert m.find_jump_forward_string() == ""  # accepting: EOS is a choice, no space is forced
    assert m.find_jump_forward_bytes() == b""
    allowed = allowed_ids(m, toy_info.vocab_size)
    singles = {b for b in allowed if b < 256}
    assert singles == set(range(0x30, 0x3A)) | {0x20}
    assert set(toy_info.stop_token_ids) <= allowed
    assert m.accept_string(" ") and m.find_jump_forward_string() == "" and m.is_completed()


@needs_shared
def test_jf_utf8_partial_char(toy_compiler):
    m = GrammarMatcher(toy_compiler.compile_regex(_case("jf-utf8-partial-char-regex")["grammar"]))
    assert m.find_jump_forward_bytes() == "日".encode() + b"\xe6\x9c"  # ends inside a character
    assert m.find_jump_forward_string() == "日"  # whole characters only
    assert m.accept_string("日")
    assert m.find_jump_forward_string() == ""  # only e6 9c is forced: half a character
    for rest in ("月潭", "本海"):
        f = m.fork()
        assert f.accept_string(rest) and f.is_completed()
    inside = m.fork()
    assert inside.accept_string(b"\xe6\x9c") and inside.find_jump_forward_string() == ""
    assert m.accept_string("月") and m.find_jump_forward_string() == "潭"


@needs_shared
def test_token_spans_grammar_end(toy_compiler, toy_info):
    m = GrammarMatcher(toy_compiler.compile_regex(_case("token-spans-grammar-end")["grammar"]))
    assert m.accept_string('{"k": 7')
    allowed = allowed_ids(m, toy_info.vocab_size)
    close, close_nl = toy_info.token_bytes.index(b"}"), toy_info.token_bytes.index(b"}\n")
    assert close in allowed and close_nl not in allowed
    assert not m.fork().accept_token(close_nl)
    assert m.accept_token(close) and m.is_completed()
    assert allowed_ids(m, toy_info.vocab_size) == set(toy_info.stop_token_ids)
    assert m.accept_token(toy_info.stop_token_ids[0]) and m.is_terminated()


@needs_shared
def test_whitespace_bounded_small_and_not_forced(toy_compiler):
    compiled = toy_compiler.compile_regex(_case("whitespace-bounded-regex")["grammar"])
    assert compiled.n_states < 400, compiled.n_states  # bounded repeats stay small
    m = GrammarMatcher(compiled)
    assert m.find_jump_forward_string() == "{"
    assert m.accept_string("{") and m.find_jump_forward_string() == ""  # whitespace or '"' may follow
    assert m.accept_string('"') and m.find_jump_forward_string() == 'items"'


@needs_shared
def test_emoji_range_bytes(toy_compiler):
    compiled = toy_compiler.compile_regex(_case("regex-emoji-range")["grammar"])
    m = GrammarMatcher(compiled)
    assert m.find_jump_forward_bytes() == b"\xf0\x9f\x8c"  # U+1F300-U+1F33F share three bytes
    assert m.find_jump_forward_string() == ""  # ... which are not a whole character
    assert not m.fork().accept_string("\U0001F340") and m.accept_string("\U0001F33F")


# ---------------------------------------------------------------- xgrammar vectors


UNSUPPORTED_WORDS = ("not supported", "unsupported")


def _unsupported_reason(pattern: str) -> str | None:
    from leapgen.grammar.regex import parse_regex

    try:
        parse_regex(pattern)
    except RegexError as e:
        if any(w in str(e) for w in UNSUPPORTED_WORDS):
            return str(e)
        raise
    return None


@needs_shared
@pytest.mark.parametrize("record", VECTORS, ids=[f"v{i}" for i in range(len(VECTORS))])
def test_xgrammar_vector(toy_compiler, record):
    reason = _unsupported_reason(record["grammar"])
    if reason is not None:
        pytest.skip(f"outside leapgen's dialect: {reason}")
    got = verdict(toy_compiler, record["grammar"], record["instance"])
    assert got == record["accepted"], (record["grammar"], record["instance"], record["test"])


@needs_shared
def test_xgrammar_vectors_all_in_dialect_and_pass(toy_compiler):
    """The counts: 132 regex records, every one in dialect and passing (a
    construct dropped from the dialect must show up here, not as a quiet skip)."""
    assert len(VECTORS) == 132
    out_of_dialect = [r["grammar"] for r in VECTORS if _unsupported_reason(r["grammar"]) is not None]
    assert out_of_dialect == []
    passed = sum(verdict(toy_compiler, r["grammar"], r["instance"]) == r["accepted"] for r in VECTORS)
    assert passed == 132
    # where Python's re can parse the pattern, the recorded verdict is also re's
    assert all(r["python_re_fullmatch"] == r["accepted"] for r in VECTORS if r["python_re_fullmatch"] != "error")


@needs_shared
@pytest.mark.parametrize("record", COMPILE_ERRORS, ids=[f"e{i}" for i in range(len(COMPILE_ERRORS))])
def test_xgrammar_compile_error(toy_compiler, record):
    pattern = record["grammar"]
    kind = LEGIT_ECMASCRIPT.get(pattern)
    if kind is None:
        with pytest.raises(RegexError) as info:
            toy_compiler.compile_regex(pattern)
        assert 0 <= info.value.offset <= len(pattern) and info.value.where == f"offset {info.value.offset}"
    elif kind == "empty":
        with pytest.raises(GrammarError, match="matches no string"):
            toy_compiler.compile_regex(pattern)
    elif kind == "only-empty":
        assert verdict(toy_compiler, pattern, "")
        assert not verdict(toy_compiler, pattern, pattern[3:-1]) and not verdict(toy_compiler, pattern, "x")
    else:
        assert verdict(toy_compiler, pattern, pattern) and not verdict(toy_compiler, pattern, "aaa")


@needs_shared
def test_compile_error_list_is_covered():
    assert len(COMPILE_ERRORS) == 17
    assert set(LEGIT_ECMASCRIPT) <= {r["grammar"] for r in COMPILE_ERRORS}


# ---------------------------------------------------------------- unsupported constructs

UNSUPPORTED = [
    # (pattern, offset of the construct, word the message must contain)
    ("ab(?<=c)d", 2, "lookbehind"),
    ("(?<!x)y", 0, "lookbehind"),
    (r"(a)\1", 3, "backreference"),
    (r"(?<n>a)\k<n>", 7, "backreference"),
    (r"a\bc", 1, "word boundary"),
    (r"\Bx", 0, "word boundary"),
    (r"\p{L}+", 0, "property"),
    (r"x\P{Lu}", 1, "property"),
    ("(?i)abc", 0, "inline flags"),
    ("a(?m:b)", 1, "inline flags"),
    ("a++", 2, "possessive"),
    ("a^b", 1, "anchor"),
    ("a$b", 1, "anchor"),
    ("(a(?=b))c", 2, "lookahead"),
    ("(?=a)*", 0, "assertion"),
    ("[ab", 0, "missing ']'"),
    ("(ab", 0, "missing ')'"),
    ("ab)", 2, "unbalanced"),
    (r"\u12", 0, "escape"),
    ("a{3,2}", 1, "out of order"),
    ("[z-a]", 2, "out of order"),
    ("*a", 0, "nothing to repeat"),
]


@pytest.mark.parametrize("pattern, offset, word", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_construct_raises_with_offset(toy_compiler, pattern, offset, word):
    with pytest.raises(GrammarError) as info:
        toy_compiler.compile_regex(pattern)
    err = info.value
    assert isinstance(err, RegexError) and isinstance(err, ValueError)
    assert err.offset == offset and err.where == f"offset {offset}"
    assert f"at offset {offset}" in str(err) and repr(pattern) in str(err)
    assert word in str(err)


def test_compile_regex_rejects_non_str(toy_compiler):
    with pytest.raises(GrammarError):
        toy_compiler.compile_regex(b"abc")
