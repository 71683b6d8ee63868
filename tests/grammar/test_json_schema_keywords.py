"""JSON Schema front-end: patternProperties, propertyNames, min/maxProperties,
dependencies, not, if/then/else, multipleOf, $id/$anchor references, formats,
rule keeping; end to end through GrammarCompiler + GrammarMatcher over a byte
vocabulary (regular and context-free results alike)."""

from __future__ import annotations

import functools
import json

import pytest

import leapgen
from leapgen.errors import SchemaError
from leapgen.grammar import ir
from leapgen.grammar.json import json_schema_to_ir
from leapgen.grammar.json.disjoint import _patterns_disjoint
from leapgen.grammar.json.match import is_empty, matches
from leapgen.grammar.regex import parse_regex


@functools.lru_cache(maxsize=1)
def _compiler():
    info = leapgen.TokenizerInfo([bytes([i]) for i in range(256)] + [b""], "raw", stop_token_ids=[256])
    return leapgen.GrammarCompiler(info, cache_entries=0)


@functools.lru_cache(maxsize=None)
def _compiled(schema_text: str, opts: tuple):
    node, warnings = json_schema_to_ir(json.loads(schema_text), any_whitespace=False, **dict(opts))
    return _compiler().compile_ir(node), warnings


def check(schema, accept=(), reject=(), warnings=False, **opts):
    compiled, w = _compiled(json.dumps(schema), tuple(sorted(opts.items())))
    assert bool(w) == warnings, w

    def ok(text):
        m = leapgen.GrammarMatcher(compiled)
        return m.accept_string(text) and m.is_completed()
    bad_a = [s for s in accept if not ok(s)]
    bad_r = [s for s in reject if ok(s)]
    assert not bad_a and not bad_r, f"wrongly rejected {bad_a}, wrongly accepted {bad_r}"


# ---------------------------------------------------------------------------
# Objects


def test_pattern_properties_with_properties_and_additional():
    s = {"type": "object", "properties": {"a": {"type": "integer"}, "x-b": {"minimum": 5}},
         "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    check(s, accept=['{}', '{"a":1,"x-b":5,"x-c":2,"q":"s"}', '{"x-c":1}', '{"q":"s","r":"t"}'],
          reject=['{"q":1}', '{"x-c":"s"}', '{"a":"s"}', '{"x-b":4}', '{"x-b":"s"}'])


def test_pattern_properties_overlapping_patterns_merge():
    s = {"type": "object", "patternProperties": {"a": {"type": "integer"}, "b": {"minimum": 10}},
         "additionalProperties": False}
    check(s, accept=['{"a":1}', '{"b":1500}', '{"ab":10}', '{"xbx":11}'],
          reject=['{"ab":9}', '{"ab":10.5}', '{"c":1}', '{"a":"s"}'])


