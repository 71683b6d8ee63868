"""Left recursion rewritten into repetition, so the pushdown matcher (which
refuses left recursion) accepts grammars written for LALR or Earley parsers.

Only the rules on a left-recursive cycle change. Their bodies are first
opened into alternatives whose leading item is exposed (a leading ``x?``,
``x*`` or group becomes alternatives of its own), then Paull's algorithm
(Aho, Lam, Sethi and Ullman, *Compilers*, 2nd ed., algorithm 4.19) runs over
them: for rules ``A1..An`` in order, an alternative of ``Ai`` that starts
with ``Aj`` (``j < i``) is replaced by ``Aj``'s alternatives followed by the
rest, and then direct left recursion ``A: A a1 | ... | b1 | ...`` becomes
``A: (b1 | ...) (a1 | ...)*``. Every step keeps the language. Left recursion
hidden behind a rule that can be empty is left as it is (the pushdown
compiler then refuses it, naming the rule).
"""

from __future__ import annotations

from leapgen.errors import GrammarError
from leapgen.grammar import ir
from leapgen.grammar.cfg import _recursive_rules

#: Most alternatives one rewritten rule may get (substitution multiplies them).
MAX_ALTERNATIVES = 4096


def nullable_rules(rules: dict) -> set:
    """Names of the rules that can derive the empty string (fixpoint)."""
    out: set = set()
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if name not in out and nullable(body, out):
                out.add(name)
                changed = True
    return out


def nullable(node: ir.Node, null_rules: set) -> bool:
    """Whether ``node`` matches the empty string, given the nullable rules."""
    if isinstance(node, ir.Bytes):
        return not node.data
    if isinstance(node, ir.RuleRef):
        return node.name in null_rules
    if isinstance(node, ir.Seq):
        return all(nullable(i, null_rules) for i in node.items)
    if isinstance(node, ir.Alt):
        return any(nullable(i, null_rules) for i in node.items)
    if isinstance(node, ir.Repeat):
        return node.lo == 0 or nullable(node.item, null_rules)
    if isinstance(node, (ir.Intersect,)):
        return all(nullable(i, null_rules) for i in node.items)
    if isinstance(node, ir.Diff):
        return nullable(node.left, null_rules) and not nullable(node.right, null_rules)
    return False  # ByteSet, CharSet, Join/Subsets of non-empty items


def left_corners(node: ir.Node, null_rules: set, out: set) -> set:
    """Rules that can be called before ``node`` has consumed any text."""
    if isinstance(node, ir.RuleRef):
        out.add(node.name)
    elif isinstance(node, ir.Seq):
        for item in node.items:
            left_corners(item, null_rules, out)
            if not nullable(item, null_rules):
                break
    elif isinstance(node, (ir.Alt, ir.Intersect)):
        for item in node.items:
            left_corners(item, null_rules, out)
    elif isinstance(node, ir.Repeat):
        left_corners(node.item, null_rules, out)
    elif isinstance(node, ir.Diff):
        left_corners(node.left, null_rules, out)
    return out


def _alternatives(node: ir.Node, null_rules: set) -> list[list]:
    """``node`` as alternatives, each a list of items whose first one is a rule reference or a
    node with no leading choice to open (same language: the union of the alternatives)."""
    if isinstance(node, ir.Alt):
        return [p for item in node.items for p in _alternatives(item, null_rules)]
    if isinstance(node, ir.Seq):
        head, rest = node.items[0], list(node.items[1:])
        out = []
        for p in _alternatives(head, null_rules):
            out.extend([p + rest] if p else _alternatives(ir.seq(*rest), null_rules))
        return out
    if isinstance(node, ir.Repeat):
        item, lo, hi = node.item, node.lo, node.hi
        tail = ir.repeat(item, max(lo - 1, 0), None if hi is None else hi - 1)
        heads = _alternatives(item, null_rules)
        out = [] if lo else [[]]
        for p in heads:
            if p:
                out.append(p + [tail])
            elif lo:  # an empty first iteration: the rest of the count comes first
                out.extend(_alternatives(tail, null_rules))
            # lo == 0: an empty iteration adds nothing to item{0,hi}
        return out
    if node == ir.EMPTY:
        return [[]]
    return [[node]]


def remove_left_recursion(rules: dict) -> dict:
    """The rules with left recursion rewritten into repetition.

    Parameters
    ----------
    rules : dict of str to ir.Node
        Rule bodies (not mutated).

    Returns
    -------
    dict of str to ir.Node
        ``rules`` itself when no rule is left-recursive, else a new dict.

    Raises
    ------
    GrammarError
        Rewriting would give a rule more than :data:`MAX_ALTERNATIVES` alternatives.
    """
    null_rules = nullable_rules(rules)
    graph = {name: {r for r in left_corners(body, null_rules, set()) if r in rules} for name, body in rules.items()}
    cyclic = _recursive_rules(graph)
    if not cyclic:
        return rules
    order = sorted(cyclic)
    alts = {name: _alternatives(rules[name], null_rules) for name in order}
    for i, a in enumerate(order):
        earlier = {ref: alts[ref] for ref in order[:i]}
        for _ in range(len(order)):  # substituting may expose another earlier rule
            new, changed = [], False
            for p in alts[a]:
                lead = p[0] if p else None
                if isinstance(lead, ir.RuleRef) and lead.name in earlier:
                    new.extend(q + p[1:] for q in earlier[lead.name])
                    changed = True
                else:
                    new.append(p)
                if len(new) > MAX_ALTERNATIVES:
                    raise GrammarError(f"rewriting the left recursion of rule {a!r} would give it more than "
                                       f"{MAX_ALTERNATIVES} alternatives; write it with repetition")
            alts[a] = new
            if not changed:
                break
        own = ir.RuleRef(a)
        tails = [p[1:] for p in alts[a] if p and p[0] == own]
        if tails:
            base = [p for p in alts[a] if not (p and p[0] == own)]
            loop = ir.star(ir.alt(*(ir.seq(*t) for t in tails if t)))
            alts[a] = [p + [loop] for p in base]
    out = dict(rules)
    for a in order:
        out[a] = ir.alt(*(ir.seq(*p) for p in alts[a]))
    return out
