"""String lengths counted at run time (leapgen.automata.counted, leapgen.compiler.compiled_counted).

A JSON Schema string with a long minLength/maxLength compiles to a CountedGrammar: one character
in a loop, the count kept beside the DFA state. Checked here against what the same schema gives
with the lengths in the automaton (``count_lengths=False``, the path the oracle suites check):
every mask, verdict and forced string along random walks; against ``jsonschema`` on the lengths
themselves; and the fallbacks (regions the automaton cannot follow, context-free grammars).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from leapgen import GrammarCompiler, GrammarMatcher, allocate_token_bitmask
from leapgen.errors import GrammarError
from leapgen.compiler.compiled_counted import CountedGrammar

jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = [
    {"type": "object", "additionalProperties": False, "required": ["a", "b"],
     "properties": {"a": {"type": "string", "maxLength": 40}, "b": {"type": "string", "minLength": 35},
                    "c": {"type": "string", "minLength": 1, "maxLength": 60},
                    "d": {"type": ["string", "null"], "maxLength": 300}}},
    {"type": "array", "maxItems": 3, "items": {"type": "string", "minLength": 33, "maxLength": 34}},
    {"type": "string", "minLength": 32, "maxLength": 33},
    {"type": "object", "additionalProperties": False, "required": ["id", "tag"],  # a pattern's class counted
     "properties": {"id": {"type": "string", "pattern": "^[0-9a-f]*$", "minLength": 32, "maxLength": 40},
                    "tag": {"type": "string", "pattern": "^[a-z0-9-]{3,}$", "maxLength": 63}}},
]


@pytest.fixture(scope="module", params=["gpt2", "llama3"])
def compilers(request, grammar_compiler):
    counted = grammar_compiler(request.param)
    plain = GrammarCompiler(counted.tokenizer_info, count_lengths=False, token_index=counted.token_index, warm_up=False)
    return counted, plain


def _bits(matcher: GrammarMatcher, vocab_size: int) -> np.ndarray:
    mask = allocate_token_bitmask(1, vocab_size).numpy()
    matcher.fill_next_token_bitmask(mask, 0)
    return np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_counted_masks_equal_the_lengths_written_out(compilers, index):
    """Random walks (tokens drawn from the mask, half of them the longest allowed, so that strings
    reach their bounds): the counted grammar's masks, verdicts, completion and jump-forward strings
    equal those of the same schema with the lengths in the automaton."""
    counted, plain = compilers
    schema = SCHEMAS[index]
    g = counted.compile_json_schema(schema, any_whitespace=False)
    h = plain.compile_json_schema(schema, any_whitespace=False)
    assert isinstance(g, CountedGrammar) and not isinstance(h, CountedGrammar)
    assert g.n_states < h.n_states / 4
    info = g.tokenizer_info
    lengths = np.array([len(b) for b in info.token_bytes])
    rng = random.Random(index)
    near_bound = 0
    for _ in range(12):
        mg, mh = GrammarMatcher(g), GrammarMatcher(h)
        for _ in range(120):
            key = g.row_key(mg.state)
            near_bound += key[1] > 0 or key[2] < g._horizon
            got, want = _bits(mg, info.vocab_size), _bits(mh, info.vocab_size)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, [(int(t), info.token_bytes[t], bool(got[t])) for t in bad[:5]]
            assert mg.find_jump_forward_string() == mh.find_jump_forward_string()
            assert mg.is_completed() == mh.is_completed()
            allowed = np.flatnonzero(want & (lengths > 0))
            if not len(allowed):
                break
            t = int(allowed[np.argmax(lengths[allowed])]) if rng.random() < 0.5 else int(rng.choice(allowed))
            rejected = int(rng.choice(np.flatnonzero(~want & (lengths > 0))))
            assert mg.accept_token(rejected) is False and mh.accept_token(rejected) is False
            assert mg.accept_token(t) and mh.accept_token(t)
    assert near_bound > 20  # the walks reached the bounds, where counts decide


@pytest.mark.parametrize("lo, hi", [(0, 40), (35, None), (33, 34), (1, 300), (300, 310)])
def test_counted_lengths_agree_with_jsonschema(grammar_compiler, lo, hi):
    """Strings around both bounds, in several spellings (escapes, multi-byte, surrogate pairs count
    one character each): accepted exactly when jsonschema validates them."""
    schema = {"type": "string", "minLength": lo} | ({} if hi is None else {"maxLength": hi})
    compiled = grammar_compiler("llama3").compile_json_schema(schema, any_whitespace=False)
    assert isinstance(compiled, CountedGrammar)
    validator = jsonschema.Draft202012Validator(schema)
    for n in sorted({0, 1, lo - 1, lo, lo + 1, (hi or lo + 5) - 1, hi or lo + 5, (hi or lo + 5) + 1}):
        if n < 0:
            continue
        for unit in ("a", "é", "\U0001F600", "\n", '"'):
            text = unit * n
            for doc in {json.dumps(text), json.dumps(text, ensure_ascii=False)}:
                m = GrammarMatcher(compiled)
                ok = m.accept_string(doc) and m.is_completed()
                assert ok == validator.is_valid(text), (n, unit, doc[:20])


@pytest.mark.parametrize("pattern, lo, hi", [("^[a-z0-9-]+$", 0, 63), ("^[0-9a-f]*$", 32, 32),
                                             ("^[A-Za-z0-9_@-]{3,}$", 0, 250), ("^[^/]+$", 40, 300)])
def test_pattern_classes_counted_agree_with_jsonschema(grammar_compiler, pattern, lo, hi):
    """A pattern of one character class over the whole string, beside long lengths: counted (the
    class is the counted item), and each string around the bounds, inside and outside the class, is
    accepted exactly when jsonschema validates it. A bound past 256 is enforced too (it was cut,
    with a warning, when the lengths and the pattern were intersected)."""
    schema = {"type": "string", "pattern": pattern, "minLength": lo, "maxLength": hi}
    compiled = grammar_compiler("llama3").compile_json_schema(schema, any_whitespace=False)
    assert isinstance(compiled, CountedGrammar) and not compiled.warnings
    validator = jsonschema.Draft202012Validator(schema, format_checker=None)
    for n in sorted({0, 1, 3, lo - 1, lo, lo + 1, hi - 1, hi, hi + 1}):
        for unit in ("a", "0", "Z", "_", "@", "/", "é", '"'):
            text = unit * max(n, 0)
            doc = json.dumps(text, ensure_ascii=False)
            m = GrammarMatcher(compiled)
            ok = m.accept_string(doc) and m.is_completed()
            assert ok == validator.is_valid(text), (pattern, n, unit)


def test_pattern_classes_in_context_free_schemas_are_written_out(compilers):
    """A recursive schema keeps no counter: a pattern's class with its lengths is written out as
    without counting, the bound past 256 cut with the same warning."""
    counted, plain = compilers
    for hi in (63, 300):
        schema = {"type": "object", "required": ["name"],
                  "properties": {"name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": hi}, "rest": {}}}
        g = counted.compile_json_schema(schema, any_whitespace=False)
        h = plain.compile_json_schema(schema, any_whitespace=False)
        assert not g.is_regular and not isinstance(g, CountedGrammar) and g.warnings == h.warnings
        assert bool(g.warnings) == (hi > 256)
        for n in (hi, hi + 1):
            doc = '{"name":"' + "a" * n + '"}'
            mg, mh = GrammarMatcher(g), GrammarMatcher(h)
            assert (mg.accept_string(doc) and mg.is_completed()) == (mh.accept_string(doc) and mh.is_completed())


@pytest.mark.parametrize("bound", [{"maxLength": 2**63}, {"minLength": 2**63}, {"maxLength": 2**64 + 5}])
def test_bounds_past_a_count_fall_back_to_what_a_compile_without_counting_gives(compilers, bound):
    """A bound no int64 count holds is written out as without counting (here: past the state limit,
    the same clean error), never an overflow."""
    counted, plain = compilers
    schema = {"type": "string", **bound}
    with pytest.raises(GrammarError) as without:
        plain.compile_json_schema(schema, any_whitespace=False)
    with pytest.raises(GrammarError) as got:
        counted.compile_json_schema(schema, any_whitespace=False)
    assert type(got.value) is type(without.value)


def test_the_longest_tokens_are_the_first_rows(grammar_compiler):
    """The count's check walks the tokens longer than the room left as the first rows of the
    vocabulary's byte matrix: exactly those, for every room."""
    compiled = grammar_compiler("llama3").compile_json_schema({"type": "string", "maxLength": 50})
    index = compiled.token_index
    _, lengths, row_of_id, id_of_row = index.token_rows()
    np.testing.assert_array_equal(row_of_id[id_of_row], np.arange(len(id_of_row)))
    by_id = [len(b) for b in compiled.tokenizer_info.token_bytes]
    for room in (0, 1, 2, 7, 33, 127, 128, 10_000):
        n = index.rows_longer_than(room)
        assert n == sum(length > room for t, length in enumerate(by_id) if row_of_id[t] >= 0)
        assert (lengths[:n] > room).all() and (lengths[n:] <= room).all()


