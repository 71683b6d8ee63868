"""Repeat fragments kept across compiles (leapgen.automata.nfa._FRAGMENTS) give the same automata."""

from __future__ import annotations

import numpy as np

from leapgen.automata import compile_dfa, dfa as dfa_module, nfa
from leapgen.grammar.json import json_schema_to_ir

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}},
                                           "c": {"type": "string", "maxLength": 3}}}


def _fresh_dfa(node):
    nfa._FRAGMENTS.clear()
    dfa_module._SUB_DFA_CACHE.clear()
    return compile_dfa(node)


def test_pasted_fragments_give_the_same_dfa():
    node, _ = json_schema_to_ir(SCHEMA, any_whitespace=False)
    first = _fresh_dfa(node)
    assert nfa._FRAGMENTS, "no Repeat fragment was kept"
    dfa_module._SUB_DFA_CACHE.clear()  # the whole-node cache would skip the NFA: build it again, pasting
    again = compile_dfa(node)
    assert again.start == first.start
    assert np.array_equal(again.trans, first.trans) and np.array_equal(again.accepting, first.accepting)
    for text, ok in [(b'{"a":"x","b":[1,-2],"c":"abc"}', True), (b'{"b":[]}', True), (b'{"c":"abcd"}', False)]:
        assert again.matches(text) == ok


def test_fragments_are_shared_across_schemas_and_stay_read_only():
    nfa._FRAGMENTS.clear()
    compile_dfa(json_schema_to_ir({"type": "array", "items": {"type": "string"}}, any_whitespace=False)[0])
    kept = dict(nfa._FRAGMENTS)
    node, _ = json_schema_to_ir({"type": "object", "properties": {"s": {"type": "string"}}}, any_whitespace=False)
    assert any(key in kept for key in _repeats(node)), "the string content's fragment was not reused"
    for fragment in kept.values():
        assert not fragment.eps.flags.writeable and not fragment.edges.flags.writeable
    dfa_module._SUB_DFA_CACHE.clear()
    with_cache = compile_dfa(node)
    assert np.array_equal(with_cache.trans, _fresh_dfa(node).trans)


def _repeats(node):
    from leapgen.grammar import ir

    return [n for n in ir.iter_nodes(node) if isinstance(n, ir.Repeat)]
