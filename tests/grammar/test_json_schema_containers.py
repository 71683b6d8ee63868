"""JSON Schema front-end: objects (member order, commas, additionalProperties)
and arrays (prefixItems, items, length bounds), end to end through the DFA."""

from __future__ import annotations

import functools
import json
import time

import pytest

from leapgen.errors import SchemaError
from leapgen.grammar import ir
from leapgen.grammar.json import json_schema_to_ir

automata = pytest.importorskip("leapgen.automata")


@functools.lru_cache(maxsize=None)
def _dfa(schema_text: str, opts: tuple):
    node, _ = json_schema_to_ir(json.loads(schema_text), **dict(opts))
    assert isinstance(node, ir.Node), "these schemas are regular"
    return automata.compile_dfa(node)


def dfa(schema, **opts):
    return _dfa(json.dumps(schema), tuple(sorted(opts.items())))


def ok(schema, text: str, **opts) -> bool:
    return dfa(schema, **opts).matches(text.encode("utf-8"))


def check(schema, accept=(), reject=(), **opts):
    d = dfa(schema, **opts)
    bad_a = [s for s in accept if not d.matches(s.encode())]
    bad_r = [s for s in reject if d.matches(s.encode())]
    assert not bad_a and not bad_r, f"wrongly rejected {bad_a}, wrongly accepted {bad_r}"


def warnings_of(schema, **opts):
    return list(json_schema_to_ir(schema, **opts)[1])


# ---------------------------------------------------------------------------
# Objects


def _subsets(names, required):
    out = []
    for mask in range(1 << len(names)):
        chosen = [n for i, n in enumerate(names) if mask >> i & 1]
        out.append((chosen, all(r in chosen for r in required)))
    return out


@pytest.mark.parametrize("required", [[], ["a"], ["c"], ["a", "d"], ["b", "c"], ["a", "b", "c", "d"]])
def test_object_commas_every_combination(required):
    names = ["a", "b", "c", "d"]
    s = {"type": "object", "properties": {n: {"type": "integer"} for n in names}, "required": required}
    d = dfa(s, any_whitespace=False)
    for chosen, valid in _subsets(names, required):
        body = ",".join(f'"{n}":1' for n in chosen)
        assert d.matches(("{" + body + "}").encode()) == valid, body
        if chosen:
            assert not d.matches(("{," + body + "}").encode())
            assert not d.matches(("{" + body + ",}").encode())
            assert not d.matches(("{" + body.replace(",", ",,") + "}").encode()) or len(chosen) == 1
    # schema order only
    if not required:
        assert not d.matches(b'{"b":1,"a":1}')


def test_object_many_properties_is_linear():
    names = [f"p{i}" for i in range(60)]
    s = {"type": "object", "properties": {n: {"type": "boolean"} for n in names}, "required": ["p30"]}
    t0 = time.perf_counter()
    d = dfa(s, any_whitespace=False)
    assert time.perf_counter() - t0 < 5
    assert d.matches(b'{"p30":true}')
    assert d.matches(b'{"p0":true,"p30":false,"p59":true}')
    assert not d.matches(b'{"p0":true}')
    assert not d.matches(b'{"p31":true,"p30":true}')


def test_additional_properties():
    base = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    strict = dfa(base, any_whitespace=False)
    assert strict.matches(b'{"a":1}') and not strict.matches(b'{"a":1,"x":2}')
    loose = dfa(base, any_whitespace=False, strict_mode=False, cfg=False)
    assert loose.matches(b'{"a":1,"x":[1,{"y":null}],"z":"s"}')
    assert not loose.matches(b'{"a":1,"a":2}')
    assert not loose.matches(b'{"a":1,"\\u0061":2}')  # the same key in another spelling
    assert not loose.matches(b'{"x":1,"a":1}')  # extras come after the listed ones
    typed = dfa({**base, "additionalProperties": {"type": "string"}}, any_whitespace=False)
    assert typed.matches(b'{"a":1,"x":"s","y":"t"}') and not typed.matches(b'{"a":1,"x":2}')
    assert typed.matches(b'{"a":1,"ab":"s"}')
    closed = dfa({**base, "additionalProperties": False}, any_whitespace=False, strict_mode=False)
    assert not closed.matches(b'{"a":1,"x":2}')
    # no properties at all: any object, also in strict mode
    anyobj = dfa({"type": "object"}, any_whitespace=False, cfg=False)
    assert anyobj.matches(b'{}') and anyobj.matches(b'{"k":{"n":[1,2]},"j":"s"}')
    assert any("nest" in w for w in warnings_of({"type": "object"}, cfg=False))


