"""Lark's ``%ignore`` in a character-level grammar: the *gaps* of ignored text.

Lark's Earley scanner, where the parser waits for a terminal at position
``i``, also tries each ignored terminal ``X`` there, takes the one match
``re.match(X, text, i)`` and lets the waiting items resume after it (and the
complete start rule, for ignored text at the end). So between two terminals
(and at both ends) lies a *gap*: a sequence of ignored matches, each of them
the match ``re`` returns at its place. Which match ``re`` returns depends on
what follows it: ``[ \\t]+`` ends only before a character that is not a
blank. :func:`leapgen.grammar.pyregex.compile_terminal` gives, for each way
an ignored match can end, its *exit set* ``D``: the match ends there exactly
when the next character is not in ``D``.

So a gap is a path in a small automaton whose nodes are "no ignored match
yet" and one node per exit set; an edge is one ignored match ending with exit
set ``D``, not starting with a character of the previous node's exit set.
The terminal after a gap that ended in node ``D`` must not start with a
character of ``D`` either; at the end of the text anything may end a match.
In front of every terminal occurrence leapgen writes::

    T | gap_D1 (T minus D1...) | gap_D2 (T minus D2...) | ...

(with ``T`` itself wherever ``T`` cannot start with ``D``: the usual case, so
``%ignore WS`` gives ``WS? T``), and after the start rule one more gap.
"""

from __future__ import annotations

from leapgen.errors import GrammarError
from leapgen.grammar import ir
from leapgen.grammar.char_dfa import ending_with_exit, first_ranges, graph_to_ir, to_ir, without_first
from leapgen.grammar.pyregex import Terminal


def _overlap(a, b) -> bool:
    return any(lo <= y and x <= hi for lo, hi in a for x, y in b)


class Gaps:
    """The ignored text around terminals, for one grammar's ``%ignore`` terminals.

    Parameters
    ----------
    ignored : list of Terminal
        The ignored terminals (none: every gap is empty).

    Raises
    ------
    GrammarError
        An ignored terminal whose ``re`` match depends on more than the next
        character.
    """

    def __init__(self, ignored: list[Terminal]):
        pieces = []  # (exit set, dfa of the terminal's matches ending with it)
        for t in ignored:
            exits = {e for a, e in zip(t.dfa.accept, t.dfa.exit) if a}
            if None in exits:
                raise GrammarError("an %ignore terminal whose match (as Python's re takes it) depends on more than "
                                   "the next character after it is not supported")
            pieces += [(e, ending_with_exit(t.dfa, e)) for e in sorted(exits)]
        self.classes = sorted({e for e, _ in pieces})
        node = {e: k + 1 for k, e in enumerate(self.classes)}  # node 0: no ignored match yet
        edges: dict = {}
        for src, before in [(0, ())] + [(node[e], e) for e in self.classes]:
            for e, dfa in pieces:
                piece = to_ir(without_first(dfa, before) if before and _overlap(first_ranges(dfa), before) else dfa)
                if piece != ir.NOTHING:
                    key = (src, node[e])
                    edges[key] = ir.alt(edges[key], piece) if key in edges else piece
        n = len(self.classes) + 1
        self.gap_to = {e: graph_to_ir(n, edges, 0, [node[e]]) for e in self.classes}
        self.gap_to = {e: g for e, g in self.gap_to.items() if g != ir.NOTHING}
        self._before: dict = {}

    def trailing(self) -> ir.Node:
        """The ignored text after the last terminal: any gap."""
        return ir.alt(ir.EMPTY, *self.gap_to.values())

    def before(self, t: Terminal) -> ir.Node:
        """One occurrence of terminal ``t`` with the gap in front of it."""
        got = self._before.get(t.node)
        if got is not None:
            return got
        groups: dict = {t.node: [ir.EMPTY]}  # terminal language -> the gaps that may precede it
        first = first_ranges(t.dfa)
        for e, gap in self.gap_to.items():
            node = to_ir(without_first(t.dfa, e)) if e and _overlap(first, e) else t.node
            groups.setdefault(node, []).append(gap)
        out = ir.alt(*(ir.seq(ir.alt(*gaps), node) for node, gaps in groups.items() if node != ir.NOTHING))
        self._before[t.node] = out
        return out
