"""Token index: which vocabulary tokens keep a DFA alive from a state.

One :class:`TokenIndex` per vocabulary, shared by every grammar compiled for
it. :meth:`TokenIndex.allowed_tokens` walks *all* tokens' bytes through the
DFA at once, column by column (numpy gathers, no per-token Python loop);
tokens are sorted by length so each column only touches tokens long enough,
and tokens that die are dropped as soon as they do.
"""

from __future__ import annotations

import numpy as np

from leapgen.vocab import TokenizerInfo


class TokenIndex:
    """Vectorized token walks over one vocabulary (immutable, thread-safe).

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
        The vocabulary. Special and padding ids are never walked.
    """

    def __init__(self, tokenizer_info: TokenizerInfo):
        mat, lens, ids = tokenizer_info.token_byte_matrix()
        order = np.argsort(-lens.astype(np.int64), kind="stable")
        self.lengths = lens[order].astype(np.int32)
        self.token_ids = ids[order].astype(np.int64)
        max_len = int(self.lengths[0]) if self.lengths.size else 0
        # columns[c]: byte c of every token (0 past its end), as int64 for index math
        self.columns = [np.ascontiguousarray(mat[order, c]).astype(np.int64) for c in range(max_len)]
        # number of tokens longer than c (they are a prefix, tokens sorted by length desc)
        self.longer_than = [int(np.count_nonzero(self.lengths > c)) for c in range(max_len)]
        self.vocab_size = tokenizer_info.vocab_size
        self.bitmask_words = (self.vocab_size + 31) // 32
        self.stop_token_ids = np.array(sorted(tokenizer_info.stop_token_ids), np.int64)

    def walk(self, trans_flat: np.ndarray, state: int) -> tuple[np.ndarray, np.ndarray]:
        """Walk every token from ``state``.

        Parameters
        ----------
        trans_flat : numpy.ndarray
            int32, shape ``(n_states * 256,)``: the DFA's transition table,
            flattened; ``-1`` is dead.
        state : int
            The start state of the walk.

        Returns
        -------
        token_ids : numpy.ndarray
            int64, ids of the tokens whose every byte has a transition.
        end_states : numpy.ndarray
            int64, the state each of those tokens ends in (same order).
        """
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

    def bitmask_row(self, allowed_ids: np.ndarray, *, allow_stop: bool) -> np.ndarray:
        """Pack allowed token ids into one int32 bitmask row.

        Returns
        -------
        numpy.ndarray
            int32, shape ``(ceil(vocab_size / 32),)``; bit ``i % 32`` of word
            ``i // 32`` is 1 when token ``i`` is allowed.
        """
        mask = np.zeros(self.bitmask_words * 32, bool)
        mask[allowed_ids] = True
        if allow_stop:
            mask[self.stop_token_ids] = True
        return np.packbits(mask, bitorder="little").view("<i4")
