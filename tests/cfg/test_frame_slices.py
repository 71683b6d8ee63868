"""Token slices in the frame sort of context-free grammars (issue 15, fault 1).

``s ::= "" | [^"\\] s`` (how xgrammar's JSON grammar writes a string) reads
one character and then calls itself: from a frame of ``s``, every string
character lives for one character in the rule's own DFA and the next one
dies there, so the JSON-string slice applies with a limit of one character.
For a regular DFA that limit makes every longer token dead; in a frame it
does not, since the frame may call (or return) where the character ended and
the token goes on in the callee. The frame sort used to drop those tokens:
after ``{"`` on Llama-3 the mask allowed 8,433 tokens where ``accept_token``
accepts 126,207 (``hello``, `` the``, ``name``).

The oracle is ``accept_token`` on a fork, over every token of the vocabulary.
A synthetic vocabulary with enough lowercase words that the slices are built
runs without any tokenizer package.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from leapgen import GrammarCompiler, GrammarMatcher, TokenizerInfo, allocate_token_bitmask

RIGHT_RECURSIVE = 'root ::= "{\\"" s "\\"}"\ns ::= "" | [^"\\\\] s'
STAR = 'root ::= "{\\"" [^"\\\\]* "\\"}"'
# a counted run inside the recursion (the slice limit is 3, then a call), and mutual recursion
COUNTED = 'root ::= "<" a ">"\na ::= "" | [a-z]{1,3} b\nb ::= "-" a | [a-z] a'


def _words_vocab() -> TokenizerInfo:
    """Every byte, then 600 seeded lowercase words of 2-9 letters (a slice needs >= 256)."""
    rng = random.Random(15)
    words = sorted({"".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 9))) for _ in range(700)})[:600]
    pieces = [bytes([b]) for b in range(256)] + [w.encode() for w in words] + [b"{\"", b"\"}", b"-ab", b"c>"]
    return TokenizerInfo(pieces, "raw")


def _mask_and_accepted(compiled, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """bool ``(vocab_size,)`` twice: the filled bitmask after ``prefix``, and the tokens ``accept_token`` takes."""
    matcher = GrammarMatcher(compiled)
    assert matcher.accept_string(prefix)
    vocab_size = compiled.tokenizer_info.vocab_size
    bitmask = allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    mask = np.unpackbits(np.asarray(bitmask).view(np.uint8), bitorder="little")[:vocab_size].astype(bool)
    accepted = np.array([matcher.fork().accept_token(t) for t in range(vocab_size)])
    return mask, accepted


@pytest.mark.parametrize("grammar, prefix", [(RIGHT_RECURSIVE, '{"'), (RIGHT_RECURSIVE, '{"ab'), (STAR, '{"'),
                                             (COUNTED, "<"), (COUNTED, "<ab-")])
def test_frame_masks_equal_accept_token_with_slices(grammar, prefix):
    compiler = GrammarCompiler(_words_vocab())
    assert compiler.token_index.token_slices, "the vocabulary must be big enough for slices"
    compiled = compiler.compile_grammar(grammar)
    mask, accepted = _mask_and_accepted(compiled, prefix)
    tokens = compiled.tokenizer_info.token_bytes
    missing = [tokens[t] for t in np.flatnonzero(accepted & ~mask)[:8]]
    extra = [tokens[t] for t in np.flatnonzero(mask & ~accepted)[:8]]
    assert not missing and not extra, f"mask misses {missing}, allows {extra}"
    assert accepted.sum() > 600  # the words are accepted (not an empty agreement)


def test_right_recursive_string_rule_on_llama3(grammar_compiler):
    compiler = grammar_compiler("llama3")
    recursive, star = (_mask_and_accepted(compiler.compile_grammar(g), '{"') for g in (RIGHT_RECURSIVE, STAR))
    assert np.array_equal(recursive[0], recursive[1])
    assert np.array_equal(recursive[0], star[0])  # the same language, the same mask
    tokens = compiler.tokenizer_info.token_bytes
    for text in (b"hello", b" the", b"name"):
        assert recursive[0][tokens.index(text)]
