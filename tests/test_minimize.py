"""DFA minimization (Valmari-Lehtinen kernel) against Moore's algorithm written here.

Random partial DFAs over a few symbol classes, each class some symbol's (as the
callers' byte classes are): :func:`minimize_table` must give
the same automaton, up to state numbering, as trimming by two graph searches and
Moore's partition refinement in plain Python (no code shared with leapgen).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from leapgen.automata.dfa import minimize_table


def moore_minimal(table: np.ndarray, accepting: np.ndarray, start: int, symbol_class: np.ndarray) -> tuple:
    """The minimal trimmed DFA of ``table[:, symbol_class]`` from ``start``, in breadth-first
    numbering from the start over symbols: ``(transitions, accepting)``; ``()`` for the empty language."""
    n, width = table.shape
    reach, todo = {start}, [start]
    while todo:
        q = todo.pop()
        for t in table[q]:
            if t >= 0 and t not in reach:
                reach.add(int(t))
                todo.append(int(t))
    live = {q for q in reach if accepting[q]}
    changed = True
    while changed:
        changed = False
        for q in reach - live:
            if any(t >= 0 and t in live for t in table[q]):
                live.add(q)
                changed = True
    if start not in live:
        return ()
    block = {q: int(accepting[q]) for q in live}
    while True:  # Moore: split by (own block, blocks of the successors) until stable
        sig = {q: (block[q], *(block.get(int(t), -1) if t >= 0 else -1 for t in table[q])) for q in live}
        ids: dict = {}
        new = {q: ids.setdefault(sig[q], len(ids)) for q in sorted(live)}
        if len(ids) == len(set(block.values())):
            break
        block = new
    return _bfs(lambda b, a: _succ(table, live, block, b, a, symbol_class), block[start],
                lambda b: bool(accepting[next(q for q in live if block[q] == b)]), len(symbol_class))


def _succ(table, live, block, b, a, symbol_class):
    q = next(q for q in sorted(live) if block[q] == b)
    t = int(table[q, symbol_class[a]])
    return block[t] if t >= 0 and t in live else -1


def _bfs(succ, start, accepting, n_symbols) -> tuple:
    order, trans, acc = {start: 0}, [], []
    queue = [start]
    while queue:
        b = queue.pop(0)
        row = []
        for a in range(n_symbols):
            t = succ(b, a)
            if t >= 0 and t not in order:
                order[t] = len(order)
                queue.append(t)
            row.append(order[t] if t >= 0 else -1)
        trans.append(tuple(row))
        acc.append(accepting(b))
    return tuple(trans), tuple(acc)


@st.composite
def partial_dfas(draw):
    n = draw(st.integers(1, 14))
    width = draw(st.integers(1, 4))
    cells = draw(st.lists(st.integers(-1, n - 1), min_size=n * width, max_size=n * width))
    table = np.array(cells, np.int32).reshape(n, width)
    accepting = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    start = draw(st.integers(0, n - 1))
    # every class is some symbol's, as the callers' byte classes are
    symbols = draw(st.permutations(list(range(width)) + draw(st.lists(st.integers(0, width - 1), max_size=3))))
    symbol_class = np.array(symbols, np.int32)
    return table, accepting, start, symbol_class


@settings(max_examples=400, deadline=None)
@given(partial_dfas())
def test_minimize_table_matches_moore(dfa):
    table, accepting, start, symbol_class = dfa
    got = minimize_table(table, accepting, start, symbol_class)
    want = moore_minimal(table, accepting, start, symbol_class)
    if not want:
        assert got.is_empty
        return
    mine = _bfs(lambda q, a: int(got.trans[q, a]), got.start, lambda q: bool(got.accepting[q]), len(symbol_class))
    assert mine == want
    assert got.n_states == len(want[0])  # no unreachable or duplicate block left over
