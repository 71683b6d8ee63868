"""Which rules of a compiled JSON Schema stay rules (the rest is inlined).

The front-end makes a rule of every ``$ref`` target and of large array items
and property values (:meth:`leapgen.grammar.json.schema._Compiler.rule`).
Recursive rules must stay rules. A non-recursive rule is inlined (one regular
language, the fast path) unless inlining would copy a large body many times:
the automaton construction expands the IR as a tree, so a 5,000-node
definition used in 20 places, or an array item (written twice: first item,
then ``("," item)*``) nested a few levels deep, multiplies the automaton.

:func:`kept_rules` estimates, for each rule, its size with everything below it
inlined and how many copies inlining would make (uses multiply down the
reference graph), and keeps the rules whose copies cost more than a budget;
the budget shrinks until the whole expansion fits :data:`TARGET_SIZE`.
Kept rules are matched by the pushdown layer (a call per use), like
recursive ones.
"""

from __future__ import annotations

from collections import Counter

from .. import ir
from ..cfg import _recursive_rules, rule_refs
from ..ir import Node

TARGET_SIZE = 40_000
"""Expanded IR nodes (about NFA states) above which rules are kept."""
DUPLICATION_BUDGETS = (20_000, 5_000, 1_500, 400)
"""Successive thresholds on ``size * (uses - 1)`` (nodes copied by inlining)."""


def _size(node: Node, ref_size: dict, memo: dict) -> int:
    """Tree-expanded size of ``node`` (as :func:`leapgen.grammar.ir.tree_size`), a rule
    reference costing ``ref_size[name]``."""
    if type(node) is ir.RuleRef:
        return ref_size.get(node.name, 1)
    if not ir.ref_names(node):  # no reference below (leaves included): the size cached on the node
        return ir.tree_size(node)
    hit = memo.get(node)
    if hit is not None:
        return hit
    out = memo[node] = ir.size_from_children(node, [_size(k, ref_size, memo) for k in ir.children(node)])
    return out


def grammar_size(rules: dict) -> int:
    """Tree-expanded size of all rule bodies, each rule reference counting 1."""
    memo: dict = {}
    return sum(_size(b, {}, memo) for b in rules.values())


def expanded_size(rules: dict) -> int:
    """Tree-expanded size of ``rules["root"]`` with every rule inlined; the
    other rules listed each after the rules its body refers to (as the JSON
    front-end makes its rule candidates), none recursive."""
    full: dict = {}
    memo: dict = {}
    for name, body in rules.items():
        if name != "root":
            full[name] = _size(body, full, memo)
    return _size(rules["root"], full, memo)


_NO_REFS: Counter = Counter()  # shared by every subterm without references: never mutated


def _occurrences(node: Node, memo: dict) -> Counter:
    """Rule references in the tree expansion of ``node``, with multiplicity
    (a Counter shared with other subterms: do not mutate it)."""
    if not ir.ref_names(node):
        return _NO_REFS
    hit = memo.get(node)
    if hit is not None:
        return hit
    if isinstance(node, ir.RuleRef):
        out = Counter({node.name: 1})
    elif isinstance(node, (ir.Seq, ir.Alt, ir.Intersect, ir.Repeat, ir.Subsets, ir.Join)):
        if isinstance(node, ir.Repeat):
            parts = [(_occurrences(node.item, memo), max(node.hi if node.hi is not None else node.lo + 1, 1))]
        elif isinstance(node, ir.Subsets):
            parts = [(_occurrences(i, memo), 1) for i in node.items]
            parts.append((_occurrences(node.sep, memo), len(node.items) - 1))
        elif isinstance(node, ir.Join):  # one copy of each in the automaton: the loop is not unrolled
            parts = [(_occurrences(node.item, memo), 1), (_occurrences(node.sep, memo), 1)]
        else:
            parts = [(_occurrences(i, memo), 1) for i in node.items]
        parts = [(c, m) for c, m in parts if c]
        if not parts:
            out = _NO_REFS
        elif len(parts) == 1 and parts[0][1] == 1:
            out = parts[0][0]
        else:
            out = Counter()
            for c, m in parts:
                for k, v in c.items():
                    out[k] += v * m
    else:
        out = _NO_REFS
    memo[node] = out
    return out


def _topo(rules: dict, graph: dict, starts: list) -> list:
    """Rules reachable from ``starts``, each after every rule that refers to it
    (recursive edges ignored: the caller handles recursive rules apart)."""
    seen, post = set(), []
    for s in starts:
        if s in seen:
            continue
        stack = [(s, iter(sorted(graph[s])))]
        seen.add(s)
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                post.append(name)
            elif nxt not in seen and nxt in rules:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(graph[nxt]))))
    return post[::-1]


def kept_rules(rules: dict, root: str, refs: dict | None = None) -> frozenset:
    """The non-recursive rules of ``rules`` to keep as rules (see the module
    docstring); ``refs``: each body's ``rule_refs``, when the caller has them."""
    refs = refs if refs is not None else {n: rule_refs(b) for n, b in rules.items()}
    graph = {n: refs[n] & rules.keys() for n in rules}
    recursive = _recursive_rules(graph)
    starts = [root] + sorted(recursive)
    order = _topo(rules, {n: (set() if n in recursive and n not in starts else graph[n]) for n in graph}, starts)
    order = [n for n in order if n not in recursive or n in starts]
    # sizes with everything non-recursive below inlined (children first)
    full: dict = {n: 1 for n in recursive}
    memo: dict = {}
    for name in reversed(order):
        if name not in recursive:
            full[name] = _size(rules[name], full, memo)
    if not recursive and full[root] <= DUPLICATION_BUDGETS[0]:
        # A rule's copies all lie inside the root's expansion, so size * (uses - 1) < full[root]:
        # no budget keeps anything, and the whole expansion fits TARGET_SIZE (the loop's result, sooner).
        return frozenset()
    occ_memo: dict = {}
    occ = {n: _occurrences(b, occ_memo) for n, b in rules.items()}
    keep: set = set()
    for budget in DUPLICATION_BUDGETS:
        uses: Counter = Counter({root: 1})
        for name in order:
            factor = 1 if (name in recursive or name in keep or name == root) else uses[name]
            if name not in recursive and name != root and name not in keep:
                copies = uses[name]
                if copies >= 2 and full.get(name, 1) * (copies - 1) > budget:
                    keep.add(name)
                    factor = 1
            for child, m in occ[name].items():
                if child not in recursive:
                    uses[child] += factor * m
        # total expansion with these rules kept
        cost = dict.fromkeys(recursive | keep, 1)
        sizes: dict = {}
        size_memo: dict = {}
        for name in reversed(order):
            if name not in cost:
                sizes[name] = _size(rules[name], {**cost, **sizes}, size_memo)
        total = sizes.get(root, 1) + sum(_size(rules[n], {**cost, **sizes}, size_memo) for n in recursive | keep)
        if total <= TARGET_SIZE:
            break
    return frozenset(keep)
