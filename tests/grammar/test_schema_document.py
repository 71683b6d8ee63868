"""A schema's JSON text: errors at a JSON pointer, deep documents included (issue 15, fault 6).

A schema nested 900 levels deep sent as text used to raise ``RecursionError`` from ``json.loads`` in the
engine (a 500 on the server); sent as an object it was a SchemaError at pointer ``/``. Both are now a
SchemaError at the pointer of the deepest container (cut after ``POINTER_LEVELS`` levels)."""

from __future__ import annotations

import json

import pytest

from leapgen import SchemaError
from leapgen.engine.grammar_manager import GrammarManager
from leapgen.engine.sampling_params import SamplingParams
from leapgen.grammar.json import json_schema_to_ir, load_schema
from leapgen.grammar.json.document import POINTER_LEVELS, deepest_in_data, deepest_in_text

DEEP_TEXT = '{"type": "object", "properties": {"a": ' * 900 + '{"type": "integer"}' + "}}" * 900
WANT = "/properties/a" * (POINTER_LEVELS // 2)


def _deep_object(levels: int):
    node = {"type": "integer"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


@pytest.mark.parametrize("make", [lambda: DEEP_TEXT, lambda: DEEP_TEXT.encode(), lambda: _deep_object(900)],
                         ids=["text", "bytes", "object"])
@pytest.mark.parametrize("entry", ["compiler", "front-end", "engine check"])
def test_deep_schema_is_a_schema_error_with_a_pointer(toy_compiler, make, entry):
    schema = make()
    with pytest.raises(SchemaError) as info:
        if entry == "compiler":
            toy_compiler.compile_json_schema(schema)
        elif entry == "front-end":
            json_schema_to_ir(schema)
        else:
            GrammarManager.check(SamplingParams(json_schema=schema if not isinstance(schema, bytes)
                                                else schema.decode()))
    err = info.value
    assert err.pointer == WANT and "deep" in str(err) and len(str(err)) < 1000


def test_text_that_is_not_json_is_a_schema_error_at_the_root():
    with pytest.raises(SchemaError) as info:
        load_schema('{"type": "object",')
    assert info.value.pointer == "" and "not valid JSON" in str(info.value)
    assert load_schema({"type": "string"}) == {"type": "string"}


@pytest.mark.parametrize("doc", [{}, [1, [2, [3]]], {"a": {"b": [0, {"c": 1}]}}, {"a": 1, "b/~": [[[]]]},
                                 {"x": [1, 2, {"k": []}], "y": {}}])
def test_deepest_container_in_text_and_in_data_agree(doc):
    text = json.dumps(doc)
    assert deepest_in_text(text) == deepest_in_data(doc)
    depth, ptr = deepest_in_data(doc)
    node = doc
    for part in ptr.split("/")[1:]:  # the pointer resolves to a container that deep
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    assert isinstance(node, (dict, list)) and depth == ptr.count("/") + 1
