"""GrammarMatcher / BatchGrammarMatcher behaviour, run on xgrammar and on leapgen.xgrammar.

Ported (rewritten on our own vocabularies and grammars) from the engine-facing
parts of xgrammar's ``tests/python/test_grammar_matcher_basic.py``: accepting
strings and bytes, masks along a token sequence, rollback, graceful rejection,
reset, termination, ``is_completed`` with and without
``terminate_without_stop_token``, overridden stop tokens, jump-forward
strings, padded vocabularies, fork; from ``test_speculative_decoding.py``:
``traverse_draft_tree``; and the batch verbs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from xgr_pair import allowed, mask_of, matcher_for

VOCAB = ["<s>", "</s>", "a", "abc", 'b"', '"', ':"', "{", "}", ", ", "6", ":", "\n", " ", '"a":true', "6:", " }"]
JSON_TEXT = ["{", '"', "abc", 'b"', ":", "6", ", ", " ", '"a":true', "}"]


def _json_matcher(xgr, **kwargs):
    return matcher_for(xgr, xgr.Grammar.builtin_json_grammar(), VOCAB, **kwargs)


@pytest.mark.parametrize("grammar, text, accepted", [
    ("root ::= [^a]+", "bbb", True),
    ("root ::= [^a]+", "bba", False),
    ("root ::= [^a]+", "\u00a9", True),
    ("root ::= [^a]+", b"\xe2\xa1\xa1", True),  # one three-byte character, as bytes
    ("root ::= [^a]+", b"\xe2\xa1\xa1\xa1", False),  # a stray continuation byte
    ("root ::= [^a]+", b"\xe2\xa1\xe2\xa1", False),  # a character cut short
    ('root ::= "x" [0-9]{2,3}', "x12", True),
    ('root ::= "x" [0-9]{2,3}', "x1234", False),
])
def test_accept_string_and_bytes(xgr, grammar, text, accepted):
    assert matcher_for(xgr, grammar, VOCAB).accept_string(text) is accepted


@pytest.mark.parametrize("text, ok", [('{"name": "John"}', True), ('{ "name" : "John" }', True),
                                      ('{ name: "John" }', False), ('[1, 2.5, -3e2, true, null]', True),
                                      ('{"a": [ ]}', True), ('{"a": 01}', False)])
def test_builtin_json_verdicts(xgr, text, ok):
    m = _json_matcher(xgr)
    assert (m.accept_string(text) and m.is_completed()) is ok


def test_masks_along_a_token_sequence(xgr):
    ids = [VOCAB.index(t) for t in JSON_TEXT]
    m = _json_matcher(xgr)
    masks = []
    for t in ids:
        masks.append([VOCAB[i] for i in mask_of(xgr, m, len(VOCAB))])
        assert VOCAB[t] in masks[-1]
        assert m.accept_token(t)
    masks.append([VOCAB[i] for i in mask_of(xgr, m, len(VOCAB))])
    assert masks[0] == ["{"]
    assert set(masks[1]) == {'"', "}", "\n", " ", '"a":true', " }"}
    assert masks[-1] == ["</s>"]  # the object is complete: only the stop token
    assert set(masks[4]) == {":", "\n", " ", ':"'}  # after a key


def test_rollback_gives_the_same_masks(xgr):
    ids = [VOCAB.index(t) for t in JSON_TEXT]
    m = _json_matcher(xgr)
    for a, b in zip(ids[::2], ids[1::2]):
        before = [mask_of(xgr, m, len(VOCAB))]
        assert m.accept_token(a)
        before.append(mask_of(xgr, m, len(VOCAB)))
        assert m.accept_token(b)
        m.rollback(2)
        after = [mask_of(xgr, m, len(VOCAB))]
        assert m.accept_token(a)
        after.append(mask_of(xgr, m, len(VOCAB)))
        assert m.accept_token(b)
        assert before == after


def test_rejected_token_leaves_the_state(xgr):
    m = _json_matcher(xgr)
    for t in ["{", '"', "abc", '"', ":"]:
        assert m.accept_token(VOCAB.index(t))
    assert not m.accept_token(VOCAB.index("6:"))  # "6" fits, ":" does not: nothing is consumed
    for t in ['"', "abc", '"', " ", "}"]:
        assert m.accept_token(VOCAB.index(t))
    assert m.is_completed()


def test_reset(xgr):
    ids = [VOCAB.index(t) for t in JSON_TEXT]
    m = _json_matcher(xgr)
    first = []
    for t in ids:
        first.append(mask_of(xgr, m, len(VOCAB)))
        m.accept_token(t)
    m.reset()
    again = []
    for t in ids:
        again.append(mask_of(xgr, m, len(VOCAB)))
        m.accept_token(t)
    assert first == again


def test_termination(xgr):
    m = _json_matcher(xgr)
    for t in JSON_TEXT + ["</s>"]:
        assert m.accept_token(VOCAB.index(t))
    assert m.is_terminated()
    assert m.accept_token(VOCAB.index("a")) is False
    with pytest.raises(RuntimeError):
        m.fill_next_token_bitmask(xgr.allocate_token_bitmask(1, len(VOCAB)))
    with pytest.raises(RuntimeError):
        m.find_jump_forward_string()
    m.rollback(2)
    assert not m.is_terminated()
    assert m.accept_token(VOCAB.index("}"))


def test_is_completed_and_terminate_without_stop_token(xgr):
    ids = [VOCAB.index(t) for t in JSON_TEXT]
    m = _json_matcher(xgr)
    for t in ids:
        assert not m.is_completed()
        m.accept_token(t)
    assert m.is_completed() and not m.is_terminated()
    assert m.accept_token(VOCAB.index("</s>")) and m.is_terminated() and m.is_completed()

    m = _json_matcher(xgr, terminate_without_stop_token=True)
    for t in ids:
        assert not m.is_terminated()
        m.accept_token(t)
    assert m.is_completed() and m.is_terminated()  # complete = terminated in this mode
    assert mask_of(xgr, m, len(VOCAB)) == []  # no stop token, nothing can follow
    assert not m.accept_token(VOCAB.index("</s>"))


def test_terminated_without_stop_token_may_go_on(xgr):
    m = matcher_for(xgr, 'root ::= "a" "bc"?', ["</s>", "a", "bc", "b"], terminate_without_stop_token=True)
    assert m.accept_string("a") and m.is_terminated()
    assert mask_of(xgr, m, 4) == [2, 3]  # the optional "bc" still may come, the stop token may not
    assert m.accept_token(2) and m.is_terminated()


def test_override_stop_tokens(xgr):
    vocab = ["</s>", "a", "END", "b"]
    m = matcher_for(xgr, 'root ::= "a"', vocab, override_stop_tokens=2)
    assert m.stop_token_ids == [2]
    assert m.accept_token(1)
    assert mask_of(xgr, m, 4) == [2]
    assert not m.accept_token(0)  # </s> is text now, and the grammar is over
    assert m.accept_token(2) and m.is_terminated()
    m2 = matcher_for(xgr, 'root ::= "a"', vocab)
    assert m2.stop_token_ids == [0]


def test_default_stop_tokens_detected_from_text(xgr):
    info = xgr.TokenizerInfo(["<s>", "</s>", "a", "<|endoftext|>", "<|im_end|>", "<|eot_id|>"])
    assert info.stop_token_ids == [1, 3, 5]  # <|im_end|> is not one of xgrammar's detected strings
    assert xgr.TokenizerInfo(["a", "b"]).stop_token_ids == []


def test_out_of_range_and_special_tokens_are_rejected(xgr):
    m = matcher_for(xgr, "root ::= [a-z]+", ["</s>", "a", "", "b"])
    assert m.accept_token(5) is False and m.accept_token(-1) is False
    assert m.accept_token(2) is False  # an empty (special) token
    assert m.accept_token(1)


def test_jump_forward_strings(xgr):
    vocab = ["</s>", "{", "a", "x"]
    m = matcher_for(xgr, 'root ::= "{\\"ab" ("c" | "d") "xyz}" "1"?', vocab)
    assert m.find_jump_forward_string() == '{"ab'
    assert m.accept_string('{"abc')
    assert m.find_jump_forward_string() == "xyz}"  # stops where the grammar may end
    m.accept_string("xyz}")
    assert m.find_jump_forward_string() == ""
    m = matcher_for(xgr, 'root ::= "a\u00e9" | "a\u00e8"', vocab)
    assert m.find_jump_forward_string() == "a"  # only the first byte of the next character is forced
    m.accept_string(b"a\xc3")
    assert m.find_jump_forward_string() == ""  # inside a character


def test_padded_vocabulary_never_allows_padding(xgr):
    info = xgr.TokenizerInfo(["</s>", "a", "b"], vocab_size=70)
    assert info.vocab_size == 70
    compiled = xgr.GrammarCompiler(info, max_threads=1).compile_grammar("root ::= [ab]*")
    m = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(1, 70)
    assert bitmask.shape == (1, 3)
    m.fill_next_token_bitmask(bitmask)
    assert allowed(bitmask, 70).tolist() == [0, 1, 2]
    assert 3 in info.special_token_ids and 69 in info.special_token_ids


def test_fork_is_independent(xgr):
    m = _json_matcher(xgr)
    m.accept_string('{"a":')
    f = m.fork()
    assert f.accept_string(" 6}") and f.is_completed()
    assert not m.is_completed() and m.accept_string("true}")
    assert mask_of(xgr, f, len(VOCAB)) == mask_of(xgr, m, len(VOCAB))


def test_max_rollback_tokens_is_deprecated(xgr):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = _json_matcher(xgr, max_rollback_tokens=2)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert m.max_rollback_tokens == -1
    for t in JSON_TEXT:
        m.accept_token(VOCAB.index(t))
    m.rollback(len(JSON_TEXT))  # history is unlimited whatever was asked
    assert mask_of(xgr, m, len(VOCAB)) == [VOCAB.index("{")]


def test_misuse_raises_runtime_error(xgr):
    m = _json_matcher(xgr)
    with pytest.raises(RuntimeError):
        m.rollback(1)  # nothing to roll back
    import torch

    with pytest.raises(RuntimeError):
        m.fill_next_token_bitmask(torch.zeros((1, 5), dtype=torch.int32))  # wrong width
    with pytest.raises(RuntimeError):
        m.fill_next_token_bitmask(torch.zeros((1, 1), dtype=torch.int64))  # wrong dtype
    with pytest.raises(RuntimeError):
        m.fill_next_token_bitmask(torch.zeros((2, 1), dtype=torch.int32), 5)  # row outside
    assert m.fill_next_token_bitmask(np.zeros((1, 1), np.int32))  # a numpy bitmask is fine
    with pytest.raises(ValueError):
        xgr.GrammarMatcher("root ::= x")  # not compiled


def test_debug_print_internal_state(xgr):
    m = _json_matcher(xgr)
    for c in '{"name"':
        assert m.accept_string(c)
        assert m._debug_print_internal_state()


# -- draft trees (speculative decoding) -------------------------------------------------------------

def test_traverse_draft_tree_matches_filling_each_path(xgr):
    import torch

    # node 0 (the root: its token counts as accepted) -> "{" -> '"' -> "abc"; the root -> "a" (rejected
    # at the top level); "{" -> "}" (a complete object)
    tokens = [6, 7, 5, 3, 2, 8]
    first_child = [1, 2, 3, -1, -1, -1]
    next_sibling = [-1, 4, 5, -1, -1, -1]
    m = _json_matcher(xgr)
    bitmask = torch.zeros((6, 1), dtype=torch.int32)
    assert m.traverse_draft_tree(torch.tensor(first_child), torch.tensor(next_sibling), torch.tensor(tokens), bitmask)
    expect = []
    for path in ([], [7], [7, 5], [7, 5, 3], None, [7, 8]):
        if path is None:
            expect.append([])  # "a" directly at the top level is rejected: a zero row
            continue
        f = _json_matcher(xgr)
        for t in path:
            assert f.accept_token(t)
        expect.append(mask_of(xgr, f, len(VOCAB)))
    assert [allowed(bitmask, len(VOCAB), i).tolist() for i in range(6)] == expect
    assert m.accept_token(7)  # the matcher itself did not move


def test_traverse_draft_tree_refuses_bad_trees(xgr):
    import torch

    m = _json_matcher(xgr)
    first_child, tokens = torch.tensor([1, 2, -1]), torch.tensor([6, 7, 5])
    bitmask = xgr.allocate_token_bitmask(3, len(VOCAB))
    bad = [
        (first_child, torch.tensor([-1, -1]), tokens, bitmask),  # lengths differ
        (first_child, torch.tensor([-1, -1, -1], dtype=torch.int32), tokens, bitmask),  # not int64
        (first_child, torch.tensor([-1, -1, -1]), tokens, bitmask[0].clone()),  # a one-dimensional bitmask
        (first_child, torch.tensor([-1, -1, -1]), tokens, xgr.allocate_token_bitmask(2, len(VOCAB))),  # rows
        (first_child, torch.tensor([1, -1, -1]), tokens, bitmask),  # the root has a sibling
    ]
    for args in bad:
        with pytest.raises(RuntimeError):
            m.traverse_draft_tree(*args)


def test_traverse_draft_tree_timeout_still_fills_the_root(xgr):
    import torch

    info = xgr.TokenizerInfo(["a"], vocab_size=1, stop_token_ids=[])
    compiled = xgr.GrammarCompiler(info).compile_grammar('root ::= "a" root | "a"')
    n = 2000
    first_child = torch.tensor(list(range(1, n)) + [-1])
    bitmask = xgr.allocate_token_bitmask(n, 1)
    m = xgr.GrammarMatcher(compiled)
    assert m.traverse_draft_tree(first_child, torch.full((n,), -1), torch.zeros(n, dtype=torch.int64), bitmask,
                                 time_threshold=1e-7) is False
    assert allowed(bitmask, 1, 0).tolist() == [0]  # the root's row, filled before time is checked


# -- the batch verbs ----------------------------------------------------------------------------------

def test_batch_verbs(xgr):
    import torch

    matchers = [_json_matcher(xgr) for _ in range(3)]
    batch = xgr.BatchGrammarMatcher(max_threads=1)
    bitmask = xgr.allocate_token_bitmask(4, len(VOCAB))
    assert xgr.BatchGrammarMatcher.batch_accept_token(matchers, [7, 7, 2]) == [True, True, False]
    assert xgr.BatchGrammarMatcher.batch_accept_string(matchers, ['"a":', " ", "{"]) == [True, True, True]
    batch.batch_fill_next_token_bitmask(matchers, bitmask, [3, 0, 1])
    for m, row in zip(matchers, [3, 0, 1]):
        assert allowed(bitmask, len(VOCAB), row).tolist() == mask_of(xgr, m, len(VOCAB))
    xgr.BatchGrammarMatcher.batch_rollback(matchers, [1, 2, 1])
    assert mask_of(xgr, matchers[1], len(VOCAB)) == [VOCAB.index("{")]
    assert mask_of(xgr, matchers[2], len(VOCAB)) == [VOCAB.index("{")]
    with pytest.raises(RuntimeError):
        xgr.BatchGrammarMatcher.batch_accept_token(matchers, [1])
    with pytest.raises(RuntimeError):
        xgr.BatchGrammarMatcher.batch_rollback(matchers, [1])
    temps = torch.zeros(3, dtype=torch.float32)
    xgr.BatchGrammarMatcher.batch_fill_temperature(matchers, temps)
    assert temps.tolist() == [-1.0, -1.0, -1.0]  # no rule sets a temperature
