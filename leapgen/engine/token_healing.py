"""Token healing at jump-forward boundaries.

One responsibility: decide whether the last token of a jump-forward must be
held back. The forced text is retokenized on its own, so its last token ends
exactly where the forced text ends; but the model, had it sampled that text,
might have used a *longer* token that crosses the boundary (``":`` followed
by a string value could be ``":"``; ``[`` followed by an object ``[{``).
Appending the short token would force a token boundary the tokenizer would
not make, and the model would continue from a tokenization it never saw in
training. So when a strictly longer vocabulary token starts with the last
forced token's bytes and the grammar allows it at that point, the forced
token is not appended: the model samples it (or a longer one) itself.
"""

from __future__ import annotations

import bisect
from typing import Any, Sequence

import numpy as np


class TokenHealing:
    """The vocabulary's "longer tokens with the same start" index.

    Parameters
    ----------
    token_bytes : sequence of bytes
        Each token id's bytes (``b""`` for special ids).
    special_token_ids : iterable of int
        Ids never counted as extensions (special, stop, padding).
    sorted_ids : numpy.ndarray or None, default None
        The ids to index, already sorted by their bytes (ties by id): every id whose
        ``token_bytes`` are not empty and that is not in ``special_token_ids``, as
        :meth:`TokenIndex.ids_in_byte_order <leapgen.compiler.token_index.TokenIndex.ids_in_byte_order>`
        gives them (~60 ms less than sorting 49k tokens again in a new process). None: sorted here.

    Attributes
    ----------
    token_bytes : sequence of bytes
        As given (read by the jump-forward to measure token spans).
    """

    def __init__(self, token_bytes: Sequence[bytes], special_token_ids: Any = (), sorted_ids: np.ndarray | None = None):
        if sorted_ids is None:
            special = frozenset(special_token_ids)
            pairs = sorted((b, i) for i, b in enumerate(token_bytes) if b and i not in special)
            sorted_ids = np.fromiter((i for _, i in pairs), dtype=np.int64, count=len(pairs))
        self._sorted_ids = np.asarray(sorted_ids, np.int64)
        self._sorted_bytes = [token_bytes[i] for i in self._sorted_ids.tolist()]
        self.token_bytes = token_bytes
        self._vocab_size = len(token_bytes)
        self._cache: dict[int, np.ndarray] = {}

    def extensions(self, token: int) -> np.ndarray:
        """Ids of the tokens whose bytes strictly extend ``token``'s bytes.

        Returns
        -------
        numpy.ndarray
            int64, shape ``(k,)``, possibly empty (cached per token).
        """
        found = self._cache.get(token)
        if found is None:
            prefix = self.token_bytes[token]
            if not prefix:
                found = self._sorted_ids[:0]
            else:
                # Tokens starting with ``prefix`` are contiguous in sorted order, right after it.
                lo = hi = bisect.bisect_right(self._sorted_bytes, prefix)
                while hi < len(self._sorted_bytes) and self._sorted_bytes[hi].startswith(prefix):
                    hi += 1
                found = self._sorted_ids[lo:hi]
            self._cache[token] = found
        return found

    def allows_longer_token(self, matcher: Any, token: int) -> bool:
        """Whether ``matcher``, in its current state, allows a token that
        strictly extends ``token``'s bytes.

        Parameters
        ----------
        matcher : GrammarMatcher or GrammarState
            Not mutated (one bitmask row is filled into a scratch buffer).
        token : int

        Returns
        -------
        bool
        """
        ext = self.extensions(token)
        if ext.size == 0:
            return False
        import torch

        scratch = torch.zeros((1, (self._vocab_size + 31) // 32), dtype=torch.int32)
        matcher.fill_next_token_bitmask(scratch, 0)
        words = scratch[0].numpy().view(np.uint32)
        return bool(((words[ext >> 5] >> (ext & 31).astype(np.uint32)) & 1).any())
