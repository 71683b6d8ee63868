"""JSON-Schema-Test-Suite (draft 2020-12) agreement, as a ratchet.

For the keyword files leapgen supports, each test instance is serialized with
``json.dumps`` (separators ``", "``/``": "``, non-ASCII raw) and matched
against the compiled schema (``strict_mode=False``: spec semantics). The
disagreements and the groups leapgen refuses (SchemaError) must stay within
the baselines below: improvements pass, regressions fail.

Default run: only instances that are scalars, with the schema narrowed to the
instance's JSON type (``{..., "type": t}``; this cannot change the verdict of
an instance of type ``t``), which keeps compiles small. ``--run-slow``: every
instance, with the schema as written.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from leapgen.errors import CompileLimitError, GrammarError, SchemaError
from leapgen.grammar import ir
from leapgen.grammar.json_schema import json_schema_to_ir

automata = pytest.importorskip("leapgen.automata")

SUITE = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "json-schema-test-suite" / "tests" / "draft2020-12"

FILES = [
    "additionalProperties.json", "allOf.json", "anchor.json", "anyOf.json", "boolean_schema.json", "const.json",
    "defs.json", "enum.json", "exclusiveMaximum.json", "exclusiveMinimum.json", "items.json", "maxItems.json",
    "maxLength.json", "maximum.json", "minItems.json", "minLength.json", "minimum.json", "oneOf.json",
    "pattern.json", "prefixItems.json", "properties.json", "ref.json", "required.json", "type.json",
    "unevaluatedItems.json", "unevaluatedProperties.json",
    "optional/format/date.json", "optional/format/date-time.json", "optional/format/time.json",
    "optional/format/email.json", "optional/format/ipv4.json", "optional/format/ipv6.json",
    "optional/format/uuid.json", "optional/format/uri.json",
]

# (file, group, test) -> why leapgen disagrees on purpose (documented limits).
KNOWN_DISAGREEMENTS = {
    ("allOf.json", "allOf", "allOf"): "members in schema order (merged: bar before foo)",
    ("allOf.json", "allOf with base schema", "valid"): "members in schema order",
    ("const.json", "const with object", "same object with different property order is valid"): "key order",
    ("const.json", "const with 0 does not match other zero-like types", "float zero is valid"): "spelling 0.0",
    ("const.json", "const with 1 does not match true", "float one is valid"): "spelling 1.0",
    ("const.json", "const with -2.0 matches integer and float types", "integer -2 is valid"): "spelling -2",
    ("const.json", "float and integers are equal up to 64-bit representation limits", "float is valid"):
        "spelling",
    ("enum.json", "enum with 0 does not match false", "float zero is valid"): "spelling 0.0",
    ("enum.json", "enum with [0] does not match [false]", "[0.0] is valid"): "spelling 0.0",
    ("enum.json", "enum with 1 does not match true", "float one is valid"): "spelling 1.0",
    ("enum.json", "enum with [1] does not match [true]", "[1.0] is valid"): "spelling 1.0",
    ("type.json", "integer type matches integers", "a float with zero fractional part is an integer"):
        "1.0 is not an accepted integer spelling",
    ("oneOf.json", "oneOf", "both oneOf valid"): "overlapping oneOf compiled as anyOf (warning)",
    ("oneOf.json", "oneOf with base schema", "both oneOf valid"): "overlapping oneOf",
    ("oneOf.json", "oneOf with boolean schemas, all true", "any value is invalid"): "overlapping oneOf",
    ("oneOf.json", "oneOf with boolean schemas, more than one true", "any value is invalid"): "overlapping oneOf",
    ("oneOf.json", "oneOf complex types", "both oneOf valid (complex)"): "overlapping oneOf",
    ("oneOf.json", "oneOf with empty schema", "both valid - invalid"): "overlapping oneOf",
    ("oneOf.json", "oneOf with required", "both valid - invalid"): "overlapping oneOf",
    ("oneOf.json", "oneOf with missing optional property", "both oneOf valid"): "overlapping oneOf",
    ("unevaluatedProperties.json", "unevaluatedProperties with anyOf",
     "when two match and has no unevaluated properties"): "anyOf branches are merged one at a time",
    ("unevaluatedProperties.json", "unevaluatedProperties can see annotations from if without then and else",
     "valid in case if is evaluated"): "if without then/else is ignored",
    ("unevaluatedItems.json", "unevaluatedItems can see annotations from if without then and else",
     "valid in case if is evaluated"): "if without then/else is ignored",
    ("optional/format/date-time.json", "validation of date-time strings",
     "a valid date-time with a leap second, with minus offset"): "leap second only with UTC offset",
    ("optional/format/time.json", "validation of time strings", "valid leap second, positive time-offset"):
        "leap second only with UTC offset",
    ("optional/format/time.json", "validation of time strings",
     "valid leap second, large positive time-offset"): "leap second only with UTC offset",
    ("optional/format/time.json", "validation of time strings", "valid leap second, negative time-offset"):
        "leap second only with UTC offset",
    ("optional/format/time.json", "validation of time strings",
     "valid leap second, large negative time-offset"): "leap second only with UTC offset",
}

# Groups leapgen refuses to compile (unsupported keyword, remote $ref, recursion, unsatisfiable).
KNOWN_REFUSED = {
    ("additionalProperties.json", "additionalProperties being false does not allow other properties"),
    ("additionalProperties.json", "non-ASCII pattern with additionalProperties"),
    ("additionalProperties.json", "additionalProperties with propertyNames"),
    ("additionalProperties.json", "dependentSchemas with additionalProperties"),
    ("allOf.json", "allOf with boolean schemas, some false"),
    ("allOf.json", "allOf with boolean schemas, all false"),
    ("allOf.json", "allOf combined with anyOf, oneOf"),
    ("anchor.json", "Location-independent identifier with absolute URI"),
    ("anchor.json", "Location-independent identifier with base URI change in subschema"),
    ("anchor.json", "same $anchor with different base uri"),
    ("anyOf.json", "anyOf with boolean schemas, all false"),
    ("boolean_schema.json", "boolean schema 'false'"),
    ("defs.json", "validate definition against metaschema"),
    ("enum.json", "empty enum"),
    ("oneOf.json", "oneOf with boolean schemas, all false"),
    ("pattern.json", "pattern with Unicode property escape requires unicode mode"),
    ("properties.json", "properties, patternProperties, additionalProperties interaction"),
    ("ref.json", "remote ref, containing refs itself"),
    ("ref.json", "$ref to boolean schema false"),
    ("ref.json", "Recursive references between schemas"),
    ("ref.json", "refs with relative uris and defs"),
    ("ref.json", "relative refs with absolute uris and defs"),
    ("ref.json", "$id must be resolved against nearest parent, not just immediate parent"),
    ("ref.json", "order of evaluation: $id and $ref"),
    ("ref.json", "order of evaluation: $id and $ref on nested schema"),
    ("ref.json", "URN ref with nested pointer ref"),
    ("ref.json", "ref to if"),
    ("ref.json", "ref to then"),
    ("ref.json", "ref to else"),
    ("ref.json", "ref with absolute-path-reference"),
    ('unevaluatedItems.json', 'unevaluatedItems and contains interact to control item dependency relationship'),
    ('unevaluatedItems.json', 'unevaluatedItems depends on adjacent contains'),
    ('unevaluatedItems.json', 'unevaluatedItems depends on multiple nested contains'),
    ('unevaluatedItems.json', 'unevaluatedItems with $dynamicRef'),
    ('unevaluatedItems.json', 'unevaluatedItems with if/then/else'),
    ('unevaluatedItems.json', 'unevaluatedItems with minContains = 0'),
    ('unevaluatedItems.json', 'unevaluatedItems with not'),
    ('unevaluatedProperties.json',
     'Evaluated properties collection needs to consider instance location with patternProperties'),
    ('unevaluatedProperties.json', 'dependentSchemas with unevaluatedProperties'),
    ('unevaluatedProperties.json', 'dynamic evalation inside nested refs'),
    ('unevaluatedProperties.json', 'unevaluatedProperties not affected by propertyNames'),
    ('unevaluatedProperties.json', 'unevaluatedProperties with $dynamicRef'),
    ('unevaluatedProperties.json', 'unevaluatedProperties with adjacent patternProperties'),
    ('unevaluatedProperties.json', 'unevaluatedProperties with dependentSchemas'),
    ('unevaluatedProperties.json', 'unevaluatedProperties with if/then/else'),
    ('unevaluatedProperties.json', 'unevaluatedProperties with if/then/else, else not defined'),
    ('unevaluatedProperties.json', 'unevaluatedProperties with if/then/else, then not defined'),
    ('unevaluatedProperties.json', 'unevaluatedProperties with nested patternProperties'),
    ('unevaluatedProperties.json', 'unevaluatedProperties with not'),
}


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _narrow(schema: dict, t: str):
    """The schema restricted to scalar instances of JSON type ``t`` (None: skip the test)."""
    types = schema.get("type")
    if types is None:
        return {**schema, "type": t}
    types = [types] if isinstance(types, str) else types
    if not {"array", "object"} & set(types):
        return schema
    scalars = [x for x in types if x not in ("array", "object")]
    if t in types or (t == "integer" and "number" in types):
        return {**schema, "type": t}
    return {**schema, "type": scalars} if scalars else None


class _PdaMatcher:
    def __init__(self, grammar):
        from leapgen.automata.pda import Pda
        self.pda = Pda(grammar, max_states=automata.DEFAULT_MAX_STATES)

    def matches(self, data: bytes) -> bool:
        config = self.pda.start_config
        for b in data:
            config = self.pda.step(self.pda.expand(config), b)
            if not config:
                return False
        return self.pda.expand(config).complete


@functools.lru_cache(maxsize=None)
def _compile(schema_text: str):
    node, _ = json_schema_to_ir(json.loads(schema_text), strict_mode=False, any_whitespace=False,
                                separators=(", ", ": "))
    if isinstance(node, ir.Grammar):
        return _PdaMatcher(node)
    return automata.compile_dfa(node)


def _run(fname: str, full: bool):
    """Returns (disagreements, refused groups, agreements)."""
    disagree, refused, agree = set(), set(), 0
    for group in json.loads((SUITE / fname).read_text()):
        tests = group["tests"]
        if not full:
            tests = [t for t in tests if _json_type(t["data"]) not in ("array", "object")]
        for t in tests:
            schema = group["schema"]
            if not full and isinstance(schema, dict):
                schema = _narrow(schema, _json_type(t["data"]))
                if schema is None:
                    continue
            try:
                d = _compile(json.dumps(schema))
            except (SchemaError, CompileLimitError, GrammarError):
                refused.add((fname, group["description"]))
                continue
            text = json.dumps(t["data"], ensure_ascii=False)
            if d.matches(text.encode()) == t["valid"]:
                agree += 1
            else:
                disagree.add((fname, group["description"], t["description"]))
    return disagree, refused, agree


def _check(fname: str, full: bool):
    disagree, refused, agree = _run(fname, full)
    new = sorted(disagree - KNOWN_DISAGREEMENTS.keys())
    assert not new, f"new disagreements with the JSON-Schema-Test-Suite: {new}"
    if full:  # (narrowed schemas may become unsatisfiable, so only the full run checks this)
        newly_refused = sorted(refused - KNOWN_REFUSED)
        assert not newly_refused, f"groups no longer compiled: {newly_refused}"
    assert agree > 0 or refused or not full


@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/corpora/json-schema-test-suite is missing")
@pytest.mark.parametrize("fname", FILES)
def test_suite_scalar_instances(fname):
    _check(fname, full=False)


@pytest.mark.slow
@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/corpora/json-schema-test-suite is missing")
@pytest.mark.parametrize("fname", FILES)
def test_suite_full(fname):
    _check(fname, full=True)
