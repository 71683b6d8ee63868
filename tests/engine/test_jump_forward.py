"""Jump-forward on a toy vocabulary (no model): retokenization, the matcher
moved onto the new ids, and the restore path when they are rejected."""

import pytest

from leapgen import GrammarMatcher
from leapgen.engine.jump_forward import common_prefix_length, try_jump_forward
from leapgen.engine.request import Request

REGEX = r'\{"name": "[a-z]+", "n": [0-9]+\}'


@pytest.fixture
def vocab(toy_info):
    """token bytes -> id of the toy vocabulary (first id wins)."""
    table = {}
    for i, b in enumerate(toy_info.token_bytes):
        if b and i not in toy_info.special_token_ids:
            table.setdefault(b, i)
    return table


@pytest.fixture
def encode(vocab):
    """A deterministic tokenizer: greedy longest match over the toy vocabulary."""
    longest = max(len(b) for b in vocab)

    def _encode(text):
        data, ids, i = text.encode(), [], 0
        while i < len(data):
            for n in range(min(longest, len(data) - i), 0, -1):
                if data[i : i + n] in vocab:
                    ids.append(vocab[data[i : i + n]])
                    i += n
                    break
        return ids

    return _encode


@pytest.fixture
def matcher(toy_compiler):
    return GrammarMatcher(toy_compiler.compile_regex(REGEX))


def _accept(m, ids):
    for t in ids:
        assert m.accept_token(t)


def test_common_prefix_length():
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_length([1, 2], [1, 2, 3]) == 2


def test_forced_text_at_the_start(matcher, encode):
    jump = try_jump_forward(matcher, [], "", encode, max_tokens=100)
    assert jump.forced_text == '{"name": "'
    assert jump.common_prefix == 0
    assert jump.new_ids == encode('{"name": "')
    assert matcher.num_accepted_tokens == len(jump.new_ids)
    assert matcher.find_jump_forward_string() == ""  # now free text


def test_retokenization_merges_across_the_boundary(matcher, encode, vocab):
    old = [vocab[b"{"]]  # sampled as a single byte; '{"' is one token
    _accept(matcher, old)
    jump = try_jump_forward(matcher, old, "{", encode, max_tokens=100)
    assert jump.new_ids[0] == vocab[b'{"'] and jump.common_prefix == 0
    # The matcher stands after the whole forced text.
    assert matcher.num_accepted_tokens == len(jump.new_ids)
    assert matcher.accept_token(vocab[b"cat"])


def test_keeps_the_common_prefix(matcher, encode, vocab):
    old = encode('{"name": "cat')
    _accept(matcher, old)
    assert matcher.accept_token(vocab[b'"'])
    old = old + [vocab[b'"']]
    jump = try_jump_forward(matcher, old, '{"name": "cat"', encode, max_tokens=100)
    assert jump.forced_text == ', "n": '
    assert jump.new_ids == encode('{"name": "cat", "n": ')
    assert jump.new_ids[: jump.common_prefix] == old[: jump.common_prefix]
    assert jump.common_prefix == common_prefix_length(old, jump.new_ids)


def test_nothing_forced_returns_none(matcher, encode):
    _accept(matcher, encode('{"name": "'))
    before = matcher.num_accepted_tokens
    assert try_jump_forward(matcher, encode('{"name": "'), '{"name": "', encode, max_tokens=100) is None
    assert matcher.num_accepted_tokens == before


def test_forced_text_shorter_than_min_chars_is_not_jumped(matcher, encode, vocab):
    """``min_chars``: ``{"name": "`` (10 characters) is jumped at 10 and not at 11; after the
    name and its quote, ``, "n": `` (7 characters) at 7 and not at 8."""
    assert try_jump_forward(matcher, [], "", encode, max_tokens=100, min_chars=11) is None
    assert matcher.num_accepted_tokens == 0
    assert try_jump_forward(matcher, [], "", encode, max_tokens=100, min_chars=10).forced_text == '{"name": "'
    _accept(matcher, [vocab[b"cat"]])
    text = '{"name": "cat'
    ids = encode('{"name": "') + [vocab[b"cat"]]
    assert matcher.find_jump_forward_string() == ""  # a name may go on: nothing forced yet
    assert matcher.accept_token(vocab[b'"'])
    ids, text = ids + [vocab[b'"']], text + '"'
    assert try_jump_forward(matcher, ids, text, encode, max_tokens=100, min_chars=8) is None  # ', "n": ' is 7
    assert try_jump_forward(matcher, ids, text, encode, max_tokens=100, min_chars=7).forced_text == ', "n": '