def test_pattern_property_keys_are_canonical_only():
    s = {"type": "object", "patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    # "\u0061" spells "a": not accepted as a key next to patternProperties (canonical spelling only)
    check(s, accept=['{"ab":1}', '{"b":"s"}'], reject=['{"\\u0061b":"s"}', '{"\\u0061b":1}'])


def test_property_names():
    check({"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}},
          accept=['{}', '{"ab":1}', '{"abc":[1]}'], reject=['{"abcd":1}', '{"A":1}'], strict_mode=False)
    s = {"type": "object", "properties": {"long_name": {}, "ok": {}}, "required": ["ok"],
         "propertyNames": {"maxLength": 4}}
    check(s, accept=['{"ok":1}'], reject=['{"long_name":1,"ok":1}'])
    check({"type": "object", "propertyNames": False}, accept=['{}'], reject=['{"a":1}'], strict_mode=False)
    check({"type": "object", "propertyNames": {"enum": ["a", "b"]}}, accept=['{"a":1,"b":2}'], reject=['{"c":1}'],
          strict_mode=False)


@pytest.mark.parametrize("lo,hi", [(0, 1), (1, None), (2, 2), (2, 3), (0, 0), (3, None)])
def test_min_max_properties_listed(lo, hi):
    s = {"type": "object", "properties": {n: {"type": "integer"} for n in "abcd"}, "additionalProperties": False,
         "minProperties": lo}
    if hi is not None:
        s["maxProperties"] = hi
    texts = []
    for mask in range(16):
        chosen = [n for i, n in enumerate("abcd") if mask >> i & 1]
        text = "{" + ",".join(f'"{n}":1' for n in chosen) + "}"
        texts.append((text, lo <= len(chosen) and (hi is None or len(chosen) <= hi)))
    check(s, accept=[t for t, v in texts if v], reject=[t for t, v in texts if not v])


def test_min_max_properties_with_required_and_extras():
    s = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "required": ["a"],
         "additionalProperties": {"type": "integer"}, "minProperties": 2, "maxProperties": 3}
    # free-string extra keys: a repeated one is not detected, and min/maxProperties count it (a warning)
    check(s, accept=['{"a":1,"b":2}', '{"a":1,"x":2}', '{"a":1,"b":2,"x":3}', '{"a":1,"x":2,"y":3}'],
          reject=['{"a":1}', '{"a":1,"b":2,"x":3,"y":4}', '{"b":1,"x":2}'], warnings=True)
    check({"type": "object", "maxProperties": 1, "additionalProperties": {"type": "null"}},
          accept=['{}', '{"q":null}'], reject=['{"q":null,"r":null}'])  # one member: nothing can repeat
    _, w = _compiled(json.dumps(s), ())
    assert any("repeated extra key is not detected" in x for x in w), w


def test_dependent_required_and_schemas():
    s = {"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
         "dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"required": ["a"]}}}
    check(s, accept=['{}', '{"b":1}', '{"a":1,"b":2}', '{"a":1,"b":2,"c":3}'],
          reject=['{"a":1}', '{"c":1}', '{"b":1,"c":2}'])
    draft7 = {"type": "object", "properties": {"a": {}, "b": {"type": "integer"}},
              "dependencies": {"a": ["b"], "b": {"properties": {"a": {"type": "string"}}}}}
    check(draft7, accept=['{"a":"s","b":1}', '{"b":1}'], reject=['{"a":"s"}', '{"a":1,"b":1}'])


# ---------------------------------------------------------------------------
# not, if/then/else


def test_not_of_types_values_and_keywords():
    check({"not": {"type": ["string", "null"]}}, accept=['1', '[]', '{}', 'true'], reject=['"a"', 'null'],
          strict_mode=False)
    check({"type": "integer", "not": {"enum": [1, 2]}}, accept=['0', '3', '-1'], reject=['1', '2'])
    check({"type": "string", "not": {"const": "x"}}, accept=['"y"', '"xx"', '""'], reject=['"x"', '"\\u0078"'])
    check({"type": "number", "not": {"const": 1.5}}, accept=['1.25', '2'], reject=['1.5', '1.50'])
    check({"type": "string", "not": {"pattern": "^a"}}, accept=['"ba"'], reject=['"ab"'])
    check({"type": "string", "not": {"format": "date"}}, accept=['"x"'], reject=['"2024-01-01"'])
    check({"type": "string", "not": {"minLength": 3}}, accept=['"ab"'], reject=['"abc"'])
    check({"not": {"type": "integer"}}, accept=['1.5', '"a"'], reject=['1', '-3'], strict_mode=False)
    check({"type": "number", "not": {"minimum": 3}}, accept=['2.5', '-1'], reject=['3', '4'])


def test_not_required_and_properties():
    s = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
         "not": {"required": ["a", "b"]}}
    check(s, accept=['{}', '{"a":1}', '{"b":1}'], reject=['{"a":1,"b":2}'])
    s = {"type": "object", "properties": {"kind": {"type": "string"}},
         "not": {"properties": {"kind": {"const": "bad"}}}}
    # {} satisfies the properties keyword (vacuously), so "not" rejects it
    check(s, accept=['{"kind":"good"}'], reject=['{}', '{"kind":"bad"}'])


def test_not_unsupported_is_an_error():
    with pytest.raises(SchemaError) as err:
        json_schema_to_ir({"type": "object", "not": {"additionalProperties": {"type": "null"}}})
    assert err.value.pointer == "/not/additionalProperties"


def test_if_then_else_discriminator():
    s = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {}, "y": {}}, "required": ["kind"],
         "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}, "else": {"required": ["y"]}}
    check(s, accept=['{"kind":"a","x":1}', '{"kind":"b","y":1}', '{"kind":"a","x":1,"y":2}'],
          reject=['{"kind":"a"}', '{"kind":"b"}', '{"kind":"b","x":1}'])


