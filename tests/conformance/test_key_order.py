"""The harness's schema-order serialization (:mod:`tests.conformance.key_order`)."""

from __future__ import annotations

from tests.conformance.key_order import schema_order


def keys(value) -> list:
    return list(value)


def test_properties_then_required_only_names_then_the_rest():
    s = {"properties": {"a": {}, "b": {}}, "required": ["z", "a"]}
    assert keys(schema_order(s, {"x": 1, "z": 2, "b": 3, "a": 4})) == ["a", "b", "z", "x"]


def test_all_of_members_append_in_order_and_own_keywords_come_first():
    s = {"properties": {"c": {}}, "allOf": [{"properties": {"b": {}, "c": {}}}, {"properties": {"a": {}}}]}
    assert keys(schema_order(s, {"a": 1, "b": 2, "c": 3})) == ["c", "b", "a"]


def test_any_of_branch_is_the_one_the_instance_matches():
    s = {"$defs": {"one": {"properties": {"kind": {"const": "one"}, "x": {}}},
                   "two": {"allOf": [{"properties": {"y": {}, "x": {}}}, {"properties": {"kind": {"const": "two"}}}]}},
         "anyOf": [{"$ref": "#/$defs/one"}, {"$ref": "#/$defs/two"}]}
    assert keys(schema_order(s, {"kind": "two", "x": 1, "y": 2})) == ["y", "x", "kind"]
    assert keys(schema_order(s, {"x": 1, "kind": "one"})) == ["kind", "x"]


def test_ref_siblings_are_ignored_in_draft_7_and_come_first_in_2020_12():
    target = {"properties": {"b": {}}}
    s7 = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"t": target},
          "properties": {"r": {"$ref": "#/definitions/t", "properties": {"a": {}}}}}
    assert keys(schema_order(s7, {"r": {"a": 1, "b": 2}})["r"]) == ["b", "a"]
    s20 = {"$defs": {"t": target}, "properties": {"r": {"$ref": "#/$defs/t", "properties": {"a": {}}}}}
    assert keys(schema_order(s20, {"r": {"b": 1, "a": 2}})["r"]) == ["a", "b"]


def test_if_then_else_and_nested_values():
    s = {"if": {"properties": {"t": {"const": 1}}}, "then": {"properties": {"q": {}, "p": {}}},
         "else": {"properties": {"p": {}, "q": {}}}, "properties": {"t": {}},
         "additionalProperties": {"properties": {"n": {}, "m": {}}}}
    assert keys(schema_order(s, {"p": 1, "q": 2, "t": 1})) == ["t", "q", "p"]
    got = schema_order(s, {"p": 1, "q": 2, "t": 2, "z": {"m": 1, "n": 2}})
    assert keys(got) == ["t", "p", "q", "z"] and keys(got["z"]) == ["n", "m"]


def test_items_and_tuple_items():
    s = {"items": [{"properties": {"b": {}, "a": {}}}], "additionalItems": {"properties": {"d": {}, "c": {}}}}
    got = schema_order(s, [{"a": 1, "b": 2}, {"c": 1, "d": 2}])
    assert [keys(v) for v in got] == [["b", "a"], ["d", "c"]]


def test_alternatives_come_after_the_whole_conjunction():
    s = {"allOf": [{"oneOf": [{"properties": {"path": {}, "severity": {}}, "additionalProperties": False},
                              {"properties": {"text": {}, "severity": {}}, "additionalProperties": False}]},
                   {"properties": {"severity": {"type": "string"}}}]}
    assert keys(schema_order(s, {"path": "x", "severity": "w"})) == ["severity", "path"]
