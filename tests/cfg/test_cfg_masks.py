"""Token masks of context-free grammars against a brute-force oracle (issue #4).

The oracle walks every token's bytes through the pushdown matcher itself:
token ``t`` is allowed from state ``S`` iff ``compiled.walk(S, bytes_t)`` is not
None; a stop token iff ``compiled.is_accepting(S)``; a special token (no bytes)
never. It shares nothing with the token index, the frame sorting or the
certain/uncertain split that ``fill_next_token_bitmask`` uses.

Vectorized: ``walk`` is a fold of one-byte steps and configurations are
hashable, so the oracle numbers the configurations it meets and memoizes
``(configuration, byte) -> configuration`` (each pair computed once with
``compiled.walk(S, bytes([b]))``). Every token then advances one column at a
time with numpy gathers, as a lazily built DFA over configurations would. A
random sample of tokens is also walked literally with ``compiled.walk(S,
token_bytes)`` to keep the oracle honest.

States come from seeded random walks (token steps biased towards opening
brackets, so stacks get deep, and single-byte steps that stop inside a
multi-byte UTF-8 character), on the builtin JSON grammar and two recursive
grammars, with Llama-3 (byte-level BPE, 128k) and Llama-2 (SentencePiece byte
fallback, 32k).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leapgen import GrammarCompiler, GrammarMatcher, StackDepthError
from leapgen.grammar.builtin import JSON_GBNF
from tests.cfg.small_grammars import ARITH_GBNF


# A recursive tree: s-expressions whose atoms may hold non-ASCII characters.
TREE_GBNF = r"""
root ::= list
list ::= "(" ( item ( " " item )* )? ")"
item ::= atom | list
atom ::= [a-zé日本語]+ | "\"" [^"\\\n]* "\""
"""

# A recursive tree with fixed keys: much of its text is forced (for the jump-forward property).
KEYS_GBNF = r"""
root ::= node
node ::= "{\"name\": \"" [a-zé]* "\", \"children\": [" ( node ( ", " node )* )? "]}"
"""

# A caller counting calls of a short rule: its count states differ within one token's bytes
# (inside "(a", Llama-3's ")view" returns, then calls four times), so their look-ahead classes must
# tell them apart near the bound; and the two lists' count states call alike but close apart (")]").
COUNTED_CALLS_GBNF = r"""
root ::= "[" item{0,40} "]" | "{" item{0,40} "}"
item ::= [a-z] | "(" item ")"
"""


# A rule that returns after a counted run of letters, into a caller that takes more letters: from inside
# the run, the tokens of more letters than are left go on after the return (a slice's bounded limit at a
# frame that leaves on the tokens' way: uncertain, not dead; accepted, checked from the top two frames).
# Inside a quoted run the letters end before the rule does (a quote first): the tokens of more letters die.
COUNTED_RUN_GBNF = r"""
root ::= run [a-z]* "." | "(" root ")" | "{" quoted [a-z]* "}"
run ::= [a-z]{6} | "<" run ">"
quoted ::= "'" [a-z]{4} "'" | "[" quoted "]"
"""

# Strings beside an enum's trie, its words longer than the free string's bound: one character leads a
# string state to several states (the words it may still spell, and the free count), which the frame
# sorts' slice checks keep per state and reuse (test_token_slices checks what they keep).
ENUM_BESIDE_STRING_GBNF = r"""
root ::= "[" ( item ( "," item )* )? "]"
item ::= "\"" ( "alphabet soup of words" | "alphabet soups" | "gamma ray bursts" | [a-z ]{0,12} ) "\"" | root
"""

GRAMMARS = {"json": JSON_GBNF, "arith": ARITH_GBNF, "tree": TREE_GBNF}
ALL_GRAMMARS = {**GRAMMARS, "keys": KEYS_GBNF, "counted": COUNTED_CALLS_GBNF, "run": COUNTED_RUN_GBNF,
                "enum_string": ENUM_BESIDE_STRING_GBNF}
FAMILIES = ["llama3", "llama2"]  # byte-level BPE; SentencePiece with byte fallback
OPENERS = {"json": b"[{", "arith": b"(", "tree": b"("}

# Walk seeds: a few short text prefixes (fed with accept_string) then random tokens.
PREFIXES = {
    "json": ['{"k": [', '["h\u00e9llo', '[[[[[[[[[[[[', '{"a": {"b": {"c": [1, ', '["\u65e5\u672c'],
    "arith": ["((((", "1 + (2 * (", "-(-(3", "((1.5"],
    "tree": ["(((", "(ab (\u65e5", '("x y" (', "(((((((((("],
}


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


def packed_to_bool(row: np.ndarray, vocab_size: int) -> np.ndarray:
    """bool ``(vocab_size,)`` from one int32 bitmask row."""
    bits = np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(bool)


def matcher_mask(matcher: GrammarMatcher, vocab_size: int) -> np.ndarray:
    words = (vocab_size + 31) // 32
    bm = np.zeros((1, words), np.int32)
    matcher.fill_next_token_bitmask(bm)
    return packed_to_bool(bm[0], vocab_size)


class Oracle:
    """Brute-force masks of one compiled grammar (see the module docstring)."""

    def __init__(self, compiled):
        self.compiled = compiled
        info = compiled.tokenizer_info
        self.vocab_size = info.vocab_size
        self.token_bytes = info.token_bytes
        self.stop_ids = sorted(info.stop_token_ids)
        ids = [i for i, b in enumerate(self.token_bytes) if b and i not in set(self.stop_ids)]
        self.ids = np.array(ids, np.int64)
        lens = np.array([len(self.token_bytes[i]) for i in ids], np.int64)
        order = np.argsort(-lens, kind="stable")  # longest first: column c touches a prefix of the array
        self.ids, lens = self.ids[order], lens[order]
        self.lens = lens
        mat = np.zeros((len(ids), int(lens.max())), np.int64)
        for row, i in enumerate(self.ids.tolist()):
            data = self.token_bytes[i]
            mat[row, :len(data)] = np.frombuffer(data, np.uint8)
        self.columns = [np.ascontiguousarray(mat[:, c]) for c in range(mat.shape[1])]
        self.longer_than = [int(np.count_nonzero(lens > c)) for c in range(mat.shape[1])]
        self.numbers: dict = {}
        self.configs: list = []
        self.trans: dict[int, int] = {}  # (config number << 8 | byte) -> config number or -1

    def number(self, state) -> int:
        k = self.numbers.get(state)
        if k is None:
            k = self.numbers[state] = len(self.configs)
            self.configs.append(state)
        return k

    def _advance(self, keys: np.ndarray) -> np.ndarray:
        uniq, inverse = np.unique(keys, return_inverse=True)
        out = np.empty(len(uniq), np.int64)
        for j, key in enumerate(uniq.tolist()):
            got = self.trans.get(key)
            if got is None:
                nxt = self.compiled.walk(self.configs[key >> 8], bytes((key & 255,)))
                got = self.trans[key] = -1 if nxt is None else self.number(nxt)
            out[j] = got
        return out[inverse]

    def mask(self, state) -> np.ndarray:
        """bool ``(vocab_size,)``: the tokens a brute-force walk allows from ``state``."""
        n = len(self.ids)
        pos = np.arange(n)  # positions (into the length-sorted arrays) of tokens still alive
        cur = np.full(n, self.number(state), np.int64)
        for c, limit in enumerate(self.longer_than):
            k = int(np.searchsorted(pos, limit))  # alive tokens longer than c come first
            if k == 0:
                break
            nxt = self._advance((cur[:k] << 8) | self.columns[c][pos[:k]])
            alive = nxt >= 0
            cur = np.concatenate((nxt[alive], cur[k:]))
            pos = np.concatenate((pos[:k][alive], pos[k:]))
        out = np.zeros(self.vocab_size, bool)
        out[self.ids[pos]] = True
        if self.compiled.is_accepting(state):
            out[self.stop_ids] = True
        return out

    def check_literally(self, state, mask: np.ndarray, rng: random.Random, n: int = 300) -> None:
        """``compiled.walk(state, token_bytes)`` on a sample, straight from the definition."""
        allowed = np.flatnonzero(mask).tolist()
        sample = rng.sample(range(self.vocab_size), min(n, self.vocab_size))
        sample += rng.sample(allowed, min(50, len(allowed)))
        accepting = self.compiled.is_accepting(state)
        for t in sample:
            data = self.token_bytes[t]
            if t in self.stop_ids:
                want = accepting
            else:
                want = bool(data) and self.compiled.walk(state, data) is not None
            assert mask[t] == want, (t, data)


_ORACLES: dict = {}
_COMPILERS: dict = {}


def compiler_for(family: str, **kwargs) -> GrammarCompiler:
    from vocab_loaders import load_tokenizer_info

    key = (family, tuple(sorted(kwargs.items())))
    if key not in _COMPILERS:
        _COMPILERS[key] = GrammarCompiler(load_tokenizer_info(family), **kwargs)
    return _COMPILERS[key]


def oracle_for(family: str, name: str) -> Oracle:
    key = (family, name)
    if key not in _ORACLES:
        _ORACLES[key] = Oracle(compiler_for(family).compile_grammar(ALL_GRAMMARS[name]))
    return _ORACLES[key]


def assert_masks_along(oracle: Oracle, data: bytes) -> np.ndarray:
    """The mask equals the brute force's after every prefix of ``data``, byte by byte (so also
    inside multi-byte characters), and ``data`` completes the grammar; returns the last mask."""
    matcher = GrammarMatcher(oracle.compiled)
    for i in range(len(data) + 1):
        got, want = matcher_mask(matcher, oracle.vocab_size), oracle.mask(matcher.state)
        assert np.array_equal(got, want), f"after {data[:i]!r}"
        if i < len(data):
            assert matcher.accept_string(data[i:i + 1])
    assert matcher.is_completed()
    return want


def stack_depth(compiled, config) -> int:
    """Deepest parse stack of a configuration."""
    return max(compiled.pda.stacks.depth[s] for s in config)


def random_walk_states(oracle: Oracle, name: str, seed: int, steps: int):
    """Yield (description, matcher) along a seeded random walk."""
    rng = random.Random(seed)
    matcher = GrammarMatcher(oracle.compiled)
    prefix = PREFIXES[name][seed % len(PREFIXES[name])]
    assert matcher.accept_string(prefix), prefix
    yield f"prefix {prefix!r}", matcher
    token_bytes = oracle.token_bytes
    openers = OPENERS[name]
    for step in range(steps):
        mask = oracle.mask(matcher.state)
        mask[oracle.stop_ids] = False
        allowed = np.flatnonzero(mask).tolist()
        if not allowed:
            return
        r = rng.random()
        if r < 0.15:
            # one byte of a multi-byte character: the next state stands inside the character
            multi = [t for t in allowed if len(token_bytes[t]) >= 2 and token_bytes[t][0] >= 0xC0]
            if multi:
                data = token_bytes[rng.choice(multi)][:1]
                assert matcher.accept_string(data)
                yield f"step {step}: byte {data!r}", matcher
                continue
        if r < 0.55:
            # drive the nesting deeper: of a sample of tokens holding an opening bracket, the one
            # that leaves the deepest stack
            deeper = [t for t in allowed if any(b in openers for b in token_bytes[t])]
            if deeper:
                sample = rng.sample(deeper, min(48, len(deeper)))
                allowed = [max(sample, key=lambda t: stack_depth(oracle.compiled,
                                                                    oracle.compiled.walk(matcher.state, token_bytes[t])))]
        t = rng.choice(allowed)
        assert matcher.accept_token(t), (t, token_bytes[t])
        yield f"step {step}: token {t} {token_bytes[t]!r}", matcher


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_masks_equal_brute_force_on_random_walks(family, name, seed):
    oracle = oracle_for(family, name)
    rng = random.Random(seed * 7919)
    checked = 0
    for what, matcher in random_walk_states(oracle, name, seed, steps=25):
        want = oracle.mask(matcher.state)
        got = matcher_mask(matcher, oracle.vocab_size)
        if not np.array_equal(got, want):
            extra = np.flatnonzero(got & ~want)[:5].tolist()
            missing = np.flatnonzero(want & ~got)[:5].tolist()
            pytest.fail(f"{family}/{name} at {what}: mask allows {[oracle.token_bytes[t] for t in extra]} "
                        f"it should not, misses {[oracle.token_bytes[t] for t in missing]}")
        if checked % 5 == 0:
            oracle.check_literally(matcher.state, want, rng)
        checked += 1
    assert checked >= 10


def test_mask_inside_a_multibyte_character(family):
    """Half a character: only tokens that finish it (or raw continuation bytes) are allowed."""
    oracle = oracle_for(family, "json")
    matcher = GrammarMatcher(oracle.compiled)
    assert matcher.accept_string('["\u65e5'.encode()[:3])  # '["' and the first byte of U+65E5
    want = oracle.mask(matcher.state)
    got = matcher_mask(matcher, oracle.vocab_size)
    assert np.array_equal(got, want)
    assert want.any()
    for t in np.flatnonzero(got).tolist():
        assert 0x80 <= oracle.token_bytes[t][0] < 0xC0  # every allowed token continues the character
    assert matcher.find_jump_forward_string() == ""


# -- deep nesting -------------------------------------------------------------------------------


def test_depth_1000_json_arrays_accepted_without_recursion_error(family):
    compiled = compiler_for(family).compile_builtin_json_grammar()
    matcher = GrammarMatcher(compiled)
    vocab_size = compiled.tokenizer_info.vocab_size
    assert matcher.accept_string("[" * 1000)
    mask = matcher_mask(matcher, vocab_size)
    oracle = oracle_for(family, "json")
    assert np.array_equal(mask, oracle.mask(matcher.state))
    assert not matcher.is_completed()
    assert matcher.accept_string("]" * 999)
    assert not matcher.is_completed()
    assert matcher.accept_string("]")
    assert matcher.is_completed()
    # an object nest as well, each level with a key
    matcher.reset()
    assert matcher.accept_string('{"a": ' * 1000 + "1" + "}" * 1000)
    assert matcher.is_completed()


def accepts_token(matcher: GrammarMatcher, token_id: int) -> bool:
    """accept_token, with a token refused for the stack depth bound (StackDepthError) as False."""
    try:
        return matcher.accept_token(token_id)
    except StackDepthError:
        return False


@pytest.mark.parametrize("limit", [24, 40])
def test_nesting_beyond_max_stack_depth_is_masked_off(family, limit):
    """Past ``max_stack_depth`` the matcher refuses deeper nesting, and the mask agrees
    with the brute force at every depth on the way (tokens like ``[[[`` included)."""
    compiled = compiler_for(family, max_stack_depth=limit).compile_builtin_json_grammar()
    oracle = Oracle(compiled)
    matcher = GrammarMatcher(compiled)
    opener = compiled.tokenizer_info.token_bytes.index(b"[")
    multi_openers = [t for t, b in enumerate(compiled.tokenizer_info.token_bytes) if len(b) > 1 and set(b) == {0x5B}]
    depth = 0
    while True:
        mask = matcher_mask(matcher, oracle.vocab_size)
        assert np.array_equal(mask, oracle.mask(matcher.state)), f"depth {depth}"
        for t in multi_openers:  # the mask and accept_token agree on "[[", "[[[", ...
            assert mask[t] == accepts_token(matcher.fork(), t), (depth, compiled.tokenizer_info.token_bytes[t])
        if not mask[opener]:
            break
        assert matcher.accept_token(opener)
        depth += 1
        assert depth <= limit
    with pytest.raises(StackDepthError, match=f"max_stack_depth={limit}"):
        matcher.fork().accept_string("[")
    with pytest.raises(StackDepthError):
        matcher.fork().accept_token(opener)
    assert matcher.fork().accept_string("x") is False  # wrong text is still a plain rejection
    assert limit // 2 <= depth <= limit  # nesting is cut near the limit, not far below it
    # what was opened can still be closed
    assert matcher.accept_string("]" * depth)
    assert matcher.is_completed()


def test_masks_near_the_depth_bound_do_not_depend_on_earlier_fills():
    """A pushdown check that met ``max_stack_depth`` (a push cut) holds at its own depth only: a row
    reused from a deeper configuration masked ``[[`` off after ``(`` (found by an adversarial run)."""
    from leapgen.vocab import TokenizerInfo

    vocab = [bytes([b]) for b in range(256)] + [b"[[", b"],", b"[a", b"(("]
    info = TokenizerInfo(vocab, stop_token_ids=[])
    grammar = 'root ::= e\ne ::= t ("+" t)*\nt ::= "a" | "(" e ")" | "[" (e ("," e)*)? "]"\n'
    for deeper in ["[[],(", "[[a],((", "[(", "[a,[", "(a+(", "[[],[", "((a))+[("]:
        fresh = GrammarCompiler(info, max_stack_depth=6).compile_grammar(grammar)
        shared = GrammarCompiler(info, max_stack_depth=6).compile_grammar(grammar)
        warm = GrammarMatcher(shared)
        assert warm.accept_string(deeper)
        matcher_mask(warm, len(vocab))  # the shared grammar fills a row deeper in the nesting first
        for prefix in ["(", "[", "((", "[a,", "(a+"]:
            a, b = GrammarMatcher(fresh), GrammarMatcher(shared)
            assert a.accept_string(prefix) and b.accept_string(prefix)
            mask = matcher_mask(b, len(vocab))
            assert np.array_equal(mask, matcher_mask(a, len(vocab))), (deeper, prefix)
            oracle = Oracle(shared)
            assert np.array_equal(mask, oracle.mask(b.state)), (deeper, prefix)


def test_right_recursion_keeps_a_constant_depth(family):
    """A tail call pushes no frame: 10,000 items of a right-recursive list are fine."""
    compiled = compiler_for(family, max_stack_depth=64).compile_grammar(
        'root ::= "[" items "]"\nitems ::= "x" ( "," items )?')
    matcher = GrammarMatcher(compiled)
    assert matcher.accept_string("[" + ",".join(["x"] * 10_000))
    assert matcher.accept_string("]")
    assert matcher.is_completed()
    assert max(compiled.pda.stacks.depth[s] for s in compiled.walk(compiled.start_state, b"[x,x,x,x,x")) <= 2


# -- matcher properties -----------------------------------------------------------------------


def _allowed_ids(oracle: Oracle, matcher: GrammarMatcher) -> list[int]:
    mask = matcher_mask(matcher, oracle.vocab_size)
    mask[oracle.stop_ids] = False
    return np.flatnonzero(mask).tolist()


PROPERTY_SETTINGS = settings(max_examples=15, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@PROPERTY_SETTINGS
@given(data=st.data())
def test_rollback_restores_masks(name, data):
    oracle = oracle_for("llama3", name)
    matcher = GrammarMatcher(oracle.compiled)
    masks = [matcher_mask(matcher, oracle.vocab_size)]
    states = [matcher.state]
    for _ in range(data.draw(st.integers(1, 12), label="steps")):
        allowed = _allowed_ids(oracle, matcher)
        if not allowed:
            break
        t = allowed[data.draw(st.integers(0, len(allowed) - 1), label="token")]
        assert matcher.accept_token(t)
        masks.append(matcher_mask(matcher, oracle.vocab_size))
        states.append(matcher.state)
    k = data.draw(st.integers(0, len(masks) - 1), label="rollback")
    matcher.rollback(k)
    assert matcher.num_accepted_tokens == len(masks) - 1 - k
    assert matcher.state == states[-1 - k]
    assert np.array_equal(matcher_mask(matcher, oracle.vocab_size), masks[-1 - k])


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@PROPERTY_SETTINGS
@given(data=st.data())
def test_fork_is_independent(name, data):
    oracle = oracle_for("llama3", name)
    matcher = GrammarMatcher(oracle.compiled)

    def advance(m, n, label):
        for _ in range(n):
            allowed = _allowed_ids(oracle, m)
            if not allowed:
                return
            assert m.accept_token(allowed[data.draw(st.integers(0, len(allowed) - 1), label=label)])

    advance(matcher, data.draw(st.integers(0, 6)), "prefix")
    before_state, before_mask = matcher.state, matcher_mask(matcher, oracle.vocab_size)
    before_n = matcher.num_accepted_tokens
    other = matcher.fork()
    advance(other, data.draw(st.integers(1, 6)), "fork")
    other.rollback(other.num_accepted_tokens - before_n)
    advance(other, 2, "fork again")
    assert matcher.state == before_state
    assert matcher.num_accepted_tokens == before_n
    assert np.array_equal(matcher_mask(matcher, oracle.vocab_size), before_mask)
    fork_state, fork_n = other.state, other.num_accepted_tokens
    advance(matcher, 3, "original")
    assert other.state == fork_state and other.num_accepted_tokens == fork_n


@pytest.mark.parametrize("name", sorted(ALL_GRAMMARS))
@PROPERTY_SETTINGS
@given(data=st.data())
def test_jump_forward_string_is_always_accepted(name, data):
    oracle = oracle_for("llama3", name)
    matcher = GrammarMatcher(oracle.compiled)
    for _ in range(data.draw(st.integers(0, 15), label="steps")):
        forced = matcher.find_jump_forward_string()
        probe = matcher.fork()
        assert probe.accept_string(forced), forced
        if forced:
            # forced means forced: every token the brute force allows agrees with the forced text
            # as far as both go, and the grammar may not end before it
            data_forced = forced.encode()
            mask = oracle.mask(matcher.state)
            assert not mask[oracle.stop_ids].any()
            for t in np.flatnonzero(mask).tolist():
                tb = oracle.token_bytes[t]
                assert tb[:len(data_forced)] == data_forced[:len(tb)], (forced, tb)
            if data.draw(st.booleans(), label="take it"):
                assert matcher.accept_string(forced)
                continue
        allowed = _allowed_ids(oracle, matcher)
        if not allowed:
            break
        assert matcher.accept_token(allowed[data.draw(st.integers(0, len(allowed) - 1), label="token")])


NESTED_DOC = ('{"id": 7, "tags": ["a", "\u00e9t\u00e9", "\u65e5\u672c\u8a9e"], "m": [[1, -2.5e+3], {"k": '
              '[{"x": [[[null]]]}, true]}], "s": "q\\"\\u00e9\\n", "e": {}}')


def test_masks_equal_brute_force_along_a_nested_document(family):
    """Every prefix of a nested document, byte by byte (so also inside multi-byte characters)."""
    oracle = oracle_for(family, "json")
    want = assert_masks_along(oracle, NESTED_DOC.encode())
    assert want[sorted(oracle.stop_ids)].all()


def test_frame_sort_looks_past_the_rule_into_its_callers(grammar_compiler):
    """Context expansion: inside a JSON string the stack below is unknown, but no caller of a
    string accepts ``;`` after it, so ``"];`` is rejected once per frame; ``",`` and ``"]`` depend
    on the caller and are left to the per-configuration check; neither is certain."""
    compiled = grammar_compiler("llama3").compile_builtin_json_grammar()
    token_bytes = compiled.tokenizer_info.token_bytes
    ids = {b: token_bytes.index(b) for b in (b'"];', b'",', b'"]', b"abc")}
    config = compiled.walk(compiled.start_state, b'["x')
    (frame,) = compiled.expansion(config)[0]
    sort = compiled.frame_tokens(*compiled.pda.rule_state(compiled.pda.stacks.top[frame]))
    bit = lambda words, t: bool((int(words[t >> 5]) >> (t & 31)) & 1)  # noqa: E731
    assert not bit(sort.certain, ids[b'"];']) and not bit(sort.uncertain, ids[b'"];'])
    for t in (b'",', b'"]'):
        assert bit(sort.uncertain, ids[t]) and not bit(sort.certain, ids[t])
    assert bit(sort.certain, ids[b"abc"])
    row = compiled.bitmask_row(config)[0].view(np.uint32)  # in an array: "] closes it, ", goes on
    assert bit(row, ids[b'",']) and bit(row, ids[b'"]']) and not bit(row, ids[b'"];'])


# A string over JSON Schema's exact-length bound: block-rule calls counted in the caller (see
# leapgen.grammar.json.lengths), whose count states the mask cache keys by look-ahead class
# (leapgen.automata.pda_classes): one check walked at a block's end is reused at the next ones,
# never at the last block, where the bound cuts long tokens off.
LONG_STRING_SCHEMAS = [
    {"type": "object", "properties": {"s": {"type": "string", "maxLength": 4 * 128 + 10}, "n": {"type": "integer"}},
     "required": ["s", "n"], "additionalProperties": False},
    {"type": "array", "items": {"type": "string", "minLength": 2 * 128 + 100, "maxLength": 5 * 128 + 3}},
]


@pytest.mark.parametrize("count_lengths", [False, True], ids=["blocks", "counted"])
@pytest.mark.parametrize("schema", LONG_STRING_SCHEMAS, ids=["object-max", "array-min-max"])
def test_masks_equal_brute_force_across_long_string_blocks(schema, count_lengths):
    """The blocks (what a context-free schema or ``count_lengths=False`` gets) and the counted
    region (a regular schema's, leapgen.compiler.compiled_counted) against the brute force."""
    from leapgen.compiler.compiled_counted import CountedGrammar
    from leapgen.grammar.json.lengths import BLOCK_LENGTH

    compiled = compiler_for("llama3", count_lengths=count_lengths).compile_json_schema(json.dumps(schema))
    assert isinstance(compiled, CountedGrammar) == count_lengths and not compiled.is_regular
    oracle = Oracle(compiled)
    matcher = GrammarMatcher(compiled)
    opener = '{"s": "' if schema["type"] == "object" else '["'
    assert matcher.accept_string(opener)
    unit = "ab\u00e9cd\u65e5fg"  # 8 characters, 12 bytes: positions inside multi-byte characters too
    hi = max(s.get("maxLength", 0) for s in _strings(schema))
    checked = 0
    for n in range(hi + 1):
        data = unit[n % len(unit)].encode()
        near_end = n % BLOCK_LENGTH >= BLOCK_LENGTH - 6 or n % BLOCK_LENGTH <= 1 or n >= hi - 4
        for k in range(len(data)):
            if near_end or k:
                got, want = matcher_mask(matcher, oracle.vocab_size), oracle.mask(matcher.state)
                assert np.array_equal(got, want), f"after {n} characters and {k} bytes"
                checked += 1
            if n < hi:
                assert matcher.accept_string(data[k:k + 1])
    assert checked > 100
    assert not matcher.accept_string(b"x")  # past maxLength


def _strings(schema):
    if schema["type"] == "string":
        yield schema
    for sub in [*schema.get("properties", {}).values(), *([schema["items"]] if "items" in schema else [])]:
        yield from _strings(sub)


@pytest.mark.parametrize("opener,closer", [("[", "]"), ("{", "}")])
def test_masks_equal_brute_force_along_counted_calls_of_a_short_rule(opener, closer):
    oracle = oracle_for("llama3", "counted")  # one grammar for both lists: its mask cache is shared
    assert_masks_along(oracle, (opener + "(a)" * 3 + "x" * 30 + "(a)" * 6 + "x" + closer).encode())


def test_block_end_checks_are_walked_once_not_once_per_block(monkeypatch):
    """A string shorter than a block never pushes a block frame (the first block is counted in the
    caller). Past it, the check at a position near a block's end reads the caller's count state;
    keyed by its look-ahead class, the walks of the first called block's end serve the next ones."""
    from leapgen.grammar.json.lengths import BLOCK_LENGTH

    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 32767}}, "required": ["s"]}
    compiled = compiler_for("llama3", count_lengths=False).compile_json_schema(json.dumps(schema))
    walks = []
    walk = compiled.token_index.pushdown_walk
    monkeypatch.setattr(compiled.token_index, "pushdown_walk", lambda *a, **k: walks.append(1) or walk(*a, **k))
    matcher = GrammarMatcher(compiled)
    assert matcher.accept_string('{"s": "')
    per_block, depths = [], []
    for _ in range(4):
        walks.clear()
        for _ in range(BLOCK_LENGTH):
            matcher_mask(matcher, compiled.tokenizer_info.vocab_size)
            assert matcher.accept_string("a")
            depths.append(stack_depth(compiled, matcher.state))
        per_block.append(len(walks))
    assert max(depths[:BLOCK_LENGTH - 1]) == 1, "a block frame pushed inside the first block"
    assert per_block[1] > 0 and per_block[2:] == [0, 0], per_block


@pytest.mark.parametrize("doc", ["abcdefghijklmnop.", "<<abcdef>>qrstuvwxyz.", "((abcdefg.))", "{[['abcd']]xyz}"])
def test_masks_equal_brute_force_inside_a_counted_run_that_returns(doc):
    oracle = oracle_for("llama3", "run")
    assert_masks_along(oracle, doc.encode())


@pytest.mark.parametrize("doc", ['["alphabet soup of words","gamma ray",["beta","alphabet soups"]]',
                                 '[["gamma ray bursts"],"alp","betamax and"]'])
def test_masks_equal_brute_force_in_strings_beside_an_enum(doc):
    oracle = oracle_for("llama3", "enum_string")  # one grammar: the slice checks' memo is shared
    assert_masks_along(oracle, doc.encode())