def test_max_tokens_cuts_the_new_output(matcher, encode):
    jump = try_jump_forward(matcher, [], "", encode, max_tokens=2)
    assert jump.new_ids == encode('{"name": "')[:2]
    assert matcher.num_accepted_tokens == 2


def test_rejected_retokenization_restores_the_matcher(matcher, encode, vocab):
    old = encode('{"name": "cat"')
    _accept(matcher, old)
    state, n = matcher.state, matcher.num_accepted_tokens

    def bad_encode(text):  # a tokenizer that disagrees with the grammar
        return encode(text)[:-1] + [vocab[b"x"]]

    assert try_jump_forward(matcher, old, '{"name": "cat"', bad_encode, max_tokens=100) is None
    assert matcher.state == state and matcher.num_accepted_tokens == n
    assert matcher.find_jump_forward_string() == ', "n": '


def test_request_bookkeeping_after_a_jump():
    req = Request(request_id=0, prompt="p", prompt_ids=[7, 8, 9], params=None,
                  stop_token_ids=frozenset(), generator=None)
    assert req.pending_ids == [7, 8, 9]
    # A jump before the prefill: nothing cached, nothing to crop.
    assert req.replace_output([1, 2], 0) == 0
    assert req.pending_ids == [7, 8, 9, 1, 2] and req.sampled == [False, False]
    req.num_cached = 5          # prefill done
    req.append_sampled(3)       # sampled, not yet fed
    req.append_sampled(4)
    req.num_cached = 6          # token 3 fed
    assert req.pending_ids == [4]
    # Retokenized: common prefix 3 (ids 1, 2, 3), new ids 5, 6.
    keep = req.replace_output([1, 2, 3, 5, 6], 3)
    assert keep == 6 and req.num_cached == 6
    assert req.pending_ids == [5, 6]
    assert req.sampled == [False, False, True, False, False]
    # A deeper rewrite drops cached output tokens past the common prefix.
    assert req.replace_output([1, 9], 1) == 4
    assert req.pending_ids == [9]
    assert req.sampled == [False, False]


# --- token healing: hold back a forced token a longer allowed token extends ---

@pytest.fixture
def healing(toy_info):
    from leapgen.engine.token_healing import TokenHealing

    return TokenHealing(toy_info.token_bytes, toy_info.special_token_ids)


def test_extensions_are_the_strictly_longer_tokens(healing, vocab):
    assert set(healing.extensions(vocab[b"ab"]).tolist()) == {vocab[b"abc"]}
    assert set(healing.extensions(vocab[b"12"]).tolist()) == {vocab[b"123"]}
    assert healing.extensions(vocab[b"abc"]).size == 0


def test_healing_holds_back_a_token_the_grammar_lets_grow(toy_compiler, encode, vocab, healing):
    m = GrammarMatcher(toy_compiler.compile_regex("xyab(c|d)"))
    jump = try_jump_forward(m, [], "", encode, max_tokens=100, healing=healing)
    assert encode("xyab") == [vocab[b"x"], vocab[b"y"], vocab[b"ab"]]
    assert jump.new_ids == [vocab[b"x"], vocab[b"y"]]  # "ab" held back: "abc" may follow
    assert m.num_accepted_tokens == 2
    assert m.accept_token(vocab[b"abc"])


def test_healing_keeps_a_token_no_allowed_token_extends(toy_compiler, encode, vocab, healing):
    m = GrammarMatcher(toy_compiler.compile_regex("xyabd"))
    jump = try_jump_forward(m, [], "", encode, max_tokens=100, healing=healing)
    assert jump.new_ids == [vocab[b"x"], vocab[b"y"], vocab[b"ab"], vocab[b"d"]]
    m2 = GrammarMatcher(toy_compiler.compile_regex("xyab(d|e)"))
    jump = try_jump_forward(m2, [], "", encode, max_tokens=100, healing=healing)
    assert jump.new_ids == [vocab[b"x"], vocab[b"y"], vocab[b"ab"]]  # "abc" exists but is not allowed
    assert m2.num_accepted_tokens == 3


def test_healing_of_the_only_forced_token_leaves_the_matcher_as_it_was(toy_compiler, encode, vocab, healing):
    m = GrammarMatcher(toy_compiler.compile_regex("x(ab)(c|d)"))
    assert m.accept_token(vocab[b"x"])
    assert try_jump_forward(m, [vocab[b"x"]], "x", encode, max_tokens=100, healing=healing) is None
    assert m.num_accepted_tokens == 1
    assert m.accept_token(vocab[b"abc"])
