"""Token index: which vocabulary tokens keep a DFA alive from a state.

One :class:`TokenIndex` per vocabulary, shared by every grammar compiled for
it. With numba, tokens are walked as a trie (depth first, pruned as soon as
a prefix dies: see :mod:`leapgen.compiler.trie_kernels`); without it, all
tokens' bytes are walked column by column with numpy gathers, tokens sorted
by length so each column only touches tokens long enough.
"""

from __future__ import annotations

import numpy as np

from leapgen.compiler import trie_kernels
from leapgen.vocab import TokenizerInfo


class TokenIndex:
    """Vectorized token walks over one vocabulary (immutable, thread-safe).

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
        The vocabulary. Special and padding ids are never walked.
    use_trie : bool or None
        Use the numba trie kernels (default: when numba is installed).
    """

    def __init__(self, tokenizer_info: TokenizerInfo, *, use_trie: bool | None = None):
        mat, lens, ids = tokenizer_info.token_byte_matrix()
        self.vocab_size = tokenizer_info.vocab_size
        self.bitmask_words = (self.vocab_size + 31) // 32
        self.stop_token_ids = np.array(sorted(tokenizer_info.stop_token_ids), np.int64)
        self.use_trie = trie_kernels.HAVE_NUMBA if use_trie is None else use_trie
        self._token_bytes = tokenizer_info.token_bytes
        self._rank: np.ndarray | None = None
        if self.use_trie:
            token_bytes = tokenizer_info.token_bytes
            order = sorted(range(len(ids)), key=lambda r: token_bytes[ids[r]])
            self._trie = trie_kernels.build_trie(mat, lens, np.array(order, np.int32))
            self._row_ids = ids.astype(np.int32)
        else:
            order = np.argsort(-lens.astype(np.int64), kind="stable")
            self.lengths = lens[order].astype(np.int32)
            self.token_ids = ids[order].astype(np.int64)
            max_len = int(self.lengths[0]) if self.lengths.size else 0
            self.columns = [np.ascontiguousarray(mat[order, c]).astype(np.int64) for c in range(max_len)]
            self.longer_than = [int(np.count_nonzero(self.lengths > c)) for c in range(max_len)]

    def token_rank(self) -> np.ndarray:
        """int64 ``(vocab_size,)``: each token's rank in lexicographic order of its bytes (cached)."""
        got = self._rank
        if got is None:
            order = sorted(range(len(self._token_bytes)), key=self._token_bytes.__getitem__)
            got = np.empty(len(order), np.int64)
            got[order] = np.arange(len(order))
            self._rank = got
        return got

    def empty_words(self) -> np.ndarray:
        """A zeroed uint32 bitset of ``ceil(vocab_size / 32)`` words."""
        return np.zeros(self.bitmask_words, np.uint32)

    def token_sets(self, trans_flat: np.ndarray, state: int, state_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Walk every token from ``state`` and sort them by where they end.

        Parameters
        ----------
        trans_flat : numpy.ndarray
            int32, ``(n_states * 256,)``: a byte DFA's transitions, ``-1`` dead.
        state : int
            Where each walk starts.
        state_class : numpy.ndarray
            int8, ``(n_states,)``: 1 or 2 for the set a token ending in that
            state goes to, 0 for neither.

        Returns
        -------
        set_a, set_b : numpy.ndarray
            uint32 bitsets, ``(ceil(vocab_size / 32),)``: bit ``i % 32`` of
            word ``i // 32`` is set when token ``i`` ends in a class-1 (a) or
            class-2 (b) state.
        """
        a, b = self.empty_words(), self.empty_words()
        if self.use_trie:
            trie_kernels.trie_walk(trans_flat, state, state_class, *self._trie, self._row_ids, a, b)
            return a, b
        ids, ends = self._column_walk(trans_flat, state)
        cls = state_class[ends]
        for words, c in ((a, 1), (b, 2)):
            chosen = ids[cls == c]
            np.bitwise_or.at(words, chosen >> 5, (np.uint32(1) << (chosen & 31).astype(np.uint32)))
        return a, b

    def _column_walk(self, trans_flat: np.ndarray, state: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.token_ids)
        pos = np.arange(n)
        st = np.full(n, state, np.int64)
        for c, limit in enumerate(self.longer_than):
            k = int(np.searchsorted(pos, limit))
            if k == 0:
                break
            nxt = trans_flat[st[:k] * 256 + self.columns[c][pos[:k]]]
            alive = nxt >= 0
            if alive.all():
                st[:k] = nxt
            else:
                st = np.concatenate((nxt[alive], st[k:]))
                pos = np.concatenate((pos[:k][alive], pos[k:]))
        return self.token_ids[pos], st

    def set_stop_bits(self, words: np.ndarray, allow: bool) -> None:
        """Set (``allow``) or clear the stop tokens' bits in ``words`` (mutates)."""
        for t in self.stop_token_ids.tolist():
            if allow:
                words[t >> 5] |= np.uint32(1 << (t & 31))
            else:
                words[t >> 5] &= ~np.uint32(1 << (t & 31))

    def allows_everything(self, words: np.ndarray) -> bool:
        """Whether bitset ``words`` allows every id below ``vocab_size``."""
        full, rest = divmod(self.vocab_size, 32)
        if not (words[:full] == np.uint32(0xFFFFFFFF)).all():
            return False
        return rest == 0 or (int(words[full]) & ((1 << rest) - 1)) == (1 << rest) - 1
