"""Token slices (``leapgen/compiler/token_slices.py``) keep masks exact.

Every DFA state of grammars built around the slice's boundaries (strings with
``maxLength`` down to 0 characters left, escapes, the middle of a UTF-8
character, patterns where some characters live and others die) gets the
same token sets from an index with slices as from one without (the plain
trie walk, itself checked against a brute force in ``test_mask_exactness``),
under the grammar's classes and under made-up ones (a two-way split, as
context-free frames use). The slice's limit is checked where it is known:
the number of characters left.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from leapgen import GrammarCompiler
from leapgen.compiler import token_slices
from leapgen.compiler.token_index import TokenIndex

pytest.importorskip("numba")

SCHEMA = {"type": "object",
          "properties": {"s": {"type": "string", "maxLength": 40},
                         "t": {"type": "string", "minLength": 2},
                         "u": {"type": "string", "pattern": "^[a-z é]{0,5}$"},
                         "v": {"type": "string", "pattern": "^[^@]*@.{0,3}$"},
                         "w": {"type": "string", "pattern": "^.*@.*$"}},
          "required": ["s", "t", "u", "v", "w"]}
REGEXES = [r"[^\n]{0,50}", r'"[^"\\]{3,6}"|x', r"(日|a){0,3}\n", r"[A-Za-z_][A-Za-z0-9_]{0,15}",
           r"[a-z0-9.-]+\.(com|org)", r"[a-z0-9]{0,40}",
           r"[A-Za-z0-9]{0,80}",  # limit MORE of a small slice with a token of more characters (llama3 has one)
           r"\S+( \S+){0,2}"]  # words without white space: the non-space slice's LOOP
URI = {"type": "string", "format": "uri"}  # RFC 3986: its host, path, query and fragment loop on uri_chars
EMAIL = {"type": "string", "format": "email"}  # RFC 5322: its local part loops on email_atext


def slice_named(index: TokenIndex, name: str):
    return next(s for s in index.token_slices if s.name == name)


@functools.lru_cache(maxsize=None)
@functools.lru_cache(maxsize=None)
def _in_automaton(shared: GrammarCompiler) -> GrammarCompiler:
    return GrammarCompiler(shared.tokenizer_info, count_lengths=False, token_index=shared.token_index, warm_up=False)


def in_automaton(grammar_compiler, family: str) -> GrammarCompiler:
    """The family's compiler with string lengths kept in the DFA (these tests read a bound's
    characters off DFA states; a counted length is leapgen.compiler.compiled_counted's)."""
    return _in_automaton(grammar_compiler(family))


def plain_index(family: str) -> TokenIndex:
    from vocab_loaders import load_tokenizer_info

    return TokenIndex(load_tokenizer_info(family), use_slices=False)


def grammars(compiler):
    return ([compiler.compile_json_schema(SCHEMA, any_whitespace=False), compiler.compile_json_schema(URI),
             compiler.compile_json_schema(EMAIL)]
            + [compiler.compile_regex(p) for p in REGEXES])


def assert_same_sets(index: TokenIndex, plain: TokenIndex, g, states, state_class: np.ndarray) -> None:
    for s in states:
        got, want = index.token_sets(g.trans_flat, s, state_class), plain.token_sets(g.trans_flat, s, state_class)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (g, s)


