"""The pushdown runtime's memory (issue 19): interned parse stacks, configurations the garbage
collector does not track, the stack store's bound, and the one-frame fast walk."""

from __future__ import annotations

import gc

import pytest

import numpy as np

from leapgen import AmbiguityLimitError, GrammarCompiler, GrammarMatcher
from leapgen.automata.pda import MAX_CONFIG_STACKS
from leapgen.automata.pda_stacks import EMPTY, StackStore, StackStoreFullError
from leapgen.compiler.compiled import _SCRATCH
from leapgen.compiler.compiled_cfg import CERTAIN, HAS_UNCERTAIN, UNCERTAIN

JSON_GBNF = r'''
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
array  ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" ( [^"\\] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? [0-9]+
'''


def test_equal_stacks_get_one_id_and_share_their_tails():
    store = StackStore()
    a = store.push(7, EMPTY)
    b = store.push(9, a)
    assert store.push(7, EMPTY) == a and store.push(9, a) == b  # interned
    assert store.push(9, EMPTY) != b  # same top, another stack below
    assert store.frames(b, 8) == [9, 7] and store.frames(b, 1) == [9] and store.frames(EMPTY, 3) == []
    assert store.depth[b] == 2 and store.depth[a] == 1 and store.below[b] == a


def test_a_frames_keys_are_part_of_its_stack():
    """A keyed object's frame (issue 15): the same frame with other keys is another stack; keys kept per id."""
    store = StackStore()
    a = store.push(7, EMPTY)
    k = store.push(7, EMPTY, keys=0b101)
    big = store.push(7, EMPTY, keys=1 << 70)  # past 64 bits: the bitset plus a count above it
    assert len({a, k, big}) == 3 and store.push(7, EMPTY, keys=0b101) == k and store.push(7, EMPTY, 0) == a
    assert store.keys == {k: 0b101, big: 1 << 70}  # none kept for a frame without keys
    above = store.push(9, k)
    assert store.keys.get(above, 0) == 0 and store.below[above] == k and store.frames(above, 2) == [9, 7]


def test_the_store_is_bounded_with_a_clear_error():
    store = StackStore(max_stacks=4)  # the empty stack and three more
    s, first = EMPTY, None
    for top in range(3):
        s = store.push(top, s)
        first = first or s
    assert len(store) == 4 and store.push(0, EMPTY) == first  # a stack met before needs no room
    with pytest.raises(StackStoreFullError, match="parse-stack store is full"):
        store.push(99, s)


#: Grammars whose parses multiply with the input (issue 15, GBNF fuzz seed 88, then a small one of its shape).
AMBIGUOUS = [
    ('root ::= "]^\U00010000" "\u0800"{2,} | [1]{0,2} [^9]* | ([ A-Za-z]{1,3} root r1 | [^\\x0A]){1,3} '
     '[a-z0-9] [a-z0-9]\nr1 ::= ([\\--\u00df] [a-z]{0,2} "\\\\" | [^*"/-{] root) | "" root\n'
     'r2 ::= ([y-\u00df] | "@" | "\\u2028") s3\ns3 ::= "" | [a-z0-9]{1,2} s3\n', b"ab" * 20),
    ('root ::= ([a-z]{1,3} root r1 | [a-z]){1,3}\nr1 ::= "" root\n', b"a" * 40),
]


