"""The DFA value and the minimization that makes one: what the NFA (its
character-set fragments) and the DFA operations of :mod:`leapgen.automata.dfa`
share.

- :class:`Dfa`: an immutable, trimmed byte-level transition table.
- :func:`minimize_table`: trim and minimize a class-level table (Valmari and
  Lehtinen's partition refinement, :mod:`leapgen.automata.minimize_kernel`),
  widened to bytes last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leapgen.automata.minimize_kernel import minimize_table_kernel


@dataclass(frozen=True, eq=False)
class Dfa:
    """An immutable, trimmed byte-level DFA.

    Attributes
    ----------
    trans : numpy.ndarray
        int32, shape ``(n_states, 256)``; ``trans[q, b]`` is the next state,
        ``-1`` where byte ``b`` leads nowhere (dead).
    accepting : numpy.ndarray
        bool, shape ``(n_states,)``.
    start : int
        The start state (0 after :func:`leapgen.automata.dfa.minimize`).
    """

    trans: np.ndarray
    accepting: np.ndarray
    start: int = 0

    @property
    def n_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def is_empty(self) -> bool:
        """True when the language is empty."""
        return self.n_states == 0

    def matches(self, data: bytes) -> bool:
        """Whether the whole of ``data`` is in the language (for tests and tools)."""
        if self.is_empty:
            return False
        q = self.start
        for b in data:
            q = int(self.trans[q, b])
            if q < 0:
                return False
        return bool(self.accepting[q])


EMPTY_DFA = Dfa(np.zeros((0, 256), np.int32), np.zeros(0, bool), 0)


def minimize_table(table: np.ndarray, accepting: np.ndarray, start: int, symbol_class: np.ndarray) -> Dfa:
    """:func:`leapgen.automata.dfa.minimize` of the DFA whose transitions are ``table[:, symbol_class]``.

    Trimming and minimizing work on the class-level ``table`` (int32,
    ``(n, n_classes)``, -1 = dead); only the minimal DFA is widened to
    ``len(symbol_class)`` columns. ``accepting``: bool ``(n,)``. Does not
    mutate its arguments.
    """
    new_table, new_accepting = minimize_table_kernel(np.ascontiguousarray(table), np.ascontiguousarray(accepting),
                                                     int(start), np.ascontiguousarray(symbol_class, np.int32))
    if not len(new_accepting):
        return EMPTY_DFA
    return Dfa(new_table, new_accepting, 0)
