"""Token literals: grammar paths that one special or added token takes, not its text.

A structural tag lets a marker (``<tool_call>``, ``</think>``) be given as its
one added token; its IR holds the token's :func:`~leapgen.grammar.ir.token_literal`
there: the byte ``0xFF``, which no UTF-8 text holds, then the token id in
three bytes. A compiled grammar finds those paths in its automaton
(:func:`find_token_literals`), so a grammar read back from the disk cache
has them too. Then:

- a mask allows such a token where its literal's bytes walk from the state
  (the trie of the vocabulary holds no special token, so these few are
  walked one by one);
- an ordinary token holding a ``0xFF`` byte is never allowed (it could
  otherwise start a literal's path; no UTF-8 text holds that byte, so no
  grammar allows it elsewhere either): masks clear it, the matcher refuses it;
- jump-forward never forces a literal: its bytes are not text (where the text
  is an alternative, the text is forced and retokenized into the token).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import numpy as np

from leapgen.grammar.ir import TOKEN_LEAD, TOKEN_LITERAL_BYTES
from leapgen.vocab import TokenizerInfo

_LEAD_FREE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # token index -> lead_free_words


def find_token_literals(byte_tables: Iterable[np.ndarray], tokenizer_info: TokenizerInfo) -> dict[int, bytes]:
    """The token literals an automaton holds, for the vocabulary's special tokens.

    Parameters
    ----------
    byte_tables : iterable of numpy.ndarray
        int32 ``(n_states, >= 256)`` transition tables (-1 dead); only the
        256 byte columns are read.
    tokenizer_info : TokenizerInfo
        Ids that are not special (or not in the vocabulary) are left out: an
        ordinary token is matched by its bytes.

    Returns
    -------
    dict of int to bytes
        Token id -> its literal's bytes, for every literal path from some state.
    """
    special = tokenizer_info.special_token_ids
    found: set[int] = set()
    for table in byte_tables:
        lead = table[:, TOKEN_LEAD]
        frontier = [(int(q), 0) for q in lead[lead >= 0].tolist()]  # (state, id bits read so far)
        for _ in range(TOKEN_LITERAL_BYTES - 1):
            frontier = [(int(table[q, b]), (value << 8) | b) for q, value in frontier
                        for b in np.flatnonzero(table[q, :256] >= 0).tolist()]
        found.update(value for _, value in frontier)
    return {t: bytes((TOKEN_LEAD,)) + t.to_bytes(3, "big") for t in sorted(found)
            if t < tokenizer_info.vocab_size and t in special}


def set_literal_bits(words: np.ndarray, state, walk, literals: dict[int, bytes], lead_free: np.ndarray) -> None:
    """Make ``words`` exact for a grammar with token literals (mutates ``words``).

    Parameters
    ----------
    words : numpy.ndarray
        uint32 ``(ceil(vocab_size / 32),)``: the ordinary tokens allowed from ``state``.
    state : hashable
        The grammar state.
    walk : callable
        ``walk(state, data) -> state or None``, the grammar's.
    literals : dict of int to bytes
        :func:`find_token_literals` of the grammar.
    lead_free : numpy.ndarray
        uint32 bitset of the tokens that hold no ``0xFF`` byte (:func:`lead_free_words`).
    """
    words &= lead_free
    for token, data in literals.items():
        if walk(state, data) is not None:
            words[token >> 5] |= np.uint32(1 << (token & 31))


def lead_free_words(token_index, tokenizer_info: TokenizerInfo) -> np.ndarray:
    """uint32 bitset ``(ceil(vocab_size / 32),)``, read-only, cached per token index: every token
    whose bytes hold no ``0xFF`` byte (special and padding ids included)."""
    got = _LEAD_FREE.get(token_index)
    if got is None:
        lead = bytes((TOKEN_LEAD,))
        holding = np.fromiter((i for i, b in enumerate(tokenizer_info.token_bytes) if lead in b), np.int64)
        bits = np.zeros(token_index.bitmask_words * 32, bool)
        bits[:tokenizer_info.vocab_size] = True
        bits[holding] = False
        got = np.packbits(bits, bitorder="little").view(np.uint32)
        got.flags.writeable = False
        _LEAD_FREE[token_index] = got
    return got