def test_required_not_in_properties_and_false_property():
    s = {"type": "object", "properties": {"a": {"type": "integer"}, "no": False}, "required": ["a", "z"]}
    check(s, accept=['{"a":1,"z":"anything"}', '{"a":1,"z":[1]}'], reject=['{"a":1}', '{"a":1,"no":1,"z":1}'],
          any_whitespace=False, cfg=False)
    with pytest.raises(SchemaError, match="no JSON value"):
        json_schema_to_ir({"type": "object", "properties": {"a": False}, "required": ["a"]})


def test_property_names_are_json_escaped():
    s = {"type": "object", "properties": {'q"uo\\te': {"type": "null"}, "é/ü": {"type": "null"}},
         "required": ['q"uo\\te', "é/ü"]}
    assert ok(s, json.dumps({'q"uo\\te': None, "é/ü": None}, ensure_ascii=False), any_whitespace=False,
              separators=(", ", ": "))


# ---------------------------------------------------------------------------
# Arrays


@pytest.mark.parametrize("schema,lengths", [
    ({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4}, {2, 3, 4}),
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 0}, {0}),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 3}, {3, 4, 5, 6}),
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}]}, {0, 1, 2}),
    ({"type": "array", "prefixItems": [{"type": "integer"}] * 3, "minItems": 2}, {2, 3}),
    ({"type": "array", "prefixItems": [{"type": "integer"}] * 2, "items": {"type": "integer"}, "maxItems": 3},
     {0, 1, 2, 3}),
    ({"type": "array", "prefixItems": [{"type": "integer"}] * 2, "items": False, "minItems": 1}, {1, 2}),
    ({"type": "array", "prefixItems": [{"type": "integer"}] * 4, "maxItems": 2}, {0, 1, 2}),
])
def test_array_lengths(schema, lengths):
    d = dfa(schema, any_whitespace=False)
    for n in range(0, 7):
        text = json.dumps(list(range(n)), separators=(",", ":"))
        assert d.matches(text.encode()) == (n in lengths), text


def test_prefix_items_types_and_rest():
    s = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": {"type": "null"}}
    check(s, accept=['[]', '["a"]', '["a",true]', '["a",false,null,null]'],
          reject=['[true]', '["a","b"]', '["a",true,1]', '["a",]'], any_whitespace=False)
    # strict mode: prefixItems without items admits no more items; spec mode admits anything
    s2 = {"type": "array", "prefixItems": [{"type": "string"}]}
    assert not ok(s2, '["a",1]', any_whitespace=False)
    assert ok(s2, '["a",1,{"x":[]}]', any_whitespace=False, strict_mode=False, cfg=False)
    # draft-07 tuple form
    s3 = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False}
    check(s3, accept=['["a",1]', '["a"]'], reject=['["a",1,2]', '[1]'], any_whitespace=False)


def test_unsatisfiable_items():
    assert ok({"type": "array", "items": False}, "[]", any_whitespace=False)
    assert not ok({"type": "array", "items": False}, "[1]", any_whitespace=False)
    with pytest.raises(SchemaError):
        json_schema_to_ir({"type": "array", "items": False, "minItems": 1})


# ---------------------------------------------------------------------------
# uniqueItems


def test_unique_items_from_a_finite_set_are_exact():
    s = {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True}
    assert not warnings_of(s, any_whitespace=False)
    check(s, accept=['[]', '["a"]', '["a","b","c"]', '["c","a"]'],
          reject=['["a","a"]', '["a","b","a"]', '["c","b","a","a"]', '["d"]'], any_whitespace=False)
    mixed = {"type": "array", "items": {"enum": [1, "1", 1.5, None]}, "uniqueItems": True}
    check(mixed, accept=['[1,"1",1.5,null]'], reject=['[1,"1",1]', '[null,null]'], any_whitespace=False)
    booleans = {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 2}
    check(booleans, accept=['[true,false]', '[false,true]'], reject=['[true,true]', '[true]', '[true,false,true]'],
          any_whitespace=False)