def test_allof_of_many_ifs_is_pruned():
    branches = [{"if": {"properties": {"t": {"const": f"v{i}"}}, "required": ["t"]},
                 "then": {"properties": {"n": {"minimum": i}}}} for i in range(12)]
    s = {"type": "object", "properties": {"t": {"type": "string"}, "n": {"type": "integer"}}, "allOf": branches}
    check(s, accept=['{"t":"v3","n":3}', '{"t":"zz","n":0}', '{"n":0}'], reject=['{"t":"v3","n":2}'])


def test_one_of_disjoint_by_not():
    s = {"oneOf": [{"type": "string"}, {"not": {"type": "string"}}]}
    check(s, accept=['1', '"a"', 'null'], strict_mode=False)


# ---------------------------------------------------------------------------
# Numbers, formats, references


def test_multiple_of():
    check({"type": "integer", "multipleOf": 5}, accept=['0', '5', '-10', '105'], reject=['3', '11'])
    check({"type": "integer", "multipleOf": 7, "minimum": 0, "maximum": 30}, accept=['0', '7', '28'],
          reject=['5', '35'])
    check({"type": "number", "multipleOf": 0.01}, accept=['1', '1.5', '1.25', '1.250'], reject=['1.255'])
    check({"type": "number", "multipleOf": 0.5}, accept=['1', '1.5', '2.0'], reject=['1.25'])
    with pytest.raises(SchemaError, match="multipleOf"):
        json_schema_to_ir({"type": "integer", "multipleOf": 7})


@pytest.mark.parametrize("fmt,good,bad", [
    ("duration", ["P1Y2M3DT4H5M6S", "P4W", "PT0S", "P1D"], ["P", "PT", "P1H", "1D"]),
    ("hostname", ["example.com", "a-b.c", "x"], ["-a.com", "a..b", "a" * 64]),
    ("uri-reference", ["http://x.com/a?b#c", "/a/b", "a/b", "#frag", ""], ["\\\\x", "a b"]),
    ("json-pointer", ["", "/a/b", "/a~0b~1c"], ["a", "/a~2"]),
    ("relative-json-pointer", ["0", "1/a", "2#"], ["-1", "/a"]),
    ("uri-template", ["http://x/{id}", "{+path}/x{?q,r}"], ["{", "x}{"]),
    ("iri", ["http://例え.jp/パス"], ["例え"]),
])
def test_more_formats(fmt, good, bad):
    check({"type": "string", "format": fmt}, accept=[json.dumps(g, ensure_ascii=False) for g in good],
          reject=[json.dumps(b, ensure_ascii=False) for b in bad])


def test_id_and_anchor_references():
    s = {"$id": "http://example.com/root.json",
         "$defs": {"a": {"$id": "other.json", "$defs": {"b": {"$anchor": "bee", "type": "integer"}},
                         "type": "object", "properties": {"n": {"$ref": "#bee"}}}},
         "type": "array", "items": {"$ref": "other.json"}}
    check(s, accept=['[{"n":1}]', '[]'], reject=['[{"n":"s"}]'])
    s = {"$defs": {"x": {"$id": "urn:example:x", "type": "string"}}, "$ref": "urn:example:x"}
    check(s, accept=['"s"'], reject=['1'])


