"""Small DFAs over Unicode code points, for front-ends that must decide a
language before it becomes IR (Lark terminals: :mod:`leapgen.grammar.pyregex`).

Transitions are sorted, disjoint ``(lo, hi, target)`` code-point intervals.
What is here: trimming and Moore minimization (accepting states coloured by
their *exit set*), language equivalence by a product walk, the first
characters of a language, a DFA with its first move restricted or its
accepting states restricted, and conversion back to IR by state elimination
(Brzozowski and McCluskey, 1963). Pure Python: these DFAs have tens of states.
"""

from __future__ import annotations

from dataclasses import dataclass

from leapgen.grammar import ir


@dataclass(frozen=True)
class CharDfa:
    """A DFA over code points; state 0 is the start.

    Attributes
    ----------
    trans : list of list of (int, int, int)
        Per state, sorted disjoint ``(lo, hi, target)`` intervals.
    accept : list of bool
    exit : list of (tuple of (int, int)) or None
        Per accepting state, the code points that must not follow a match
        ending there (see :func:`leapgen.grammar.pyregex._exit_set`); ``()``
        when nothing is excluded (and for rejecting states); None when what
        may follow depends on more than one character.
    """

    trans: list
    accept: list
    exit: list

    @property
    def num_states(self) -> int:
        return len(self.accept)

    def accepts_empty(self) -> bool:
        """Whether the empty string is in the language."""
        return bool(self.accept) and self.accept[0]


def _trim(dfa: CharDfa) -> CharDfa:
    """Drop the states that cannot reach an accepting state (and edges into them)."""
    n = dfa.num_states
    preds: list[set] = [set() for _ in range(n)]
    for s, row in enumerate(dfa.trans):
        for _lo, _hi, t in row:
            preds[t].add(s)
    alive = set()
    todo = [s for s in range(n) if dfa.accept[s]]
    while todo:
        s = todo.pop()
        if s not in alive:
            alive.add(s)
            todo.extend(preds[s])
    if 0 not in alive:
        return CharDfa([[]], [False], [()])
    order = [0] + [s for s in range(1, n) if s in alive]
    new = {s: i for i, s in enumerate(order)}
    trans = [[(lo, hi, new[t]) for lo, hi, t in dfa.trans[s] if t in new] for s in order]
    return CharDfa(trans, [dfa.accept[s] for s in order], [dfa.exit[s] for s in order])


def minimize(dfa: CharDfa) -> CharDfa:
    """The trimmed minimal DFA of ``dfa``, accepting states kept apart by exit set
    (Moore's partition refinement). Does not mutate ``dfa``."""
    dfa = _trim(dfa)
    n = dfa.num_states
    colour = {}
    block = [colour.setdefault((dfa.accept[s], dfa.exit[s]), len(colour)) for s in range(n)]
    while True:
        sigs: dict = {}
        new_block = []
        for s in range(n):
            row = []
            for lo, hi, t in dfa.trans[s]:
                b = block[t]
                if row and row[-1][2] == b and row[-1][1] + 1 == lo:
                    row[-1] = (row[-1][0], hi, b)
                else:
                    row.append((lo, hi, b))
            new_block.append(sigs.setdefault((block[s], tuple(row)), len(sigs)))
        if len(sigs) == len(set(block)):
            break
        block = new_block
    # renumber with the start's block first
    order = {block[0]: 0}
    for s in range(n):
        order.setdefault(block[s], len(order))
    m = len(order)
    trans: list = [None] * m
    accept = [False] * m
    exits: list = [()] * m
    for s in range(n):
        b = order[block[s]]
        if trans[b] is None:
            row = []
            for lo, hi, t in dfa.trans[s]:
                tb = order[block[t]]
                if row and row[-1][2] == tb and row[-1][1] + 1 == lo:
                    row[-1] = (row[-1][0], hi, tb)
                else:
                    row.append((lo, hi, tb))
            trans[b] = row
            accept[b] = dfa.accept[s]
            exits[b] = dfa.exit[s]
    return CharDfa(trans, accept, exits)


def _step(row, lo: int) -> tuple[int, int]:
    """(target, end of the interval) of the code point ``lo`` in ``row``; target -1 if none:
    then the end is the code point before the next interval."""
    for a, b, t in row:
        if a <= lo <= b:
            return t, b
        if a > lo:
            return -1, a - 1
    return -1, ir.MAX_UNICODE


