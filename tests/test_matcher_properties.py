"""Property tests of GrammarMatcher (issue #2), with hypothesis.

On the toy byte vocabulary of ``conftest.py`` (every id checked) and, with
few examples, on the Llama-3 vocabulary (sampled ids):

* a token taken from a filled bitmask is always accepted, and a token outside
  it is always rejected; stop tokens are allowed exactly when ``is_completed()``;
* filling never mutates the matcher (state, history, flags);
* ``accept`` x k then ``rollback(k)`` restores the same bitmask;
* the jump-forward string is accepted, is the only way on byte by byte, is
  maximal (whole characters), and is a prefix of every continuation;
* strings drawn from ``hypothesis.strategies.from_regex(p, fullmatch=True)``
  are accepted, and leapgen's verdict equals ``re.fullmatch`` on random and
  mutated strings (patterns where Python and ECMAScript agree: no ``\\d \\w
  \\s .``, alphabets restricted to encodable characters);
* fork independence, reset, rollback errors, termination, out-of-range ids,
  rejected tokens and strings leaving the matcher unchanged.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leapgen import GrammarMatcher

PATTERNS = [
    r"[a-c]{0,3}d?",
    r"(ab|a)(bc|c)?d",
    r"(cat|dog)s?( (cat|dog)s?)*",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?",
    r'"[^"\\]*"',
    r'\{"k": [0-9]+\}',
    r"日月潭|日本海",
    r"[🌀-🌿]+",
    r"(true|false|null)(, (true|false|null)){0,2}",
    r"x[ \t]*(é|日|🎉)+",
    r"[0-9]{4}-(0[1-9]|1[0-2])",
    r"(a|b)*abb",
    r"[^a-z\n]{1,4}(ok|no)",
    r"[-+]?[0-9]+[ ]*",
    r"(日|月)です",
]
EXTRA_CHARS = "abcdxyz019 -+.,\"\\{}:\n\té日月本潭海🌀🌿🍀🎉"
UTF8_CHARS = st.characters(codec="utf-8")

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REAL_SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def alphabet_of(pattern: str) -> str:
    return "".join(sorted(set(pattern) | set(EXTRA_CHARS)))


# ---------------------------------------------------------------- helpers over the public API


def allowed_ids(m: GrammarMatcher) -> np.ndarray:
    vocab_size = m.compiled_grammar.tokenizer_info.vocab_size
    bitmask = np.zeros((1, (vocab_size + 31) // 32), np.int32)
    m.fill_next_token_bitmask(bitmask)
    bits = np.unpackbits(bitmask.astype("<i4").view(np.uint8), bitorder="little")
    assert not bits[vocab_size:].any()
    return np.flatnonzero(bits[:vocab_size])


def bitmask_of(m: GrammarMatcher) -> np.ndarray:
    vocab_size = m.compiled_grammar.tokenizer_info.vocab_size
    bitmask = np.full((1, (vocab_size + 31) // 32), 0x5A5A5A5A, np.int32)
    m.fill_next_token_bitmask(bitmask)
    return bitmask[0].copy()


def history_states(m: GrammarMatcher) -> list[tuple[int, bool]]:
    """(state, terminated) after each rollback(1), on a fork: the history as seen from outside."""
    f = m.fork()
    out = [(f.state, f.is_terminated())]
    for _ in range(f.num_accepted_tokens):
        f.rollback(1)
        out.append((f.state, f.is_terminated()))
    return out


def snapshot(m: GrammarMatcher):
    return (m.state, m.num_accepted_tokens, m.is_completed(), m.is_terminated(), history_states(m))


def ids_to_check(m: GrammarMatcher, allowed: np.ndarray, rng: np.random.Generator, exhaustive: bool):
    vocab_size = m.compiled_grammar.tokenizer_info.vocab_size
    if exhaustive:
        return range(vocab_size)
    outside = np.ones(vocab_size, bool)
    outside[allowed] = False
    others = np.flatnonzero(outside)
    pick = [rng.choice(a, min(len(a), 300), replace=False) for a in (allowed, others) if len(a)]
    return np.concatenate(pick).tolist()


def single_bytes_ok(m: GrammarMatcher) -> list[int]:
    return [b for b in range(256) if m.fork().accept_string(bytes([b]))]


def walk(m: GrammarMatcher, choices: list[int], stop_ids, *, allow_stop: bool = False) -> list[int]:
    """Accept tokens chosen from the bitmask; returns the ids accepted."""
    taken = []
    for c in choices:
        allowed = [t for t in allowed_ids(m).tolist() if allow_stop or t not in stop_ids]
        if not allowed:
            break
        t = allowed[c % len(allowed)]
        assert m.accept_token(t)
        taken.append(t)
        if m.is_terminated():
            break
    return taken


# ---------------------------------------------------------------- the properties


def check_mask_accept_agree(compiled, choices, exhaustive: bool):
    info = compiled.tokenizer_info
    stop_ids = set(info.stop_token_ids)
    rng = np.random.default_rng(len(choices))
    m = GrammarMatcher(compiled)
    for c in choices:
        before = snapshot(m)
        allowed = allowed_ids(m)
        assert snapshot(m) == before, "fill_next_token_bitmask mutated the matcher"
        allowed_set = set(allowed.tolist())
        assert (stop_ids <= allowed_set) == m.is_completed() and (stop_ids & allowed_set) in (set(), stop_ids)
        for t in ids_to_check(m, allowed, rng, exhaustive):
            f = m.fork()
            assert f.accept_token(t) == (t in allowed_set), (t, info.token_bytes[t])
        rejected = [t for t in ids_to_check(m, allowed, rng, False) if t not in allowed_set][:20]
        for t in rejected:
            assert not m.accept_token(t)
            assert snapshot(m) == before, "a rejected token changed the matcher"
        assert np.array_equal(allowed_ids(m), allowed)
        t = int(allowed[c % len(allowed)]) if len(allowed) else None
        if t is None:
            pytest.fail("a trimmed grammar always has a way on or may end")
        assert m.accept_token(t)
        if m.is_terminated():
            check_terminated(m, stop_ids)
            return


def check_terminated(m: GrammarMatcher, stop_ids):
    vocab_size = m.compiled_grammar.tokenizer_info.vocab_size
    assert m.is_terminated() and m.is_completed()
    assert set(allowed_ids(m).tolist()) <= stop_ids  # nothing but stop tokens after the end
    before = snapshot(m)
    assert not any(m.accept_token(t) for t in range(vocab_size) if t not in stop_ids)
    assert not m.accept_string("") and not m.accept_string("a")
    assert snapshot(m) == before
    assert m.find_jump_forward_string() == ""
    m.rollback(1)
    assert not m.is_terminated() and m.is_completed()


def check_rollback_restores(compiled, prefix_choices, more_choices):
    """accept x k then rollback(k) gives back the bitmask (and everything else);
    rolling back one at a time passes through every earlier bitmask."""
    stop_ids = set(compiled.tokenizer_info.stop_token_ids)
    m = GrammarMatcher(compiled)
    walk(m, prefix_choices, stop_ids)
    base = (bitmask_of(m), snapshot(m), m.find_jump_forward_string())
    seen = [(bitmask_of(m), snapshot(m))]
    for c in more_choices:
        if m.is_terminated() or not walk(m, [c], stop_ids, allow_stop=True):
            break
        seen.append((bitmask_of(m), snapshot(m)))
    k = len(seen) - 1
    f = m.fork()
    for mask, snap in reversed(seen[1:]):
        assert np.array_equal(bitmask_of(f), mask) and snapshot(f) == snap
        f.rollback(1)
    m.rollback(k)
    for x in (m, f):
        assert np.array_equal(bitmask_of(x), base[0])
        assert snapshot(x) == base[1] and x.find_jump_forward_string() == base[2]


def check_jump_forward(compiled, choices, cont_choices):
    """The jump-forward properties at every state of a walk chosen by ``choices``."""
    stop_ids = set(compiled.tokenizer_info.stop_token_ids)
    m = GrammarMatcher(compiled)
    check_jump_forward_here(m, cont_choices, stop_ids)
    for c in choices:
        if not walk(m, [c], stop_ids):
            break
        check_jump_forward_here(m, cont_choices, stop_ids)


def check_jump_forward_here(m: GrammarMatcher, cont_choices, stop_ids):
    before = snapshot(m)
    jf = m.find_jump_forward_string()
    assert snapshot(m) == before, "find_jump_forward_string mutated the matcher"
    forced = jf.encode("utf-8")
    # byte by byte: the forced byte is the only way on, and the grammar may not end before it
    f = m.fork()
    for b in forced:
        assert not f.is_completed()
        assert single_bytes_ok(f) == [b], (jf, b)
        assert f.accept_string(bytes([b]))
    g = m.fork()
    assert g.accept_string(jf), "the jump-forward string must be accepted"
    assert f.state == g.state
    # maximal: jumping again forces nothing; the unique-byte chain after it holds no whole character
    assert g.find_jump_forward_string() == ""
    chain = b""
    h = g.fork()
    while len(chain) < 8 and not h.is_completed():
        nxt = single_bytes_ok(h)
        if len(nxt) != 1:
            break
        chain += bytes(nxt)
        assert h.accept_string(bytes(nxt))
    for k in range(1, len(chain) + 1):
        try:
            chain[:k].decode("utf-8")
            pytest.fail(f"jump-forward {jf!r} stopped before the forced whole character {chain[:k]!r}")
        except UnicodeDecodeError:
            pass
    # every continuation by tokens agrees with the forced text
    token_bytes = m.compiled_grammar.tokenizer_info.token_bytes
    for seed in cont_choices:
        c = m.fork()
        taken = walk(c, [seed * (i + 1) for i in range(len(forced) + 2)], stop_ids)
        text = b"".join(token_bytes[t] for t in taken)
        assert text.startswith(forced) or forced.startswith(text), (jf, text)


# ---------------------------------------------------------------- toy vocabulary

pattern_st = st.sampled_from(PATTERNS)
choices_st = st.lists(st.integers(0, 2**31), max_size=12)


@SETTINGS
@given(pattern=pattern_st, choices=choices_st)
def test_mask_and_accept_agree(toy_compiler, pattern, choices):
    check_mask_accept_agree(toy_compiler.compile_regex(pattern), choices + [0] * 30, exhaustive=True)


@SETTINGS
@given(pattern=pattern_st, prefix=choices_st, more=st.lists(st.integers(0, 2**31), min_size=1, max_size=8))
def test_accept_k_then_rollback_k_restores_bitmask(toy_compiler, pattern, prefix, more):
    check_rollback_restores(toy_compiler.compile_regex(pattern), prefix, more)


@SETTINGS
@given(pattern=pattern_st, choices=choices_st, cont=st.lists(st.integers(0, 2**31), min_size=1, max_size=4))
def test_jump_forward_properties(toy_compiler, pattern, choices, cont):
    check_jump_forward(toy_compiler.compile_regex(pattern), choices, cont)


@SETTINGS
@given(data=st.data(), pattern=pattern_st)
def test_from_regex_strings_are_accepted(toy_compiler, data, pattern):
    text = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=UTF8_CHARS), label="text")
    assert re.fullmatch(pattern, text)
    compiled = toy_compiler.compile_regex(pattern)
    m = GrammarMatcher(compiled)
    assert m.accept_string(text) and m.is_completed(), text
    # the verdict does not depend on how the text is split into calls
    m = GrammarMatcher(compiled)
    assert all(m.accept_string(bytes([b])) for b in text.encode("utf-8")) and m.is_completed()
    assert m.num_accepted_tokens == len(text.encode("utf-8"))


@st.composite
def near_misses(draw, pattern: str):
    alphabet = alphabet_of(pattern)
    if draw(st.booleans()):
        return draw(st.text(alphabet=alphabet, max_size=12))
    text = draw(st.from_regex(pattern, fullmatch=True, alphabet=UTF8_CHARS))
    op = draw(st.sampled_from(["none", "delete", "insert", "replace"]))
    i = draw(st.integers(0, len(text)))
    c = draw(st.sampled_from(alphabet))
    if op == "delete":
        return text[:i] + text[i + 1:]
    if op == "insert":
        return text[:i] + c + text[i:]
    if op == "replace":
        return text[:i] + c + text[i + 1:]
    return text


@SETTINGS
@given(data=st.data(), pattern=pattern_st)
def test_verdict_equals_python_re(toy_compiler, data, pattern):
    text = data.draw(near_misses(pattern), label="text")
    m = GrammarMatcher(toy_compiler.compile_regex(pattern))
    got = m.accept_string(text) and m.is_completed()
    assert got == (re.fullmatch(pattern, text) is not None), text


ATOMS = ["a", "b", "c", "é", "日", "🎉", "[ab]", "[^a]", "[a-cé]", "[日-月]", r"\.", "(?:)"]


@st.composite
def random_regex(draw, depth: int = 0) -> str:
    """A random pattern in the subset where ECMAScript and Python agree."""
    kind = draw(st.sampled_from(["atom", "atom", "seq", "alt", "quant", "group"] if depth < 3 else ["atom"]))
    if kind == "atom":
        return draw(st.sampled_from(ATOMS))
    if kind == "seq":
        return "".join(draw(st.lists(random_regex(depth + 1), min_size=2, max_size=3)))
    if kind == "alt":
        return "(" + "|".join(draw(st.lists(random_regex(depth + 1), min_size=2, max_size=3))) + ")"
    if kind == "group":
        return "(?:" + draw(random_regex(depth + 1)) + ")"
    lo = draw(st.integers(0, 3))
    q = draw(st.sampled_from(["*", "+", "?", f"{{{lo}}}", f"{{{lo},}}", f"{{{lo},{lo + draw(st.integers(0, 2))}}}"]))
    lazy = draw(st.sampled_from(["", "?"]))
    return "(" + draw(random_regex(depth + 1)) + ")" + q + lazy


@SETTINGS
@given(data=st.data(), pattern=random_regex())
def test_random_regex_verdict_equals_python_re(toy_compiler, data, pattern):
    compiled = toy_compiler.compile_regex(pattern)
    texts = data.draw(st.lists(st.text(alphabet="abcé日月🎉.", max_size=8), min_size=5, max_size=10), label="texts")
    texts.append(data.draw(st.from_regex(pattern, fullmatch=True, alphabet=UTF8_CHARS), label="match"))
    for text in texts:
        m = GrammarMatcher(compiled)
        got = m.accept_string(text) and m.is_completed()
        assert got == (re.fullmatch(pattern, text) is not None), (pattern, text)


def test_verdict_sanity_both_outcomes(toy_compiler):
    """The differential test above can see both verdicts (not all-reject)."""
    m = GrammarMatcher(toy_compiler.compile_regex(PATTERNS[2]))
    assert m.fork().accept_string("cats dog") and not m.fork().accept_string("cats  dog")


@SETTINGS
@given(pattern=pattern_st, a=choices_st, b=choices_st)
def test_fork_independence(toy_compiler, pattern, a, b):
    compiled = toy_compiler.compile_regex(pattern)
    stop_ids = set(compiled.tokenizer_info.stop_token_ids)
    m = GrammarMatcher(compiled)
    walk(m, a[:4], stop_ids)
    f = m.fork()
    assert snapshot(f) == snapshot(m) and np.array_equal(bitmask_of(f), bitmask_of(m))
    m_before, m_mask = snapshot(m), bitmask_of(m)
    walk(f, b, stop_ids, allow_stop=True)
    assert snapshot(m) == m_before and np.array_equal(bitmask_of(m), m_mask)
    f_before, f_mask = snapshot(f), bitmask_of(f)
    walk(m, a[4:], stop_ids, allow_stop=True)
    m.reset()
    assert snapshot(f) == f_before and np.array_equal(bitmask_of(f), f_mask)
    assert f.compiled_grammar is m.compiled_grammar


@SETTINGS
@given(pattern=pattern_st, choices=choices_st)
def test_reset(toy_compiler, pattern, choices):
    compiled = toy_compiler.compile_regex(pattern)
    fresh = GrammarMatcher(compiled)
    m = GrammarMatcher(compiled)
    walk(m, choices, set(compiled.tokenizer_info.stop_token_ids), allow_stop=True)
    m.reset()
    assert snapshot(m) == snapshot(fresh) and m.num_accepted_tokens == 0 and not m.is_terminated()
    assert np.array_equal(bitmask_of(m), bitmask_of(fresh))
    with pytest.raises(ValueError):
        m.rollback(1)


@SETTINGS
@given(pattern=pattern_st, choices=choices_st, extra=st.integers(1, 5))
def test_rollback_errors_leave_matcher_unchanged(toy_compiler, pattern, choices, extra):
    compiled = toy_compiler.compile_regex(pattern)
    m = GrammarMatcher(compiled)
    walk(m, choices, set(compiled.tokenizer_info.stop_token_ids))
    before = snapshot(m)
    for bad in (-1, -extra, m.num_accepted_tokens + extra):
        with pytest.raises(ValueError):
            m.rollback(bad)
        assert snapshot(m) == before
    m.rollback(0)
    assert snapshot(m) == before


def test_max_rollback_tokens(toy_compiler):
    m = GrammarMatcher(toy_compiler.compile_regex("[a-c]+"), max_rollback_tokens=2)
    start = m.state
    assert all(m.accept_string(c) for c in "abc")
    assert m.num_accepted_tokens == 2
    with pytest.raises(ValueError):
        m.rollback(3)
    m.rollback(2)
    assert m.state != start and m.accept_string("b")  # "a" stays: only 2 steps are kept


@pytest.mark.parametrize("bad", [-1, -(2**40), "vocab_size", "vocab_size+7", 2**40])
def test_accept_token_out_of_range(toy_compiler, toy_info, bad):
    m = GrammarMatcher(toy_compiler.compile_regex("[a-c]+"))
    tid = {"vocab_size": toy_info.vocab_size, "vocab_size+7": toy_info.vocab_size + 7}.get(bad, bad)
    with pytest.raises(ValueError):
        m.accept_token(tid)
    assert m.state == GrammarMatcher(m.compiled_grammar).state and m.num_accepted_tokens == 0


def test_padding_special_and_stop_tokens(toy_compiler, toy_info):
    m = GrammarMatcher(toy_compiler.compile_regex("ab?"))
    stop = toy_info.stop_token_ids[0]
    special = sorted(toy_info.special_token_ids - {stop})
    assert not m.accept_token(stop)  # not complete yet
    assert m.accept_token(ord("a")) and m.is_completed()
    assert all(not m.fork().accept_token(t) for t in special)  # never text, padding included
    assert stop in allowed_ids(m).tolist()
    assert m.accept_token(stop)
    check_terminated(m, {stop})


@pytest.mark.parametrize("custom_stop", [False, True])
def test_after_termination_nothing_is_allowed(toy_compiler, toy_info, custom_stop):
    """After a stop token the mask is empty and every token is rejected (mask and accept agree)."""
    stop = ord("z") if custom_stop else toy_info.stop_token_ids[0]
    m = GrammarMatcher(toy_compiler.compile_regex("ab?"), stop_token_ids=[stop] if custom_stop else None)
    assert m.accept_string("a") and m.accept_token(stop) and m.is_terminated()
    assert allowed_ids(m).tolist() == []
    assert not any(m.fork().accept_token(t) for t in (stop, ord("a"), ord("b")))


def test_custom_stop_token_ids(toy_compiler, toy_info):
    m = GrammarMatcher(toy_compiler.compile_regex("ab?"), stop_token_ids=[ord("z")])
    default_stop = toy_info.stop_token_ids[0]
    assert ord("z") not in allowed_ids(m).tolist()
    assert m.accept_token(ord("a"))
    allowed = allowed_ids(m).tolist()
    assert ord("z") in allowed and default_stop not in allowed
    assert not m.fork().accept_token(default_stop)
    assert m.accept_token(ord("z")) and m.is_terminated()
    with pytest.raises(ValueError):
        GrammarMatcher(m.compiled_grammar, stop_token_ids=[toy_info.vocab_size])


def test_rejected_string_leaves_state_unchanged(toy_compiler):
    m = GrammarMatcher(toy_compiler.compile_regex("日月潭|日本海"))
    assert m.accept_string("日")
    before, mask = snapshot(m), bitmask_of(m)
    for s in ("本潭", "x", "月海", "日"):
        assert not m.accept_string(s)
        assert snapshot(m) == before and np.array_equal(bitmask_of(m), mask)
    assert m.accept_string(b"\xe6\x9c")  # half of a character, as bytes
    assert not m.is_completed() and m.find_jump_forward_string() == ""


def test_jump_forward_inside_a_character(toy_compiler):
    m = GrammarMatcher(toy_compiler.compile_regex("(日|月)です"))
    assert m.find_jump_forward_string() == ""  # two first characters share only their first byte
    assert m.accept_string(b"\xe6")
    assert m.find_jump_forward_bytes() == b""  # 日 = e6 97 a5, 月 = e6 9c 88: two ways on
    assert m.accept_string(b"\x97")
    assert m.find_jump_forward_bytes() == b"\xa5" + "です".encode()
    assert m.find_jump_forward_string() == ""  # the matcher stands inside a character
    assert m.accept_string(b"\xa5") and m.find_jump_forward_string() == "です"


# ---------------------------------------------------------------- one real vocabulary

REAL_PATTERNS = [r'\{"name": "[^"\\]{0,12}", "age": [0-9]{1,3}\}', r"(cat|dog|bird)s?( and (cat|dog|bird)s?)*",
                 r"[日月火水木金土]{1,3}曜日", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"]


@pytest.fixture(scope="module")
def llama3(grammar_compiler):
    return grammar_compiler("llama3")


@REAL_SETTINGS
@given(pattern=st.sampled_from(REAL_PATTERNS), choices=st.lists(st.integers(0, 2**31), max_size=6))
def test_real_vocab_mask_and_accept_agree(llama3, pattern, choices):
    check_mask_accept_agree(llama3.compile_regex(pattern), choices + [0] * 4, exhaustive=False)


@REAL_SETTINGS
@given(pattern=st.sampled_from(REAL_PATTERNS), prefix=st.lists(st.integers(0, 2**31), max_size=4),
       more=st.lists(st.integers(0, 2**31), min_size=1, max_size=4))
def test_real_vocab_rollback_restores_bitmask(llama3, pattern, prefix, more):
    check_rollback_restores(llama3.compile_regex(pattern), prefix, more)


@REAL_SETTINGS
@given(pattern=st.sampled_from(REAL_PATTERNS), choices=st.lists(st.integers(0, 2**31), max_size=3),
       cont=st.lists(st.integers(0, 2**31), min_size=1, max_size=1))
def test_real_vocab_jump_forward(llama3, pattern, choices, cont):
    check_jump_forward(llama3.compile_regex(pattern), choices, cont)


def test_accept_string_with_a_lone_surrogate_is_rejected(toy_compiler):
    m = GrammarMatcher(toy_compiler.compile_regex(".*"))
    assert not m.accept_string("a\ud83d")
    assert m.num_accepted_tokens == 0