def test_unknown_formats_and_keywords_without_strict_mode():
    check({"type": "string", "format": "int32"}, accept=['"x"'], strict_mode=False)
    check({"type": "string", "format": "idn-hostname"}, accept=['"x"'], warnings=True, strict_mode=False)


def _text(n: int, unit: str = "a") -> str:
    return json.dumps(unit * n, ensure_ascii=False)


@pytest.mark.parametrize("lo,hi", [(0, 32767), (0, 257), (300, 1000), (0, 384), (130, 200 + 256), (257, None),
                                   (1000, 1000)])
def test_long_lengths_are_exact_through_block_rules(lo, hi):
    schema = {"type": "string", "minLength": lo} if hi is None else {"type": "string", "minLength": lo,
                                                                      "maxLength": hi}
    node, _ = json_schema_to_ir(schema, any_whitespace=False)
    assert isinstance(node, ir.Grammar)
    top = hi if hi is not None else lo + 300
    accept = [_text(n) for n in {lo, top, (lo + top) // 2, lo + 127, lo + 128} if lo <= n <= top]
    accept.append(json.dumps("é\n\U0001F600" * (lo // 3) + "x" * (lo % 3), ensure_ascii=False))
    reject = [_text(lo - 1)] if lo else []
    if hi is not None:
        reject += [_text(hi + 1), _text(hi + 128)]
    check(schema, accept=accept, reject=reject)


def test_long_length_escapes_count_as_one_character():
    s = {"type": "string", "maxLength": 300}
    check(s, accept=['"' + "\\u00e9" * 300 + '"', '"' + "\\ud83d\\ude00" * 300 + '"'],
          reject=['"' + "\\u00e9" * 301 + '"', '"' + "\\n" * 301 + '"'])


def test_long_lengths_next_to_pattern_or_in_regular_mode_warn():
    check({"type": "string", "maxLength": 32767, "pattern": "^a"}, accept=['"abc"'], warnings=True)
    check({"type": "string", "maxLength": 32767}, accept=['"abc"'], warnings=True, cfg=False)
    check({"type": "string", "minLength": 300, "pattern": "^a"}, accept=['"' + "a" * 256 + '"'],
          reject=['"' + "a" * 255 + '"'], warnings=True)


# ---------------------------------------------------------------------------
# Rules kept for size, helpers


def test_large_repeated_definitions_stay_rules():
    big = {"type": "object", "properties": {f"p{i}": {"type": "string", "format": "date-time"} for i in range(12)}}
    s = {"$defs": {"big": big}, "type": "object",
         "properties": {f"q{i}": {"type": "array", "items": {"$ref": "#/$defs/big"}} for i in range(8)}}
    node, _ = json_schema_to_ir(s, any_whitespace=False)
    assert isinstance(node, ir.Grammar) and node.keep
    check(s, accept=['{"q0":[{"p0":"2024-01-01T00:00:00Z"}],"q3":[]}'], reject=['{"q0":[{"p0":"x"}]}'])


def test_small_schemas_stay_regular():
    node, _ = json_schema_to_ir({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}})
    assert isinstance(node, ir.Node)


def test_derivative_matcher():
    node = parse_regex("^[a-c]+x$", search=True)
    assert matches(node, "abx") and not matches(node, "abxx") and not matches(node, "x")
    assert is_empty(ir.intersect(parse_regex("^a"), parse_regex("^b"))) is True
    assert is_empty(ir.intersect(parse_regex("a", search=True), parse_regex("b", search=True))) is False
    assert is_empty(ir.diff(parse_regex("[ab]"), parse_regex("a|b"))) is True


@pytest.mark.parametrize("pattern", ["^(a?b|c*)d?$", "^x{0,2}(é|ab)*$", "(?:\\S+\\s){0,2}z", "^[^a-f]+|q$", "^$",
                                     "join"])
def test_first_code_points_hold_every_live_derivative(pattern):
    """``first_ranges`` (the classes the derivative walks skip) holds every code point whose
    derivative is not empty, at the node and at its derivatives, and is sorted and disjoint."""
    from leapgen.grammar.json.match import derive, first_ranges

    if pattern == "join":  # ``a? (, a?)*``: an item that may be empty lets the separator come first
        node = ir.seq(ir.join(parse_regex("^a?$"), ir.lit(",")), ir.lit("z"))
    else:
        node = parse_regex(pattern, search=pattern[0] != "^")
    memo, fmemo, todo, seen = {}, {}, [node], {node}
    probes = [0x20, 0x2C, 0x61, 0x62, 0x63, 0x64, 0x66, 0x67, 0x71, 0x78, 0x7A, 0xE9, 0x0A, 0x4E2D]
    while todo and len(seen) < 60:
        n = todo.pop()
        first = first_ranges(n, fmemo)
        assert list(first) == sorted(first) and all(b < c for (_, b), (c, _) in zip(first, first[1:]))
        for cp in probes:
            d = derive(n, cp, memo)
            if d != ir.NOTHING:
                assert any(lo <= cp <= hi for lo, hi in first), (pattern, n, chr(cp))
                if d not in seen:
                    seen.add(d)
                    todo.append(d)


def test_finite_key_languages_are_listed_in_order():
    """A property-name region's finite language (the names ``propertyNames`` allows): every name, in
    code-point order, quotes included; an infinite or too large one is None."""
    from leapgen.grammar.json.match import finite_language
    from leapgen.grammar.json.strings import CHAR_ANY, quoted

    any_key = quoted(ir.star(CHAR_ANY))
    names = ["beta", "alpha", "alp", "é", "a/b"]
    listed = ir.alt(*(ir.lit(json.dumps(n, ensure_ascii=False)) for n in names))
    got = finite_language(ir.intersect(any_key, listed), 64)
    assert got == sorted(json.dumps(n, ensure_ascii=False) for n in names)
    assert finite_language(ir.intersect(any_key, listed), 4) is None
    assert finite_language(any_key, 64) is None


def test_contains_with_counts():
    check({"type": "array", "contains": {"type": "integer"}}, accept=['[1]', '["a",1,"b"]', '[1,2]'],
          reject=['[]', '["a"]'])
    check({"type": "array", "items": {"type": ["integer", "string"]}, "contains": {"type": "integer"},
           "minContains": 2, "maxContains": 3}, accept=['[1,2]', '["a",1,"b",2,3]'],
          reject=['[1]', '[1,2,3,4]', '[1,2,null]'])
    check({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 1},
          accept=['[]', '[2]', '[1,2]'], reject=['[1,1]'])


def test_one_of_disjoint_by_required_property():
    s = {"oneOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^b$": {"type": "null"}},
         "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "string"}}, "patternProperties": {"^a$": {"type": "null"}},
         "required": ["b"]},
        {"type": "object", "properties": {"c": {}}, "required": ["c"], "additionalProperties": False}]}
    check(s, accept=['{"a":"x"}', '{"b":"x","a":null}', '{"c":1}'], reject=['{"a":"x","b":"y"}'])


def test_one_of_disjoint_by_patterns_of_a_required_property():
    names = ["Abs", "Add", "Billow", "Const", "Curve", "Exp", "Max", "Min"]  # more than exclusion handles
    s = {"oneOf": [{"type": "object", "properties": {"t": {"type": "string", "pattern": f"^{n}$"}, "v": {}},
                    "required": ["t"], "additionalProperties": False} for n in names]}
    s["oneOf"].append({"type": "object", "properties": {"t": {"enum": ["Zed", "Abs-1"]}}, "required": ["t"]})
    check(s, accept=['{"t":"Abs"}', '{"t":"Min","v":1}', '{"t":"Zed"}', '{"t":"Abs-1"}'],
          reject=['{"t":"Abss"}', '{"v":1}', '{"t":"Abs","w":2}'])
    overlapping = {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}]}
    check(overlapping, accept=['"ax"', '"xb"'], reject=['"ab"', '"x"'])


