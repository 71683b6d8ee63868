"""CountedGrammar: a DFA with counted regions bound to one vocabulary (see :mod:`leapgen.automata.counted`).

A matcher state is ``(dfa state, count)``. A token's mask depends on the count only near the
region's bounds: a token starts at most as many items as it has bytes (``T``, the longest
token's), so once the count is at least ``lo`` and ``hi`` is ``T`` or more away, every count
gives the same mask. A row is therefore kept per *row key* ``(state, need, room)`` with
``need = min(max(lo - count, 0), T + 1)`` and ``room = min(hi - count, T)`` (``(state, 0, T)``
outside a region): the positions of a string far from its bounds share one row, where the
expanded automaton had a state, and a first visit, per position.

A row is the row of the DFA state with the counts dropped (:attr:`CountedDfa.flat_trans`,
computed once per state by the token index's usual walk, slices included), less the tokens the
counts refuse: the tokens they may refuse are walked again with them
(:func:`~leapgen.compiler.counted_kernels.refuse_counted`): near ``hi`` the tokens longer than
``room`` bytes (the first rows of the vocabulary's byte matrix, longest first: no set to build per
``room``), below ``lo`` the tokens holding a byte that may end the region, and the tokens that may
break a region they enter: where some region has ``lo > 0``, those holding two such bytes (enter,
then end too soon), and where some ``hi`` is below ``T``, those holding one and longer than the
smallest ``hi``. Where none is refused (most keys: ``room`` only cuts the few tokens longer than
it) the key shares the state's row, no copy. A few characters from ``hi`` most of the vocabulary is
longer than the room: there the row is walked over the vocabulary's trie instead
(:func:`~leapgen.compiler.counted_kernels.counted_trie_allowed`: the prefixes alive, a refused
prefix's subtree skipped), where that reads fewer nodes than the tokens' walks would read bytes
(a UUID's last characters: 1.2-2.6 ms a first visit before).
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.counted import CountedDfa
from leapgen.compiler.compiled import CompiledGrammar
from leapgen.compiler.counted_kernels import refuse_counted

State = tuple  # (dfa state, count)
#: A trie node walked costs about this many bytes of the token-by-token walk (18.7 against 6.1 ns and
#: 23.8 against 5.4 ns, a UUID's rows 6 and 3 characters from ``hi``, Llama-3, tune half).
TRIE_NODE_COST = 3
_NO_TOKENS = np.zeros(0, np.int32)
_NO_TOKENS.flags.writeable = False


class CountedGrammar(CompiledGrammar):
    """A compiled grammar whose automaton counts repetitions at run time; states are
    ``(dfa state, count)`` pairs. See :class:`CompiledGrammar` and the module docstring.

    Parameters
    ----------
    automaton : CountedDfa
    tokenizer_info, token_index
        As :class:`CompiledGrammar`.

    Attributes
    ----------
    automaton : CountedDfa
    """

    is_regular = False  # states are pairs (the matcher's inline DFA walk does not apply)

    def __init__(self, automaton: CountedDfa, tokenizer_info, token_index, **kwargs):
        super().__init__(tokenizer_info, token_index, **kwargs)
        self.automaton = automaton
        a = automaton
        self._accepting = a.dfa.accepting.tolist()
        self._region_of = a.region_of.tolist()
        self._lo, self._hi = a.lo.tolist(), a.hi.tolist()
        self._horizon = max(token_index.max_token_bytes, 1)
        self._live = np.ones(a.n_states, np.int8)  # trimmed: every state can still finish
        self._slice_memo = token_index.new_slice_memo(a.n_states)
        self._flat_rows: dict[int, tuple] = {}  # dfa state -> (row, need_apply) with the counts dropped
        horizon = self._horizon
        self._end_risk = bool((a.lo > 0).any())  # a token may enter a region and end it too soon
        self._min_hi = int(a.hi.min()) if len(a.hi) and a.hi.min() < horizon else None  # ... or pass its hi
        self._kernel_args = (a.byte_trans, a.item_to, a.end_to, a.boundary_region, a.lo, a.hi)
        self._table_bytes = sum(int(x.nbytes) for x in (a.byte_trans, a.flat_trans, a.item_to, a.end_to,
                                                        a.boundary_region, a.region_of))

    @property
    def stored_automaton(self) -> CountedDfa:
        return self.automaton

    @property
    def n_states(self) -> int:
        """States of the DFA (counts aside)."""
        return self.automaton.n_states

    @property
    def start_state(self) -> State:
        return self.automaton.start

    def walk(self, state: State, data: bytes) -> State | None:
        return self.automaton.walk(state, data)

    def is_accepting(self, state) -> bool:
        return self._accepting[state[0]]

    def _forced_byte(self, state: State) -> int:
        if self._accepting[state[0]]:
            return -1
        live = np.flatnonzero(self.automaton.next_bytes(state))
        return int(live[0]) if len(live) == 1 else -1

    # -- rows, by row key ------------------------------------------------------------------

    def row_key(self, state: State) -> tuple[int, int, int]:
        """The key of ``state``'s row (see the module docstring); pure."""
        q, c = state
        k = self._region_of[q]
        if k < 0:
            return q, 0, self._horizon
        return q, min(max(self._lo[k] - c, 0), self._horizon + 1), min(self._hi[k] - c, self._horizon)

    def bitmask_row(self, state: State) -> tuple[np.ndarray, bool]:
        """As :meth:`CompiledGrammar.bitmask_row`, cached per row key: states of one key share the
        row, and a key whose counts refuse no token shares its DFA state's row with the counts dropped."""
        key = self.row_key(state)
        got = self._rows.get(key)
        if got is not None:
            self.mask_cache_hits += 1
            return got
        self.mask_cache_misses += 1
        q, c = state
        got = self._flat_entry(q)
        words = got[0].view(np.uint32)
        n_long, candidates = self._candidates(q, c)
        kept = None
        if n_long and self._trie_walk_pays(q, c, n_long + len(candidates)):
            kept = self.token_index.counted_row(words, self._kernel_args, q, c)
            if np.array_equal(kept, words):
                kept = None
        elif n_long or len(candidates):
            refused = self.token_index.empty_words()
            if refuse_counted(words, n_long, candidates, refused, *self._kernel_args, q, c,
                              *self.token_index.token_rows()):
                kept = words & ~refused
        if kept is not None:  # some token refused: a row of the key's own
            row = kept.view(np.int32)
            row.flags.writeable = False
            got = (row, not self.token_index.allows_everything(kept))
        return self._keep_row(key, got)

    def _trie_walk_pays(self, q: int, c: int, tokens: int) -> bool:
        """Whether the row of ``(q, c)`` costs less walked over the vocabulary's trie than token by
        token: near ``hi`` a refused token is walked ``room + 1`` items before it is refused, where
        the trie walk reads the prefixes alive, about the trie's nodes of ``room + 1`` bytes or fewer,
        each :data:`TRIE_NODE_COST` bytes' worth of the token walk."""
        if not self.token_index.use_trie:  # no trie without numba
            return False
        room = int(self._hi[self._region_of[q]]) - c
        return self.token_index.trie_nodes_within(room + 1) * TRIE_NODE_COST < tokens * (room + 1)

    def write_row(self, state: State, out: np.ndarray) -> bool:
        row, need_apply = self.bitmask_row(state)
        out[:] = row
        return need_apply

    def has_bitmask_row(self, state: State) -> bool:
        return self.row_key(state) in self._rows

    def _allowed_bits(self, state: State) -> np.ndarray:
        words = self.bitmask_row(state)[0].view(np.uint32).copy()
        self.token_index.set_stop_bits(words, False)  # stop tokens aside, as the base class says
        return words

    def _flat_entry(self, q: int) -> tuple[np.ndarray, bool]:
        """``(row, need_apply)`` of DFA state ``q`` with the counts dropped, stop tokens included
        (cached per state; the row int32, read-only)."""
        got = self._flat_rows.get(q)
        if got is None:
            words = self.token_index.token_row(self.automaton.flat_trans, q, self._live, self._slice_memo,
                                               self._slices)
            self.token_index.set_stop_bits(words, self._accepting[q])
            row = words.view(np.int32)
            row.flags.writeable = False
            got = self._flat_rows[q] = (row, not self.token_index.allows_everything(words))
        return got

    def _candidates(self, q: int, c: int) -> tuple[int, np.ndarray]:
        """The tokens the counts may refuse from ``(q, c)``: how many of the longest (the first rows
        of :meth:`TokenIndex.token_rows`), and the int32 ids of the others (read-only; cached by what
        they are made of, for every grammar of the vocabulary)."""
        k = self._region_of[q]
        index = self.token_index
        n_long = index.rows_longer_than(self._hi[k] - c) if k >= 0 and self._hi[k] - c < self._horizon else 0
        below = k >= 0 and c < self._lo[k]
        end_risk, min_hi = self._end_risk, self._min_hi
        if not (below or end_risk or min_hi is not None):
            return n_long, _NO_TOKENS
        entry = self.automaton.entry_bytes

        def make() -> np.ndarray:
            parts = [index.empty_words()]
            if below:
                parts.append(index.tokens_holding(entry, 1))
            if end_risk:
                parts.append(index.tokens_holding(entry, 2))
            if min_hi is not None:
                parts.append(index.tokens_holding(entry, 1) & index.tokens_longer_than(min_hi))
            words = np.bitwise_or.reduce(parts)
            return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")).astype(np.int32)

        return n_long, index.token_set(("counted", entry.tobytes(), below, end_risk, min_hi), make)

    def memory_size_bytes(self) -> int:
        """Approximate bytes held: the rows cached (counted once per row key, shared or not), the rows
        with the counts dropped, the slice memo and the automaton's tables (the candidate tokens' sets
        belong to the vocabulary's token index)."""
        return (super().memory_size_bytes() + len(self._flat_rows) * self._row_bytes
                + int(self._slice_memo.nbytes) + self._table_bytes)