def test_unique_items_follow_the_layout():
    s = {"type": "object", "properties": {"k": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}}}
    check(s, accept=['{"k": ["a", "b"]}'], reject=['{"k": ["a", "a"]}'], any_whitespace=False, separators=(", ", ": "))
    check(s, accept=['{\n  "k": [\n    "b",\n    "a"\n  ]\n}'], reject=['{\n  "k": [\n    "b",\n    "b"\n  ]\n}'],
          any_whitespace=False, indent=2)


def test_unique_items_otherwise_warn_unless_one_item_at_most():
    strings = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    assert any("uniqueItems" in w for w in warnings_of(strings, any_whitespace=False))
    one = {**strings, "maxItems": 1}
    assert not warnings_of(one, any_whitespace=False)
    check(one, accept=['[]', '["a"]'], reject=['["a","a"]'], any_whitespace=False)
    big = {"type": "array", "items": {"enum": [f"value-{i}" for i in range(16)]}, "uniqueItems": True}
    assert any("uniqueItems" in w for w in warnings_of(big, any_whitespace=False))


@pytest.mark.parametrize("bounds", [{"maxItems": 1000}, {"minItems": 600}])
def test_an_item_copied_many_times_under_item_bounds_is_one_rule(bounds):
    # Inlined, ``maxItems: 1000`` writes out 1,000 copies of the item's automaton (~68k DFA states and
    # most of a second to build), ``minItems: 600`` 600; as a rule, one copy is called from a chain of
    # counts. The language stays the same: checked at the bounds against the jsonschema package (members
    # in the schema's order, as the compiler writes them by default).
    jsonschema = pytest.importorskip("jsonschema")
    from leapgen import GrammarCompiler, GrammarMatcher
    from leapgen.vocab import TokenizerInfo

    item = {"type": "object", "additionalProperties": False, "required": ["id", "role"],
            "properties": {"id": {"type": "string", "pattern": "^[A-Fa-f\\d]{24}$"},
                           "role": {"enum": ["collaborate", "view", "none"]}}}
    schema = {"type": "array", "items": item, **bounds}
    node, _ = json_schema_to_ir(schema, any_whitespace=False)
    assert isinstance(node, ir.Grammar) and "node:/items" in node.rules
    compiled = GrammarCompiler(TokenizerInfo([bytes([b]) for b in range(256)], stop_token_ids=[])
                               ).compile_json_schema(schema, any_whitespace=False)
    assert compiled.n_states < 10_000
    one = {"id": "0123456789abcdefABCDEF01", "role": "view"}
    bad = {"id": "0123456789abcdefABCDEF0", "role": "view"}
    for value in ([one] * 1000, [one] * 1001, [one] * 999 + [bad], [], [one] * 599, [one] * 600,
                  [one] * 599 + [{"id": one["id"], "role": "none"}], [one] * 599 + [{"id": one["id"]}]):
        text = json.dumps(value, separators=(",", ":"))
        m = GrammarMatcher(compiled)
        got = m.accept_string(text) and m.is_completed()
        assert got == jsonschema.Draft202012Validator(schema).is_valid(value), text[:80]


def test_unique_items_under_a_large_count_stay_inline():
    # uniqueItems over a finite set of scalars intersects the array with "each value at most once", where
    # no rule may stand: the items' many copies under maxItems do not make them a rule there (a rule made
    # the compile fail with "rule reference ... inside an intersection"); with few copies it compiles
    from leapgen import GrammarCompiler, GrammarMatcher
    from leapgen.errors import CompileLimitError
    from leapgen.vocab import TokenizerInfo

    compiler = GrammarCompiler(TokenizerInfo([bytes([b]) for b in range(256)], stop_token_ids=[]))
    values = [f"v{i}" for i in range(6)]

    def schema(cap):
        return {"type": "object", "properties": {
            "t": {"type": "array", "items": {"enum": values}, "uniqueItems": True, "maxItems": cap},
            "r": {"$ref": "#"}}}

    with pytest.raises(CompileLimitError):  # 2,000 copies of the item inline: a size limit, as before
        compiler.compile_json_schema(schema(2000), any_whitespace=False)
    compiled = compiler.compile_json_schema(schema(300), any_whitespace=False)
    for value, ok in (({"t": values[:3]}, True), ({"t": [values[0], values[0]]}, False),
                      ({"t": values, "r": {"t": []}}, True)):
        m = GrammarMatcher(compiled)
        assert (m.accept_string(json.dumps(value, separators=(",", ":"))) and m.is_completed()) == ok, value
