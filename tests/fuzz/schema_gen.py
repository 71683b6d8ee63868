r"""Random JSON Schemas, their oracle twins, and instances written by the test.

:class:`SchemaGen` draws schemas from leapgen's supported-keyword table:
every type; ``properties``/``required``/``additionalProperties``,
``patternProperties``, ``propertyNames`` (finite name sets too: issue 15,
fault 3), ``min/maxProperties``, ``dependentRequired``; ``items``,
``prefixItems``, ``min/maxItems``, ``uniqueItems``, ``contains``;
``min/maxLength``, ``pattern`` (random ECMAScript patterns of
:mod:`.regex_gen`, anchors and lookaheads included), ``format``; numeric
bounds and ``multipleOf``; ``enum``/``const``; ``anyOf``, ``oneOf``,
``allOf``, ``not``, ``if``/``then``/``else``; ``$ref`` into ``$defs``,
recursive ones too.

Each schema has an *oracle twin* for ``jsonschema``: the same schema with
every ``pattern`` (and ``patternProperties`` name) written for Python's
``re`` with ECMAScript's meaning (:func:`regex_gen.oracle`: ``\Z`` for
``$``, explicit code point classes), since ``jsonschema`` searches patterns
with ``re``. The generator never avoids a construct because of the dialect.

:func:`instance` writes a value aimed at the schema (the oracle decides
whether it is valid), with format values from :data:`FORMAT_EXAMPLES`;
:func:`layout` is the compact text leapgen's grammar writes for a value.
"""

from __future__ import annotations

import decimal
import json
import random

import regex

from . import regex_gen as rg

