"""Context-free grammar analysis: which rules are really recursive.

Rules that are not part of a reference cycle are inlined, so a grammar whose
recursion is only apparent compiles to one DFA (the fast path). Only rules in
a cycle (Tarjan's strongly connected components) stay as rules for the
pushdown matcher.
"""

from __future__ import annotations

from leapgen.errors import GrammarError
from leapgen.grammar import ir


def rule_refs(node: ir.Node) -> frozenset[str]:
    """Names of the rules ``node`` refers to (cached on the IR: :func:`leapgen.grammar.ir.ref_names`)."""
    return ir.ref_names(node)


def _recursive_rules(graph: dict[str, set[str]]) -> set[str]:
    """Rules on a reference cycle (iterative Tarjan SCC)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: set[str] = set()
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph[v]:
                    out.update(comp)
    return out


def _rebuild(on_ref):
    """A memoized function: IR with every rule reference replaced by ``on_ref(ref, rebuild)``
    (``rebuild`` is the function itself, to rebuild what it returns)."""
    return ir.rewriter(lambda node, rebuild: on_ref(node, rebuild) if isinstance(node, ir.RuleRef) else None,
                       keep=lambda node: not ir.ref_names(node))  # nothing to replace below (leaves included)


def _inliner(rules: dict, kept: set):
    """A memoized function: IR with every reference to a rule not in ``kept`` replaced by its body."""
    return _rebuild(lambda ref, inline: ref if ref.name in kept else inline(rules[ref.name]))


def rename_rules(grammar: ir.Grammar, prefix: str) -> ir.Grammar:
    """``grammar`` with ``prefix`` put before every rule name (definitions, references, the
    root, ``keep`` and ``options``), to merge it into another grammar without name clashes. Pure."""
    rename = _rebuild(lambda ref, _: ir.RuleRef(prefix + ref.name))
    return ir.Grammar({prefix + name: rename(body) for name, body in grammar.rules.items()}, prefix + grammar.root,
                      frozenset(prefix + name for name in grammar.keep),
                      {prefix + name: o for name, o in grammar.options.items()})


def inline_rules(rules: dict, root: str) -> ir.Node:
    """``rules[root]`` with every rule reference inlined, for rules that the
    caller knows do not recurse (what :func:`simplify_grammar` gives when it
    keeps no rule, without its analysis).

    Raises
    ------
    KeyError
        A reference to an undefined rule.
    RecursionError
        The rules do recurse (or nest too deeply).
    """
    return _inliner(rules, set())(rules[root])


def simplify_grammar(grammar: ir.Grammar, refs: dict[str, set[str]] | None = None) -> ir.Node | ir.Grammar:
    """Inline every rule that is not recursive (nor in ``grammar.keep``, nor a rule of ``grammar.keyed``,
    nor with rule options: a matcher must see when those are active).

    Parameters
    ----------
    grammar : ir.Grammar
    refs : dict of str to set of str, optional
        ``rule_refs`` of each rule body, when the caller has them already.

    Returns
    -------
    ir.Node
        When no recursion (and no rule with options) remains reachable from
        the root: one regular IR.
    ir.Grammar
        Otherwise: the root and the recursive rules it reaches, with all other
        references inlined.

    Raises
    ------
    GrammarError
        A reference to an undefined rule, or an undefined root.
    """
    rules = grammar.rules
    if grammar.root not in rules:
        raise GrammarError(f"root rule {grammar.root!r} is not defined")
    graph = refs if refs is not None else {name: rule_refs(body) for name, body in rules.items()}
    for name, targets in graph.items():
        for r in sorted(targets):
            if r not in rules:
                raise GrammarError(f"rule {name!r} refers to undefined rule {r!r}")
    keyed_rules = {name for obj in grammar.keyed for name in obj.rules}
    options = {k: v for k, v in grammar.options.items() if k in rules}
    recursive = _recursive_rules(graph) | ((set(grammar.keep) | keyed_rules) & rules.keys()) | options.keys()
    inline = _inliner(rules, recursive)

    root_body = inline(rules[grammar.root])
    if not ir.contains_ruleref(root_body) and grammar.root not in options:
        return root_body
    kept = {grammar.root: root_body}
    todo = sorted(rule_refs(root_body))
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        kept[name] = inline(rules[name])
        todo.extend(sorted(rule_refs(kept[name]) - kept.keys()))
    keyed = tuple(obj for obj in grammar.keyed if obj.rule in kept)
    return ir.Grammar(kept, grammar.root, frozenset(k for k in grammar.keep if k in kept), keyed,
                      {k: v for k, v in options.items() if k in kept})