def test_one_of_unanchored_patterns_are_never_taken_as_disjoint():
    # searches no anchor pins always meet (a match of each, concatenated): the oneOf keeps them exclusive
    s = {"oneOf": [{"type": "string", "pattern": "NEW"}, {"type": "string", "pattern": "OLD|ON"}]}
    check(s, accept=['"xNEWx"', '"ON"', '"OLD"'], reject=['"NEWOLD"', '"ONxNEW"', '"x"'])
    assert not _patterns_disjoint(("NEW", "OLD|ON"))
    assert _patterns_disjoint(("ON", "^NEW$"))  # one anchored at both ends: the derivatives decide


def test_one_of_disjoint_through_nested_alternatives():
    kinds = ["composer", "vcs", "path", "artifact", "pear", "package", "git"]
    repo = {"type": "object", "oneOf": [{"properties": {"type": {"enum": [k]}}, "required": ["type", "url"]}
                                        for k in kinds]}
    s = {"$defs": {"repo": repo}, "type": "array", "items": {"oneOf": [
        {"$ref": "#/$defs/repo"},
        {"type": "object", "additionalProperties": {"enum": [False]}, "minProperties": 1, "maxProperties": 1}]}}
    check(s, accept=['[{"type":"vcs","url":"u"},{"packagist.org":false}]', '[{"type":false}]'],
          reject=['[{"type":false,"url":"u"}]', '[{"a":true}]', '[{"type":"x","url":"u"}]', '[{}]'])