NAMES = ["a", "b", "c", "id", "x-1", "x-2", "é", "name", "k"]
#: Key patterns with a small finite language (each in :func:`_parse_known`), and names for ``enum``/``const``.
FINITE_PATTERNS = ["^[a-c]$", "^(a|bc)$", "^x-[12]$", "^é?[0-9]{2}$"]
FINITE_NAMES = ["a", "b", "c", "id", "zz", "x-1", "é"]
FORMAT_EXAMPLES = {
    "date": ["2024-02-29", "1999-12-31"], "time": ["23:59:59Z", "08:30:00.5+02:00"],
    "date-time": ["2024-01-01T00:00:00Z", "1990-06-15T12:30:45.25-05:00"], "email": ["a@b.io", "jo.e+x@mail.example.com"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000"], "ipv4": ["192.168.0.1", "8.8.8.8"],
    "ipv6": ["::1", "2001:db8::ff00:42:8329"], "uri": ["https://example.com/a?b=c#d", "urn:isbn:0451450523"],
    "hostname": ["example.com", "a-b.c"], "duration": ["P3D", "PT1H30M"],
}


class SchemaGen:
    """Random schemas (see the module docstring); all draws from ``rng``."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.patterns: dict[str, tuple] = {}  # ECMAScript pattern -> its regex_gen tree
        self.defs: dict = {}

    def root(self) -> dict:
        rng = self.rng
        if rng.random() < 0.2:  # a recursive definition
            self.defs["node"] = {"type": "object", "properties": {
                "v": self.schema(2), "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                "required": rng.sample(["v", "next"], rng.randint(0, 2))}
        if rng.random() < 0.2:
            self.defs["leaf"] = self.schema(2)
        out = self.schema(0)
        if self.defs:
            out = {**out, "$defs": self.defs} if isinstance(out, dict) else {"allOf": [out], "$defs": self.defs}
        return out

    def schema(self, depth: int):
        rng = self.rng
        if depth >= 3:
            return self.scalar()
        r = rng.random()
        if r < 0.3:
            return self.object(depth)
        if r < 0.42:
            return self.array(depth)
        if r < 0.62:
            return self.scalar()
        if r < 0.68 and self.defs:
            return {"$ref": f"#/$defs/{rng.choice(sorted(self.defs))}"}
        if r < 0.75:
            return {"enum": rng.sample(["x", "y", 1, 2.5, True, None, {"a": 1}, [1, "z"]], rng.randint(1, 3))}
        if r < 0.78:
            return {"const": rng.choice(["x", 0, False, {"k": [1]}])}
        branches = [self.schema(depth + 1) for _ in range(rng.randint(2, 3))]
        kind = rng.choice(["anyOf", "oneOf", "allOf", "not", "if"])
        if kind == "not":
            return {"not": branches[0]}
        if kind == "if":
            return {"if": branches[0], "then": branches[1], **({"else": branches[2]} if len(branches) > 2 else {})}
        return {kind: branches}

    def object(self, depth: int) -> dict:
        rng = self.rng
        if rng.random() < 0.25:
            return self.keyed_object(depth)
        names = rng.sample(NAMES, rng.randint(0, 4))
        out: dict = {"type": "object"}
        if names:
            out["properties"] = {n: self.schema(depth + 1) for n in names}
        if names and rng.random() < 0.6:
            out["required"] = rng.sample(names, rng.randint(1, len(names)))
        r = rng.random()
        if r < 0.3:
            out["additionalProperties"] = False
        elif r < 0.55:
            out["additionalProperties"] = self.scalar()
        if rng.random() < 0.2:
            out["patternProperties"] = {self.pattern(key=True): self.scalar()}
        if rng.random() < 0.25:  # a finite name set, or a looser one
            out["propertyNames"] = rng.choice([{"pattern": "^[a-c]$"}, {"enum": ["a", "b", "id", "zz"]},
                                               {"maxLength": 2}, {"pattern": self.pattern(key=True)}])
        if rng.random() < 0.3:
            lo = rng.randint(0, 3)
            out["minProperties"] = lo
            if rng.random() < 0.5:
                out["maxProperties"] = lo + rng.randint(0, 2)
        if names and rng.random() < 0.1:
            out["dependentRequired"] = {names[0]: [rng.choice(NAMES)]}
        return out

    def keyed_object(self, depth: int) -> dict:
        """An object whose extra keys form a small finite set (``propertyNames`` with a finite pattern, an
        ``enum`` or a ``const``; or ``patternProperties`` with ``additionalProperties: false``), mostly with
        ``minProperties``/``maxProperties``: where a repeated key must not count (issue 15, fault 3)."""
        rng = self.rng
        names = rng.sample(NAMES, rng.choice([0, 0, 1, 2]))
        out: dict = {"type": "object"}
        if names:
            out["properties"] = {n: self.schema(depth + 1) for n in names}
            if rng.random() < 0.4:
                out["required"] = rng.sample(names, rng.randint(1, len(names)))
        if rng.random() < 0.7:
            out["propertyNames"] = rng.choice([{"pattern": rng.choice(FINITE_PATTERNS)},
                                               {"enum": rng.sample(FINITE_NAMES, rng.randint(1, 4))},
                                               {"const": rng.choice(FINITE_NAMES)}])
            r = rng.random()
            if r < 0.6:
                out["additionalProperties"] = self.scalar()
            elif r < 0.75:
                out["additionalProperties"] = False
        else:
            pattern = rng.choice(FINITE_PATTERNS)
            self.patterns.setdefault(pattern, _parse_known(pattern))
            out["patternProperties"] = {pattern: self.scalar()}
            out["additionalProperties"] = False
        if rng.random() < 0.85:
            lo = rng.choice([0, 1, 2, 2, 3])
            if rng.random() < 0.8:
                out["minProperties"] = lo
            if rng.random() < 0.5:
                out["maxProperties"] = lo + rng.randint(0, 2)
        return out

    def array(self, depth: int) -> dict:
        rng = self.rng
        out: dict = {"type": "array"}
        if rng.random() < 0.25:
            out["prefixItems"] = [self.schema(depth + 1) for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.8:
            out["items"] = self.schema(depth + 1)
        if rng.random() < 0.4:
            lo = rng.randint(0, 2)
            out["minItems"] = lo
            if rng.random() < 0.6:
                out["maxItems"] = lo + rng.randint(0, 3)
        if rng.random() < 0.15:
            out["uniqueItems"] = True
            out.setdefault("items", {"enum": [1, 2, 3, "a"]})
        if rng.random() < 0.1 and "prefixItems" not in out and "maxItems" not in out:
            out["contains"] = self.scalar()
        return out

    def scalar(self) -> dict:
        rng = self.rng
        kind = rng.choice(["string", "string", "integer", "number", "boolean", "null"])
        out: dict = {"type": kind}
        if kind == "string":
            r = rng.random()
            if r < 0.3:
                out["pattern"] = self.pattern()
            elif r < 0.45:
                out["format"] = rng.choice(sorted(FORMAT_EXAMPLES))
            if rng.random() < 0.3:
                out["minLength"] = rng.randint(0, 3)
            if rng.random() < 0.3:
                out["maxLength"] = out.get("minLength", 0) + rng.randint(0, 5)
        elif kind in ("integer", "number"):
            if rng.random() < 0.5:
                out["minimum"] = rng.choice([-5, 0, 3, 2.5])
            if rng.random() < 0.4:
                out["maximum"] = out.get("minimum", -10) + rng.choice([0, 1, 10, 100])
            if rng.random() < 0.2:
                out["exclusiveMinimum" if rng.random() < 0.5 else "exclusiveMaximum"] = rng.choice([0, 7])
            if rng.random() < 0.2:
                out["multipleOf"] = rng.choice([2, 3, 5] if kind == "integer" else [0.5, 2, 0.25])
        return out

    def pattern(self, key: bool = False) -> str:
        """A random ECMAScript pattern (kept with its tree for the oracle twin), often anchored."""
        rng = self.rng
        if rng.random() < 0.35:
            text = rng.choice(["^[a-z]+$", "^x-", "\\d", "^\\w{1,3}$", "^[a-c]$", "^(?=.*\\d)\\w+$", "^é?[0-9]{2}$",
                               "^(a|bc)*$", "^\\S+@\\S+$", "[^\\s]{2}", "^\\p"])
            text = text if text != "^\\p" else "^p"
            tree = _parse_known(text)
        else:
            tree = rg.RegexGen(rng).pattern()
            text = rg.ecma(tree, rng)
        self.patterns[text] = tree
        return text


def _parse_known(text: str):
    """The regex_gen tree of one of :class:`SchemaGen`'s fixed patterns (hand-written)."""
    lit = lambda s: [("lit", ch) for ch in s]  # noqa: E731
    w = ("esc", "w")
    d = ("esc", "d")
    trees = {
        "^[a-z]+$": ("seq", [("anchor", "^"), ("quant", ("class", [("range", 97, 122)], False), 1, None, False),
                             ("anchor", "$")]),
        "^x-": ("seq", [("anchor", "^"), *lit("x-")]),
        "\\d": ("seq", [d]),
        "^\\w{1,3}$": ("seq", [("anchor", "^"), ("quant", w, 1, 3, False), ("anchor", "$")]),
        "^[a-c]$": ("seq", [("anchor", "^"), ("class", [("range", 97, 99)], False), ("anchor", "$")]),
        "^(?=.*\\d)\\w+$": ("seq", [("anchor", "^"), ("look", False, ("alt", [("seq", [("quant", ("dot",), 0, None,
                                                                                              False), d])])),
                                    ("quant", w, 1, None, False), ("anchor", "$")]),
        "^é?[0-9]{2}$": ("seq", [("anchor", "^"), ("quant", ("lit", "é"), 0, 1, False),
                                 ("quant", ("class", [("range", 48, 57)], False), 2, 2, False), ("anchor", "$")]),
        "^(a|bc)*$": ("seq", [("anchor", "^"), ("quant", ("group", ("alt", [("seq", lit("a")), ("seq", lit("bc"))]),
                                                          True), 0, None, False), ("anchor", "$")]),
        "^\\S+@\\S+$": ("seq", [("anchor", "^"), ("quant", ("esc", "S"), 1, None, False), ("lit", "@"),
                                ("quant", ("esc", "S"), 1, None, False), ("anchor", "$")]),
        "[^\\s]{2}": ("seq", [("quant", ("class", [("esc", "s")], True), 2, 2, False)]),
        "^p": ("seq", [("anchor", "^"), ("lit", "p")]),
        "^(a|bc)$": ("seq", [("anchor", "^"), ("group", ("alt", [("seq", lit("a")), ("seq", lit("bc"))]), True),
                             ("anchor", "$")]),
        "^x-[12]$": ("seq", [("anchor", "^"), *lit("x-"), ("class", [("range", 49, 50)], False), ("anchor", "$")]),
    }
    return trees[text]


def oracle_twin(schema, patterns: dict):
    """``schema`` with every pattern written for Python's ``re`` (see the module docstring). Pure."""
    if isinstance(schema, list):
        return [oracle_twin(s, patterns) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for k, v in schema.items():
        if k == "pattern" and isinstance(v, str) and v in patterns:
            out[k] = rg.oracle(patterns[v])
        elif k == "patternProperties" and isinstance(v, dict):
            out[k] = {(rg.oracle(patterns[p]) if p in patterns else p): oracle_twin(s, patterns) for p, s in v.items()}
        elif k in ("enum", "const"):
            out[k] = v
        else:
            out[k] = oracle_twin(v, patterns)
    return out


# -- instances -------------------------------------------------------------------------------------


def instance(schema, rng: random.Random, root: dict, patterns: dict, depth: int = 0):
    """A value aimed at ``schema`` (refs resolved in ``root``); the oracle decides if it is valid."""
    if depth > 6 or not isinstance(schema, dict):
        return rng.choice([None, 1, "s"]) if schema is not False else 0
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return instance(root.get("$defs", {}).get(name, {}), rng, root, patterns, depth + 1)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return instance(rng.choice(schema[key]), rng, root, patterns, depth + 1)
    if "allOf" in schema:
        return instance(schema["allOf"][0], rng, root, patterns, depth + 1)
    if "if" in schema:
        return instance(rng.choice([schema.get("then", {}), schema.get("else", {})]), rng, root, patterns, depth + 1)
    if "not" in schema:
        return rng.choice([None, 0, "q", [], {}])
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        return _object(schema, rng, root, patterns, depth)
    if kind == "array":
        items = [instance(s, rng, root, patterns, depth + 1) for s in schema.get("prefixItems", [])]
        lo, hi = schema.get("minItems", 0), schema.get("maxItems", len(items) + 3)
        while len(items) < rng.randint(lo, max(lo, hi)):
            items.append(instance(schema.get("items", {}), rng, root, patterns, depth + 1))
        if schema.get("uniqueItems"):
            items = list({json.dumps(x, sort_keys=True): x for x in items}.values())
        return items
    if kind == "string":
        return _string(schema, rng, patterns)
    if kind in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -20))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 40))
        step = schema.get("multipleOf", 1 if kind == "integer" else 0.25)
        n = round(rng.uniform(lo, max(lo, hi)) / step) * step
        return int(n) if kind == "integer" or float(n).is_integer() else n
    if kind == "boolean":
        return rng.random() < 0.5
    return None


