"""CompiledGrammar: a grammar's DFA bound to one vocabulary.

Immutable in meaning and shared by every request that uses the grammar. Per
DFA state it lazily computes, and caches, the packed token bitmask and the
forced (jump-forward) bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from leapgen.automata import Dfa
from leapgen.compiler.token_index import TokenIndex
from leapgen.vocab import TokenizerInfo

DEFAULT_MASK_CACHE_BYTES = 256 << 20
MAX_FORCED_BYTES = 1 << 16


class CompiledGrammar:
    """A compiled grammar for one vocabulary (thread-safe, immutable in meaning).

    Attributes
    ----------
    tokenizer_info : TokenizerInfo
    dfa : Dfa
        The minimized byte-level DFA.
    warnings : tuple of str
        Where the grammar is looser than its source (e.g. a ``oneOf`` compiled
        as ``anyOf``). Empty when the grammar is exact.
    kind : str
        ``"regex"``, ``"json_schema"`` or ``"ebnf"``.
    compile_ms : float
        Wall time of the compile, in milliseconds.
    """

    def __init__(self, dfa: Dfa, tokenizer_info: TokenizerInfo, token_index: TokenIndex, *,
                 kind: str, warnings=(), compile_ms: float = 0.0,
                 mask_cache_bytes: int = DEFAULT_MASK_CACHE_BYTES):
        self.dfa = dfa
        self.tokenizer_info = tokenizer_info
        self.token_index = token_index
        self.kind = kind
        self.warnings = tuple(warnings)
        self.compile_ms = compile_ms
        self.trans_flat = np.ascontiguousarray(dfa.trans.reshape(-1))
        self.accepting = dfa.accepting
        out_degree = np.count_nonzero(dfa.trans >= 0, axis=1)
        only_byte = np.argmax(dfa.trans >= 0, axis=1)
        self._forced_byte = np.where((out_degree == 1) & ~dfa.accepting, only_byte, -1).tolist()
        self._has_exit = (out_degree > 0).tolist()
        row_bytes = token_index.bitmask_words * 4
        self._max_cached_rows = max(16, mask_cache_bytes // max(row_bytes, 1))
        self._rows: OrderedDict[int, tuple[np.ndarray, bool]] = OrderedDict()
        self._forced: dict[int, bytes] = {}
        self._lock = threading.Lock()
        self.mask_cache_hits = 0
        self.mask_cache_misses = 0

    @property
    def n_states(self) -> int:
        return self.dfa.n_states

    def bitmask_row(self, state: int) -> tuple[np.ndarray, bool]:
        """The token bitmask row of a DFA state (cached, LRU-bounded).

        Returns
        -------
        row : numpy.ndarray
            int32, shape ``(ceil(vocab_size / 32),)``, read-only, shared: do not
            write to it.
        need_apply : bool
            False when every token of the vocabulary is allowed.
        """
        got = self._rows.get(state)
        if got is not None:
            self.mask_cache_hits += 1
            return got
        self.mask_cache_misses += 1
        ids, _ = self.token_index.walk(self.trans_flat, state)
        row = self.token_index.bitmask_row(ids, allow_stop=bool(self.accepting[state]))
        row.flags.writeable = False
        n_stop = len(self.token_index.stop_token_ids) if self.accepting[state] else 0
        need_apply = len(ids) + n_stop < self.tokenizer_info.vocab_size
        got = (row, need_apply)
        with self._lock:
            self._rows[state] = got
            while len(self._rows) > self._max_cached_rows:
                self._rows.popitem(last=False)
        return got

    def forced_bytes(self, state: int) -> bytes:
        """Bytes the grammar forces from ``state``: the longest byte string
        along which every state has exactly one live byte and is not
        accepting. Cached per state."""
        got = self._forced.get(state)
        if got is None:
            out = bytearray()
            q = state
            fb = self._forced_byte
            while fb[q] >= 0 and len(out) < MAX_FORCED_BYTES:
                out.append(fb[q])
                q = int(self.trans_flat[q * 256 + fb[q]])
            got = self._forced[state] = bytes(out)
        return got

    def has_continuation(self, state: int) -> bool:
        """Whether any byte can follow in ``state``."""
        return self._has_exit[state]

    def memory_size_bytes(self) -> int:
        """Approximate bytes held: DFA plus cached bitmask rows."""
        rows = sum(r.nbytes for r, _ in list(self._rows.values()))
        return int(self.trans_flat.nbytes + self.accepting.nbytes + rows)

    def __repr__(self) -> str:
        return f"CompiledGrammar(kind={self.kind!r}, n_states={self.n_states}, warnings={len(self.warnings)})"