def test_one_of_negates_only_the_branches_that_may_overlap():
    sides = {"type": "array", "items": {"enum": ["top", "left"]}}
    axes = {"type": "array", "items": {"enum": ["vertical", "top"]}}
    s = {"oneOf": [{"type": "boolean"}, {"type": "null"}, *({"const": i} for i in range(5)), sides, axes]}
    check(s, accept=['true', 'null', '3', '["left"]', '["vertical"]', '["left","top"]', '["top","vertical"]'],
          reject=['[]', '["top"]', '["top","top"]', '5', '"top"'])


def test_not_of_array_keywords():
    check({"type": "array", "not": {"items": {"type": "integer"}}}, accept=['[1,"a"]', '["a"]'], reject=['[]', '[1,2]'])
    check({"type": "array", "not": {"prefixItems": [{"type": "integer"}]}}, accept=['["a"]', '["a",1]'],
          reject=['[]', '[1]', '[1,"a"]'])
    check({"type": "array", "not": {"contains": {"type": "integer"}}}, accept=['[]', '["a"]'], reject=['[1]', '["a",2]'])
    s = {"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"minimum": 0}}]}
    check(s, accept=['[-1]', '[1.5]', '["a"]'], reject=['[]', '[1]'], strict_mode=False)


def test_ref_siblings_follow_the_declared_draft():
    defs = {"file": {"type": "object", "properties": {"a": {"type": "integer"}}}}
    sub = {"$ref": "#/definitions/file", "properties": {"b": {}}, "additionalProperties": False}
    # 2020-12: the siblings apply with the target (so "a" is an additional property)
    check({"definitions": defs, "type": "object", "properties": {"x": sub}},
          accept=['{"x":{"b":1}}'], reject=['{"x":{"a":1}}'])
    # draft-07: "All other properties in a $ref object MUST be ignored"
    check({"$schema": "http://json-schema.org/draft-07/schema#", "definitions": defs, "type": "object",
           "properties": {"x": sub}}, accept=['{"x":{"a":1}}', '{"x":{"a":1,"b":1}}'], reject=['{"x":{"a":"s"}}'],
          strict_mode=False)


def test_recursion_through_all_of_merges_becomes_a_rule():
    s = {"$defs": {"node": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/node"}, {"required": ["v"]}]}},
        "v": {"type": "integer"}}}}, "$ref": "#/$defs/node"}
    node, _ = json_schema_to_ir(s, any_whitespace=False)
    assert isinstance(node, ir.Grammar)
    check(s, accept=['{"kids":[{"kids":[{"v":2}],"v":1}]}', '{}'], reject=['{"kids":[{}]}', '{"kids":[{"kids":[{}],"v":1}]}'])