def _object(schema: dict, rng: random.Random, root: dict, patterns: dict, depth: int) -> dict:
    props = schema.get("properties", {})
    names = set(schema.get("required", [])) | {n for n in props if rng.random() < 0.5}
    out = {n: instance(props.get(n, {}), rng, root, patterns, depth + 1) for n in sorted(names)}
    extra = schema.get("additionalProperties", True)
    pattern_props = schema.get("patternProperties", {})
    names = schema.get("propertyNames", {})
    keys = ["a", "b", "c", "zz", "x-9", "q", "bc", "x-1", "x-2", "12"]
    keys += names.get("enum", []) + ([names["const"]] if "const" in names else [])
    for _ in range(rng.randint(0, 2) + schema.get("minProperties", 0)):
        if extra is not False or pattern_props:
            key = rng.choice(keys)
            if key not in out:
                sub = next((s for p, s in pattern_props.items() if p in patterns and regex.search(rg.oracle(patterns[p]), key)),
                           extra)
                out[key] = instance(sub if isinstance(sub, dict) else {}, rng, root, patterns, depth + 1)
    keys = list(out)
    rng.shuffle(keys)
    return {k: out[k] for k in keys}


def _string(schema: dict, rng: random.Random, patterns: dict) -> str:
    if "format" in schema:
        return rng.choice(FORMAT_EXAMPLES[schema["format"]])
    if "pattern" in schema and schema["pattern"] in patterns:
        text = rg.sample(patterns[schema["pattern"]], rng)
    else:
        text = "".join(rng.choice("abcé 1_") for _ in range(rng.randint(0, 6)))
    lo, hi = schema.get("minLength", 0), schema.get("maxLength")
    text = text + "x" * max(0, lo - len(text))
    return text[:hi] if hi is not None else text