@pytest.mark.parametrize("grammar, text", AMBIGUOUS, ids=["fuzz-seed-88", "small"])
def test_parses_that_multiply_are_refused_by_name_and_the_grammar_stays_usable(toy_info, grammar, text):
    """An exponentially ambiguous grammar: the stacks of one configuration are bounded
    (``AmbiguityLimitError`` naming the rules), long before the grammar's shared stack store fills
    (seed 88 filled its 1,048,576 stacks after 12 bytes, then every request on the grammar failed)."""
    compiled = GrammarCompiler(toy_info).compile_grammar(grammar)
    matcher = GrammarMatcher(compiled)
    bitmask = np.zeros((1, (toy_info.vocab_size + 31) // 32), np.int32)
    with pytest.raises(AmbiguityLimitError, match=r"too ambiguous .* rules 'root' \("):
        for i in range(len(text)):  # byte by byte, a mask at each: whichever expands first refuses
            assert matcher.accept_string(text[i:i + 1])
            matcher.fill_next_token_bitmask(bitmask)
    assert len(compiled.pda.stacks) < 8 * MAX_CONFIG_STACKS
    fresh = GrammarMatcher(compiled)
    assert fresh.accept_string(text[:4]) and fresh.fill_next_token_bitmask(bitmask) is not None


def test_a_budgeted_grammar_bounds_its_parses_too(toy_info):
    """The budgeted runtime (a rule with ``max_chars``) has its own expansion: the same bound, by name."""
    compiled = GrammarCompiler(toy_info).compile_grammar(
        'root ::= "<" q ">"\nq[max_chars=60] ::= ([a-z]{1,3} q r1 | [a-z]){1,3}\nr1 ::= "" q\n')
    matcher = GrammarMatcher(compiled)
    assert matcher.accept_string("<")
    with pytest.raises(AmbiguityLimitError, match=r"too ambiguous .* rules 'q' \("):
        for _ in range(40):
            assert matcher.accept_string("a")
    fresh = GrammarMatcher(compiled)
    assert fresh.accept_string("<a>") and fresh.is_completed()


@pytest.mark.parametrize("grammar", ['root ::= r1 | "a"\nr1 ::= "b" r1\n',
                                     'root ::= r1 root | "a"\nr1 ::= "b" r1 | "c" r1\n',
                                     'root ::= "a" | r1\nr1 ::= ""? r1 "b"\n'])
def test_a_rule_that_never_finishes_is_dropped_where_it_is_called(toy_info, grammar):
    """A rule that only ever calls itself derives nothing: the calls of it go, the rest of the grammar
    stays (issue 15, GBNF fuzz seeds 200022, 200299 and 200362: its automaton minimized to no state at all,
    and the left-recursion check raised IndexError)."""
    compiled = GrammarCompiler(toy_info).compile_grammar(grammar)
    m = GrammarMatcher(compiled)
    assert m.accept_string("a") and m.is_completed()
    assert not GrammarMatcher(compiled).accept_string("b")


@pytest.fixture(scope="module")
def json_grammar(toy_info):
    return GrammarCompiler(toy_info).compile_grammar(JSON_GBNF)


def test_configurations_and_caches_hold_nothing_the_collector_tracks(json_grammar):
    """Stacks are ints, configurations sorted tuples of them, expansions plain tuples: after one
    collection nothing of the runtime's caches is tracked (Stack objects and frozensets were most of
    what a full collection walked: 100-200 ms pauses)."""
    m = GrammarMatcher(json_grammar)
    assert m.accept_string('{"a":[1,{"b":"x\\n"},[true,"y"]],"c":null}')
    states = []
    m2 = GrammarMatcher(json_grammar)
    for ch in '[{"k":[[1,2],"s"]}':
        assert m2.accept_string(ch)
        states.append(m2.state)
    for _ in range(4):  # a tuple is untracked once its items are: nested tuples take a pass per level
        gc.collect()
    assert all(type(s) is tuple and all(type(x) is int for x in s) for s in states)
    assert not any(gc.is_tracked(s) for s in states)
    assert not any(gc.is_tracked(k) or gc.is_tracked(v) for k, v in json_grammar._expansions.items())
    assert not any(gc.is_tracked(k) or gc.is_tracked(v) for k, v in json_grammar._steps.items())
    assert not any(gc.is_tracked(v) for v in json_grammar._frame_tokens.values())


def test_the_one_frame_walk_agrees_with_byte_steps(json_grammar):
    """``walk`` takes rule-internal bytes without the step cache; the result is the configuration
    byte-by-byte steps reach (same ids: stacks are interned)."""
    for text in (b'{"key":"a long string value with \\" quotes","n":-12345}', b'[[["abc"]],"de"]', b'"unfinished'):
        state = json_grammar.start_state
        for b in text:
            state = json_grammar.step(state, b)
        assert json_grammar.walk(json_grammar.start_state, text) == state
    assert json_grammar.walk(json_grammar.start_state, b'{"a":}') is None


def _whole(inner, entry) -> np.ndarray:
    """The uint32 row of a row-cache entry (whole or packed)."""
    words = np.empty(inner.token_index.bitmask_words, np.uint32)
    inner._write_entry(entry, words)
    return words


def test_frame_sorts_keep_their_sets_while_others_are_sorted(grammar_compiler):
    """A frame sort computes its certain set in a row the thread lends and keeps it as a row-cache
    entry (packed where small), and lends its uncertain set from a spare kept per thread, given back
    only where the set stayed empty: a set it returns is never written by a later sort, and is neither
    a lent row nor the spare (equal dense certain sets are one shared read-only row)."""
    compiled = grammar_compiler("llama3").compile_grammar(JSON_GBNF)
    inner = getattr(compiled, "compiled", compiled)
    states = np.flatnonzero(inner.pda.has_bytes_flat).tolist()
    sorts = [inner._sort_frame(g) for g in states]  # not the cache: each one sorted now
    assert sum(s[HAS_UNCERTAIN] for s in sorts) >= 3  # some frames with uncertain tokens, sorted before others
    assert sum(len(s[CERTAIN]) == 4 for s in sorts) > len(sorts) // 2  # most certain sets packed
    before = [(_whole(inner, s[CERTAIN]), s[UNCERTAIN].copy()) for s in sorts]
    for g in states:
        inner._sort_frame(g)
    for (certain, uncertain), s in zip(before, sorts):
        assert np.array_equal(certain, _whole(inner, s[CERTAIN])) and np.array_equal(uncertain, s[UNCERTAIN])
    lent = [w for rows in getattr(_SCRATCH, "rows", {}).values() for w in rows]
    certain = [a for s in sorts for a in s[CERTAIN][:len(s[CERTAIN]) // 2]]  # the arrays of packed or whole entries
    # frames with equal dense sets share one read-only whole row (the vocabulary's SharedRows): counted once
    unique = {id(a): a for a in certain}
    assert all(not unique[i].flags.writeable for i in {id(a) for a in certain} if sum(a is unique[i] for a in certain) > 1)
    certain = list(unique.values())
    kept = ([s[UNCERTAIN] for s in sorts if s[HAS_UNCERTAIN]] + certain + lent
            + [getattr(inner.token_index._spare, "words", None)])
    addresses = [a.__array_interface__["data"][0] for a in kept if a is not None and a.nbytes]
    assert len(set(addresses)) == len(addresses)  # no set is another's, nor a row lent next


def test_rows_shared_with_the_frame_sorts_are_exact(grammar_compiler):
    """A configuration's row equal to its top frame's certain tokens is kept as the frame sort's own
    entry (not a copy); rows that need stop-token bits are kept apart, so the frame sort keeps none.
    Written into a bitmask that held garbage, each row has the stop bits exactly where the input may end."""
    compiled = grammar_compiler("llama3").compile_grammar(JSON_GBNF)
    inner = getattr(compiled, "compiled", compiled)
    stop = inner.token_index.stop_token_ids.tolist()
    shared = 0
    out = np.empty(inner.token_index.bitmask_words, np.int32)
    for text in ('{"a":[1,"b"],"c":true}', "123"):  # a number may end where more digits may follow
        m = GrammarMatcher(compiled)
        for i in range(len(text) + 1):
            out[:] = -1
            inner.write_row(m.state, out)
            words = out.view(np.uint32)
            completed = inner.is_accepting(m.state)
            assert all(bool((int(words[t >> 5]) >> (t & 31)) & 1) == completed for t in stop)
            shared += any(inner._rows[m.state] is f[CERTAIN] for f in inner._frame_tokens.values())
            assert np.array_equal(words, inner.bitmask_row(m.state)[0].view(np.uint32))  # the whole row alike
            assert i == len(text) or m.accept_string(text[i])
        assert completed
    assert shared >= 5
    for f in inner._frame_tokens.values():  # no stop bit leaked into a frame sort
        assert not inner.token_index.any_stop_bits(_whole(inner, f[CERTAIN]))


def test_the_rule_automata_are_rebuilt_exactly_from_the_global_tables():
    """``Pda.dfas`` is rebuilt from the global byte table and the call edges (the rule tables are not
    kept): every rule's table, accepting flags and start equal the automata the grammar was built from."""
    from leapgen.automata.dfa import compile_dfa
    from leapgen.automata.pda import Pda, RuleDfas
    from leapgen.grammar.ebnf import parse_ebnf

    grammar = parse_ebnf(JSON_GBNF)
    names = [grammar.root] + [n for n in grammar.rules if n != grammar.root]
    ids = {n: i for i, n in enumerate(names)}
    built = [compile_dfa(grammar.rules[n], max_states=10_000, rule_ids=ids) for n in names]
    pda = Pda.from_rule_dfas(names, built)
    assert isinstance(pda.dfas, RuleDfas) and len(pda.dfas) == len(built)
    assert (pda.dfas[1:3][0].trans == pda.dfas[1].trans).all() and pda.dfas[-1].start == built[-1].start
    for want, got in zip(built, pda.dfas):
        assert got.trans.shape == want.trans.shape and got.start == want.start
        assert (got.trans == want.trans).all() and (got.accepting == want.accepting).all()
    assert any((d.trans[:, 256:] >= 0).any() for d in pda.dfas)  # the calls are there too
    with pytest.raises(IndexError):
        pda.dfas[len(built)]


def _canonical(dfa) -> list:
    """The DFA's states renumbered in breadth-first order from the start (equal for isomorphic DFAs)."""
    order, seen = [dfa.start], {dfa.start: 0}
    for q in order:
        for t in dfa.trans[q].tolist():
            if t >= 0 and t not in seen:
                seen[t] = len(order)
                order.append(t)
    return [([seen.get(t, -1) if t >= 0 else -1 for t in dfa.trans[q].tolist()], bool(dfa.accepting[q]))
            for q in order]


def test_a_rule_calling_no_rule_comes_from_the_sub_dfa_cache_and_equals_the_nfa_build(monkeypatch):
    """A rule body with no rule reference (a string with its lengths written out) is the cached
    bytes-only automaton widened with dead call columns: isomorphic to what the rule's own NFA
    build gives, and built once for every grammar that holds it."""
    import leapgen.automata.dfa as dfa_module
    from leapgen.automata.nfa import Nfa
    from leapgen.automata.subset import determinize_classes
    from leapgen.automata.dfa_table import minimize_table
    from leapgen.grammar import ir
    from leapgen.grammar.json.strings import quoted, string_content

    body, ids = quoted(string_content(0, 40)), {"root": 0, "a": 1, "b": 2}
    dfa_module._SUB_DFA_CACHE.clear()
    got = dfa_module.compile_dfa(body, max_states=10_000, rule_ids=ids)
    assert got.trans.shape[1] == 256 + 3 and (got.trans[:, 256:] == -1).all()
    assert (body, 10_000) in dfa_module._SUB_DFA_CACHE  # kept for the next grammar
    nfa = Nfa(10_000, lambda n: dfa_module.compile_dfa(n, max_states=10_000), rule_ids=ids)
    nfa.root = body
    start, end = nfa.build(body)
    table, accepting, starts, classes = determinize_classes(nfa, [start], end, 10_000, alphabet=259)
    want = minimize_table(table, accepting, starts[0], classes)
    assert _canonical(got) == _canonical(want)
    calls = []
    monkeypatch.setattr(dfa_module, "determinize_classes", lambda *a, **k: calls.append(1))
    again = dfa_module.compile_dfa(body, max_states=10_000, rule_ids={"root": 0, "x": 1})
    assert not calls and again.trans.shape[1] == 258 and (again.trans[:, :256] == got.trans[:, :256]).all()
    monkeypatch.undo()
    ref = dfa_module.compile_dfa(ir.seq(body, ir.RuleRef("a")), max_states=10_000, rule_ids=ids)
    assert (ref.trans[:, 257] >= 0).any()  # a body with a reference still calls it