def made_up_classes(n_states: int, seed: int) -> list[np.ndarray]:
    """All class 2; classes 1/2 at random; a few states of class 0."""
    rng = np.random.default_rng(seed)
    mixed = rng.integers(1, 3, n_states).astype(np.int8)
    holes = np.ones(n_states, np.int8)
    holes[rng.choice(n_states, max(1, n_states // 20), replace=False)] = 0
    return [np.full(n_states, 2, np.int8), mixed, holes]


@pytest.mark.parametrize("family", ["gpt2", "llama3"])
def test_every_state_same_sets_as_the_plain_walk(grammar_compiler, family):
    compiler = in_automaton(grammar_compiler, family)
    index, plain = compiler.token_index, plain_index(family)
    counts = [s.count for s in index.token_slices]
    assert len(counts) == len(token_slices.SLICE_CHAR_CLASSES) and counts == sorted(counts, reverse=True)
    assert index.token_slices[0].name == "json_string" and counts[-1] > 2_000
    stride = 1 if family == "gpt2" else 5  # llama3: every fifth state (the plain walk is the slow part)
    for i, g in enumerate(grammars(compiler)):
        states = range(0, g.n_states, stride)
        assert_same_sets(index, plain, g, states, np.ones(g.n_states, np.int8))
        for classes in made_up_classes(g.n_states, i):
            assert_same_sets(index, plain, g, range(0, g.n_states, 4 * stride), classes)


@pytest.mark.parametrize("family", ["gpt2", "llama3"])
def test_limit_is_the_characters_left(grammar_compiler, family):
    g = in_automaton(grammar_compiler, family).compile_json_schema(SCHEMA, any_whitespace=False)
    sl = slice_named(g.token_index, "json_string")
    live = np.ones(g.n_states, np.int8)

    def limit(prefix: bytes, slice_=sl) -> int:
        return slice_.limit(g.trans_flat, g.walk(g.start_state, prefix), live)[0]

    for n in (0, 1, 7, 8, 9, 30, 31, 32, 33, 39, 40):
        assert limit(b'{"s":"' + b"a" * n) == (40 - n if n >= 8 else token_slices.MORE), n
    assert limit(b'{"s":"' + "é日".encode() * 15) == 10  # characters, not bytes
    assert limit(b'{"s":"ab\\') == -1  # an escape: only a few characters live
    assert limit(b'{"s":"ab' + "é".encode()[:1]) == 0  # inside a character: every one dies
    assert limit(b'{"s":"","t":"') == token_slices.UNBOUNDED  # minLength, no maxLength
    assert limit(b'{"s":"","t":"ab","u":"') == -1  # a pattern: some characters live, others die
    assert limit(b'{"s') == 0  # only the closing quote: every character dies
    assert limit(b'{"') == -1  # a key: one character lives
    dot = slice_named(g.token_index, "json_string_dot")  # ECMAScript '.': all but the line terminators
    v, w = b'{"s":"","t":"ab","u":"","v":"', b'{"s":"","t":"ab","u":"","v":"@","w":"'
    assert limit(w) == -1 and limit(w, dot) == token_slices.UNBOUNDED
    assert limit(v, dot) == -1  # "@" then 4 characters die
    assert limit(v + b"x@ab") == -1 and limit(v + b"x@ab", dot) == 1


@pytest.mark.parametrize("family", ["gpt2", "llama3"])
def test_narrower_classes_apply_where_the_wider_do_not(grammar_compiler, family):
    g = grammar_compiler(family).compile_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}")
    live = np.ones(g.n_states, np.int8)
    for n in (0, 5, 15):
        s = g.walk(g.start_state, b"_" + b"x" * n)
        got = {sl.name: sl.limit(g.trans_flat, s, live)[0] for sl in g.token_index.token_slices}
        wide = -1 if n < 15 else 0  # all the class's characters die at the end
        assert got == {"json_string": wide, "json_string_dot": wide, "alpha_space": wide,
                       "json_string_nonspace": wide, "uri_chars": wide, "email_atext": wide,
                       "alnum": 15 - n, "lower_alnum": 15 - n, "lower": 15 - n}, n
    g = grammar_compiler(family).compile_regex(r"[a-z0-9]{0,40}")  # a small slice beyond its exact limits
    sl = slice_named(g.token_index, "lower_alnum")
    assert sl.limit(g.trans_flat, g.start_state, np.ones(g.n_states, np.int8))[0] == token_slices.MORE


@pytest.mark.parametrize("family", ["gpt2", "llama3"])
def test_uri_email_and_non_space_loops_take_their_slices(grammar_compiler, family):
    """A URI's host, path, query and fragment, an e-mail's local part, and a word of ``\\S`` loop on
    every character of a slice of theirs (LOOP: the slice's bitset and the remainders' walk), where the
    wider slices do not apply and the narrower ones (``alnum``) would leave most tokens to the walk."""
    compiler = grammar_compiler(family)
    index = compiler.token_index
    names = [sl.name for sl in index.token_slices]

    def first(g, prefix: bytes) -> tuple[str, int]:
        s = g.walk(g.start_state, prefix)
        live = np.ones(g.n_states, np.int8)
        i, k, _ = token_slices.first_slice(g.trans_flat, s, live, index.new_slice_memo(g.n_states),
                                           *index.default_slices.char_dfas)
        return names[i] if i >= 0 else None, k

    uri = compiler.compile_json_schema(URI)
    for text in (b'"http://ex', b'"http://example.com/a', b'"http://example.com/a?q=1', b'"http://example.com/#top'):
        assert first(uri, text) == ("uri_chars", token_slices.LOOP), text
    email = compiler.compile_json_schema(EMAIL)
    assert first(email, b'"first.la') == ("email_atext", token_slices.LOOP)
    words = compiler.compile_regex(r"\S+")
    assert first(words, b"ab") == ("json_string_nonspace", token_slices.LOOP)
    assert first(words, "é".encode()) == ("json_string_nonspace", token_slices.LOOP)


def test_made_up_classes_choose_the_target(grammar_compiler):
    g = in_automaton(grammar_compiler, "gpt2").compile_json_schema(SCHEMA, any_whitespace=False)
    sl = slice_named(g.token_index, "json_string")
    s = g.walk(g.start_state, b'{"s":"')
    two = np.full(g.n_states, 2, np.int8)
    assert sl.limit(g.trans_flat, s, two) == (token_slices.MORE, 2)  # maxLength 40
    deep = np.ones(g.n_states, np.int8)
    deep[g.walk(s, b"abc")] = 2  # one state three characters in differs
    assert sl.limit(g.trans_flat, s, deep) == (-1, 0)


def test_vocabulary_without_slice_tokens(toy_info, toy_compiler, monkeypatch):
    assert TokenIndex(toy_info).token_slices == []  # too few tokens in every class: no slice
    monkeypatch.setattr(token_slices, "MIN_SLICE_TOKENS", 1)
    index, plain = TokenIndex(toy_info), TokenIndex(toy_info, use_slices=False)
    assert len(index.token_slices) == len(token_slices.SLICE_CHAR_CLASSES)
    for g in grammars(_in_automaton(toy_compiler)):
        assert_same_sets(index, plain, g, range(g.n_states), np.ones(g.n_states, np.int8))


def test_char_class_must_be_one_character():
    from leapgen.grammar import ir

    with pytest.raises(ValueError, match="prefix-free"):
        token_slices.build_slice(np.zeros((1, 1), np.uint8), np.ones(1, np.int32), np.zeros(1, np.int32),
                                 np.zeros(1, np.int32), 1, "plus", ir.plus(token_slices.JSON_STRING_CHAR))


# enum values longer than the free string's maxLength: a character leads a state to the free count and,
# for the letter some value goes on with, to that value's progress too
ENUM_BESIDE_STRING = {"type": "array", "items": {"anyOf": [
    {"enum": ["alpha beta gamma delta epsilon zeta eta theta iota", "alpha beta gamma delta epsilon zeta kappa",
              "omega omega omega omega omega omega omega omega omega", "beta " * 10]},
    {"type": "string", "maxLength": 40}]}}


@pytest.mark.parametrize("seed", [0, 1])
def test_kept_character_steps_give_the_limits_of_a_fresh_memo(grammar_compiler, seed):
    """A memo with a side (which keeps a character's steps to several states: a string beside an
    enum's trie) gives every state, in any order, the slice and limit that a fresh memo without it
    gives; the side is used."""
    g = in_automaton(grammar_compiler, "llama3").compile_json_schema(ENUM_BESIDE_STRING, any_whitespace=False)
    index = g.token_index
    n, dfas = len(index.default_slices.slices), index.default_slices.char_dfas
    live = np.ones(g.n_states, np.int8)
    kept = index.new_slice_memo(g.n_states, side=True)
    states = np.random.default_rng(seed).permutation(g.n_states).tolist()
    for s in states:
        got = token_slices.first_slice(g.trans_flat, s, live, kept, *dfas)
        want = token_slices.first_slice(g.trans_flat, s, live, index.new_slice_memo(g.n_states), *dfas)
        assert got == want, s
    assert kept[1 + n, 0] > 1 and (kept[1:1 + n] <= -5).any()  # steps kept and read back


@pytest.mark.parametrize("family", ["gpt2", "llama3"])
def test_first_slice_shortcuts_drop_no_slice_that_applies(grammar_compiler, family):
    """first_slice skips a slice without walking it where one of its one-byte characters lives and
    a first byte dies, and answers -1 at once from a state with one live byte: the slice found is
    still the first whose limit is above 0 (each slice's own walk, :meth:`TokenSlice.limit`), and
    only a limit of 0 (tokens dead at their first byte) may be dropped."""
    compiler = in_automaton(grammar_compiler, family)
    index = compiler.token_index
    lone_states = 0
    for g in grammars(compiler):
        live = np.ones(g.n_states, np.int8)
        for s in range(g.n_states):
            limits = [sl.limit(g.trans_flat, s, live)[0] for sl in index.token_slices]
            memo = index.new_slice_memo(g.n_states)  # fresh: no state's answer marked by another's walk
            i, k, _ = token_slices.first_slice(g.trans_flat, s, live, memo, *index.default_slices.char_dfas)
            applies = [n for n, lim in enumerate(limits) if lim > 0]
            if applies:
                assert (i, k) == (applies[0], limits[applies[0]]), (g, s, limits)
            else:
                assert i < 0 or (k == 0 and limits[i] == 0), (g, s, limits, i, k)
            lone_states += int((g.trans_flat[s * 256:(s + 1) * 256] >= 0).sum() == 1)
    assert lone_states > 20  # the one-live-byte shortcut was met