def test_count_refuses_the_character_past_max_and_forces_the_quote(grammar_compiler):
    """At maxLength the only way on is the closing quote: no token holding another character is
    allowed, and jump-forward forces it."""
    compiled = grammar_compiler("llama3").compile_json_schema({"type": "string", "maxLength": 50},
                                                              any_whitespace=False)
    m = GrammarMatcher(compiled)
    assert m.accept_string('"' + "x" * 50)
    bits = _bits(m, compiled.tokenizer_info.vocab_size)
    allowed = [compiled.tokenizer_info.token_bytes[t] for t in np.flatnonzero(bits)]
    assert allowed and all(b.startswith(b'"') for b in allowed)
    assert m.find_jump_forward_string() == '"'


def test_regions_the_automaton_cannot_follow_fall_back(compilers):
    """Two bounded strings one DFA state cannot tell apart (anyOf), and a bounded string inside a
    difference (an excluded enum value): compiled with the lengths written out, the same masks."""
    counted, plain = compilers
    for schema in ({"anyOf": [{"type": "string", "maxLength": 40}, {"type": "string", "minLength": 50}]},
                   {"type": "string", "maxLength": 40, "not": {"enum": ["abc"]}}):
        g = counted.compile_json_schema(schema, any_whitespace=False)
        h = plain.compile_json_schema(schema, any_whitespace=False)
        assert not isinstance(g, CountedGrammar) and g.n_states == h.n_states
        m = GrammarMatcher(g)
        assert m.accept_string('"' + "y" * 40 + '"') and m.is_completed()