def _number(x) -> str:
    if isinstance(x, bool) or x is None or isinstance(x, int):
        return json.dumps(x)
    d = decimal.Decimal(repr(x)) if isinstance(x, float) else x
    if d == d.to_integral_value():
        return format(d.to_integral_value(), "f")
    return format(d.normalize(), "f")  # positional: leapgen's bounded numbers have no exponent


def layout(value) -> str:
    """The compact JSON text of ``value`` as leapgen writes it: ``(",", ":")``, raw non-ASCII, numbers
    positional and integral ones without a fraction; keys in the value's own order."""
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + layout(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(layout(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return _number(value)


def repeated_key_texts(value, rng: random.Random) -> list[str]:
    """Texts of ``value`` (laid out as :func:`layout`) with one of its objects, at any depth, writing a key
    twice: a member's key replaced by another member's (as many members, one key fewer: what a
    ``minProperties`` that counts members instead of keys lets through, issue 15 fault 3), and a member
    repeated at the end with another member's value. Empty when ``value`` holds no object with a member."""
    objects = []

    def find(v, path):
        if isinstance(v, dict):
            if v:
                objects.append(path)
            for k, x in v.items():
                find(x, path + (k,))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                find(x, path + (i,))

    find(value, ())
    if not objects:
        return []
    path = rng.choice(objects)
    node = value
    for step in path:
        node = node[step]
    pairs = list(node.items())
    i = rng.randrange(len(pairs))
    j = rng.randrange(len(pairs))
    renamed = [(pairs[j][0] if n == i else k, x) for n, (k, x) in enumerate(pairs)]
    appended = pairs + [(pairs[i][0], pairs[j][1])]
    return [_layout_at(value, path, p) for p in ((renamed, appended) if len(pairs) > 1 else (appended,))]


def _layout_at(value, path: tuple, pairs: list) -> str:
    """:func:`layout` of ``value`` with the object at ``path`` written as the member list ``pairs``."""
    if not path:
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + layout(x) for k, x in pairs) + "}"
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + (_layout_at(x, rest, pairs) if k == head
                                                                          else layout(x))
                              for k, x in value.items()) + "}"
    return "[" + ",".join(_layout_at(x, rest, pairs) if i == head else layout(x) for i, x in enumerate(value)) + "]"