def equivalent(a: CharDfa, b: CharDfa) -> bool:
    """Whether ``a`` and ``b`` accept the same strings (product walk)."""
    seen = {(0, 0)}
    todo = [(0, 0)]
    while todo:
        sa, sb = todo.pop()
        acc_a = sa >= 0 and a.accept[sa]
        acc_b = sb >= 0 and b.accept[sb]
        if acc_a != acc_b:
            return False
        lo = 0
        while lo <= ir.MAX_UNICODE:
            ta, ea = _step(a.trans[sa], lo) if sa >= 0 else (-1, ir.MAX_UNICODE)
            tb, eb = _step(b.trans[sb], lo) if sb >= 0 else (-1, ir.MAX_UNICODE)
            if (ta >= 0 or tb >= 0) and (ta, tb) not in seen:
                seen.add((ta, tb))
                todo.append((ta, tb))
            lo = min(ea, eb) + 1
    return True


def first_ranges(dfa: CharDfa) -> tuple[tuple[int, int], ...]:
    """The code points a non-empty string of the (trimmed) language can start with."""
    return ir.normalize_ranges([(lo, hi) for lo, hi, _t in dfa.trans[0]], ir.MAX_UNICODE)


def without_first(dfa: CharDfa, ranges) -> CharDfa:
    """The language minus the strings that start with a code point in ``ranges``."""
    banned = ir.normalize_ranges(ranges, ir.MAX_UNICODE)
    row = []
    for lo, hi, t in dfa.trans[0]:
        for a, b in ir.complement_ranges(banned, ir.MAX_UNICODE):
            x, y = max(lo, a), min(hi, b)
            if x <= y:
                row.append((x, y, t + 1))
    # a new start state (0) in front of a copy of every state (shifted by one)
    trans = [row] + [[(lo, hi, t + 1) for lo, hi, t in r] for r in dfa.trans]
    return minimize(CharDfa(trans, [dfa.accept[0]] + list(dfa.accept), [dfa.exit[0]] + list(dfa.exit)))


def ending_with_exit(dfa: CharDfa, exit_set) -> CharDfa:
    """The strings of the language whose accepting state has exit set ``exit_set``."""
    accept = [a and e == exit_set for a, e in zip(dfa.accept, dfa.exit)]
    return minimize(CharDfa(dfa.trans, accept, [e if a else () for a, e in zip(accept, dfa.exit)]))


def to_ir(dfa: CharDfa) -> ir.Node:
    """The DFA's language as IR, by state elimination. Does not mutate ``dfa``."""
    n = dfa.num_states
    edges: dict = {}
    for s, row in enumerate(dfa.trans):
        by_target: dict = {}
        for lo, hi, t in row:
            by_target.setdefault(t, []).append((lo, hi))
        for t, ranges in by_target.items():
            edges[(s, t)] = ir.charset(ranges)
    return graph_to_ir(n, edges, 0, [s for s in range(n) if dfa.accept[s]])


def graph_to_ir(num_nodes: int, edges: dict, start: int, finals) -> ir.Node:
    """The language of the paths from ``start`` to any of ``finals`` in a graph whose edges
    ``(i, j) -> ir.Node`` are labelled with languages, by state elimination (nodes with the
    fewest paths through them first). Does not mutate ``edges``."""
    if num_nodes == 0:
        return ir.NOTHING
    src, dst = num_nodes, num_nodes + 1
    edges = dict(edges)
    edges[(src, start)] = ir.EMPTY
    for f in finals:
        edges[(f, dst)] = ir.alt(edges[(f, dst)], ir.EMPTY) if (f, dst) in edges else ir.EMPTY
    remaining = set(range(num_nodes))
    while remaining:
        def cost(k):
            ins = sum(1 for (i, j) in edges if j == k and i != k)
            outs = sum(1 for (i, j) in edges if i == k and j != k)
            return ins * outs
        k = min(sorted(remaining), key=cost)
        remaining.discard(k)
        loop = edges.pop((k, k), None)
        middle = ir.star(loop) if loop is not None else ir.EMPTY
        ins = [(i, e) for (i, j), e in edges.items() if j == k]
        outs = [(j, e) for (i, j), e in edges.items() if i == k]
        for i, _ in ins:
            del edges[(i, k)]
        for j, _ in outs:
            del edges[(k, j)]
        for i, ei in ins:
            for j, ej in outs:
                path = ir.seq(ei, middle, ej)
                edges[(i, j)] = ir.alt(edges[(i, j)], path) if (i, j) in edges else path
    return edges.get((src, dst), ir.NOTHING)