def test_context_free_schemas_write_lengths_out(compilers):
    """A recursive schema keeps no counter: the same context-free grammar as without counting."""
    counted, plain = compilers
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 100}, "rest": {}},
              "required": ["name"]}
    g = counted.compile_json_schema(schema, any_whitespace=False)
    h = plain.compile_json_schema(schema, any_whitespace=False)
    assert type(g) is type(h) and not g.is_regular and g.n_states == h.n_states


@pytest.mark.parametrize("schema", [{"type": "string", "minLength": 36, "maxLength": 36},
                                    {"type": "string", "pattern": "^[0-9a-f-]*$", "maxLength": 40},
                                    {"type": "string", "maxLength": 60}])
def test_rows_near_max_walked_over_the_trie_equal_the_token_walk(grammar_compiler, schema, monkeypatch):
    """Near ``hi`` most tokens are longer than the room left: the row is walked over the vocabulary's
    trie there (the prefixes alive) instead of token by token. Both walks give every row of every
    count, with the room from 0 to 40 characters and characters of 1 to 3 bytes."""
    compiled = grammar_compiler("llama3").compile_json_schema(schema, any_whitespace=False)
    assert isinstance(compiled, CountedGrammar)
    hi = max(compiled._hi)
    texts = ['"' + "a" * n for n in range(hi + 1)] + ['"' + "é" * n for n in range(0, hi + 1, 7)]
    texts += ['"' + "日" * n for n in range(0, hi + 1, 5)]
    states = {compiled.walk(compiled.start_state, t.encode()) for t in texts} - {None}
    assert len(states) > hi // 2
    trie_walks = 0
    compiler = grammar_compiler("llama3")
    for state in states:
        rows = {}
        for trie in (True, False):
            monkeypatch.setattr(CountedGrammar, "_trie_walk_pays", lambda self, q, c, tokens, trie=trie: trie)
            fresh = compiler.bind(compiled.stored_automaton, kind=compiled.kind)  # no row cached yet
            rows[trie] = fresh.bitmask_row(state)[0]
        monkeypatch.undo()
        assert np.array_equal(rows[True], rows[False]), state
        q, c = state
        n_long = compiled._candidates(q, c)[0]
        trie_walks += bool(n_long) and compiled._trie_walk_pays(q, c, n_long)
    assert trie_walks >= 4  # the rooms of a few characters take the trie


def test_rows_near_max_without_the_trie_kernels(grammar_compiler):
    """Without numba the index has no trie: a row near ``hi`` is walked token by token, and equals the
    one the trie walk gives."""
    from leapgen.compiler.token_index import TokenIndex

    info = grammar_compiler("gpt2").tokenizer_info
    schema = {"type": "string", "minLength": 36, "maxLength": 36}
    plain = GrammarCompiler(info, token_index=TokenIndex(info, use_trie=False), warm_up=False)
    fast = grammar_compiler("gpt2")
    for n in (30, 33, 35, 36):
        got = [_bits_after(c.compile_json_schema(schema, any_whitespace=False), '"' + "a" * n, info.vocab_size)
               for c in (plain, fast)]
        assert np.array_equal(got[0], got[1]), n


def _bits_after(compiled, text: str, vocab_size: int) -> np.ndarray:
    m = GrammarMatcher(compiled)
    assert m.accept_string(text)
    return _bits(m, vocab_size)
