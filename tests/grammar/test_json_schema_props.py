"""JSON Schema front-end: property-based tests (hypothesis) and a cross-check of
accept/reject against the ``jsonschema`` package on generated instances."""

from __future__ import annotations

import datetime
import functools
import ipaddress
import json
from decimal import Decimal

import pytest

from leapgen.grammar.json import json_schema_to_ir

automata = pytest.importorskip("leapgen.automata")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.lru_cache(maxsize=None)
def _dfa(schema_text: str, opts: tuple):
    node, _ = json_schema_to_ir(json.loads(schema_text), **dict(opts))
    return automata.compile_dfa(node)


def dfa(schema, **opts):
    return _dfa(json.dumps(schema), tuple(sorted(opts.items())))


def ok(schema, text: str, **opts) -> bool:
    return dfa(schema, **opts).matches(text.encode("utf-8"))


# ---------------------------------------------------------------------------
# Integers, numbers, strings

INT_BOUNDS = [(-5, 1234), (0, None), (None, -17), (-1000, -10), (7, 7), (None, 99999), (123456, None)]


@SETTINGS
@given(st.sampled_from(INT_BOUNDS), st.integers(-(10**7), 10**7) | st.integers(-1300, 1300))
def test_integer_range_membership(bounds, v):
    lo, hi = bounds
    s = {"type": "integer"}
    if lo is not None:
        s["minimum"] = lo
    if hi is not None:
        s["maximum"] = hi
    assert ok(s, str(v)) == ((lo is None or v >= lo) and (hi is None or v <= hi))


@SETTINGS
@given(st.integers(-50, 50), st.integers(-50, 50), st.integers(-60, 60))
def test_exclusive_integer_bounds(a, b, v):
    assume(a + 1 < b)
    s = {"type": "integer", "exclusiveMinimum": a, "exclusiveMaximum": b}
    assert ok(s, str(v)) == (a < v < b)


NUM_BOUNDS = [("-2.5", False, "3.75", True), ("0.001", True, None, False), (None, False, "-1.5", False),
              ("10", False, "10.5", False), ("-0.25", True, "0.25", True)]


@SETTINGS
@given(st.sampled_from(NUM_BOUNDS), st.decimals(min_value=-20, max_value=20, places=4, allow_nan=False,
                                                allow_infinity=False))
def test_number_range_membership(bounds, v):
    lo, lo_x, hi, hi_x = bounds
    s = {"type": "number"}
    if lo is not None:
        s["exclusiveMinimum" if lo_x else "minimum"] = float(lo)
    if hi is not None:
        s["exclusiveMaximum" if hi_x else "maximum"] = float(hi)
    text = format(v, "f")
    inside = ((lo is None or (v > Decimal(lo) if lo_x else v >= Decimal(lo)))
              and (hi is None or (v < Decimal(hi) if hi_x else v <= Decimal(hi))))
    for spelling in {text, text.rstrip("0").rstrip(".") if "." in text else text}:
        assert ok(s, spelling) == inside, spelling


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_sign_bounds_with_exponents(x):
    text = json.dumps(x)  # may use an exponent: 1e-05, 1e+300
    assert ok({"type": "number", "minimum": 0}, text) == (x >= 0)
    assert ok({"type": "number", "exclusiveMaximum": 0}, text) == (x < 0)
    assert ok({"type": "number"}, text)


LENGTHS = [(0, 0), (1, 3), (2, 6), (5, None), (0, 1)]


@SETTINGS
@given(st.sampled_from(LENGTHS), st.text(max_size=8), st.booleans())
def test_string_length_in_code_points(bounds, text, ascii_):
    lo, hi = bounds
    s = {"type": "string", "minLength": lo}
    if hi is not None:
        s["maxLength"] = hi
    valid = lo <= len(text) and (hi is None or len(text) <= hi)
    assert ok(s, json.dumps(text, ensure_ascii=ascii_)) == valid


@SETTINGS
@given(st.text(max_size=12))
def test_any_string_spelling(text):
    s = {"type": "string"}
    assert ok(s, json.dumps(text, ensure_ascii=False))
    assert ok(s, json.dumps(text, ensure_ascii=True))
    if any(ord(c) < 0x20 for c in text) and not any(c in '"\\' for c in text):
        assert not ok(s, '"' + text + '"')  # raw control characters


@SETTINGS
@given(st.from_regex(r"[a-c\"\\\n\t\x01é]{0,6}", fullmatch=True))
def test_pattern_content_round_trip(text):
    s = {"type": "string", "pattern": "^[a-c\"\\\\\\n\\t\\x01é]*$"}
    assert ok(s, json.dumps(text, ensure_ascii=False))
    assert not ok(s, json.dumps(text + "z", ensure_ascii=False))


ESCAPED_CHARS = [chr(c) for c in range(0x20)] + ['"', "\\"]


def _spellings(ch: str) -> set[str]:
    """Spellings of one character a JSON string might hold: raw, a short escape, ``\\u00XX`` in each case."""
    hex4 = f"{ord(ch):04x}"
    out = {ch, "\\" + ch, "\\u" + hex4, "\\u" + hex4.upper(), "\\u" + hex4[:3] + hex4[3].upper()}
    out |= {"\\" + e for e in "bfnrt\"\\/"}
    return out


def _canonical(text: str) -> bool:
    """Whether ``text`` (one character's spelling, valid JSON) is the canonical one: raw where JSON allows,
    else the short escape, else ``\\u00XX`` in either case (the strings module's docstring)."""
    ch = json.loads('"' + text + '"')
    if ord(ch) >= 0x20 and ch not in '"\\':
        return text == ch
    short = json.dumps(ch)[1:-1]
    return text == short if len(short) == 2 else text.lower() == f"\\u{ord(ch):04x}"


@SETTINGS
@given(st.sets(st.sampled_from(ESCAPED_CHARS + list("aZ/é")), min_size=1), st.booleans())
def test_pattern_class_of_escaped_characters_accepts_exactly_their_canonical_spellings(chars, negate):
    body = "".join(f"\\u{ord(c):04x}" for c in sorted(chars))
    s = {"type": "string", "pattern": f"^[{'^' if negate else ''}{body}]$"}
    for ch in ESCAPED_CHARS + list("aZ/é"):
        for text in _spellings(ch):
            try:
                decoded = json.loads('"' + text + '"')
            except json.JSONDecodeError:
                decoded = None
            want = decoded is not None and ((decoded in chars) != negate) and _canonical(text)
            assert ok(s, '"' + text + '"') == want, (sorted(chars), negate, text)


# ---------------------------------------------------------------------------
# Formats


@SETTINGS
@given(st.dates())
def test_date_format_valid(d):
    assert ok({"type": "string", "format": "date"}, json.dumps(d.isoformat()))


@SETTINGS
@given(st.integers(1, 9999), st.integers(0, 13), st.integers(0, 32))
def test_date_format_exact(y, m, d):
    text = f"{y:04d}-{m:02d}-{d:02d}"
    try:
        datetime.date(y, m, d)
        valid = True
    except ValueError:
        valid = False
    assert ok({"type": "string", "format": "date"}, json.dumps(text)) == valid


@SETTINGS
@given(st.datetimes(timezones=st.timezones() | st.just(datetime.timezone.utc)), st.booleans())
def test_date_time_format(dt, zulu):
    text = dt.isoformat()
    if zulu and text.endswith("+00:00"):
        text = text[:-6] + "Z"
    offset = dt.utcoffset()
    valid = offset is not None and offset.seconds % 60 == 0 and not offset.microseconds
    assert ok({"type": "string", "format": "date-time"}, json.dumps(text)) == valid, text
    if valid:
        assert ok({"type": "string", "format": "time"}, json.dumps(text.split("T")[1]))


@SETTINGS
@given(st.lists(st.integers(0, 300), min_size=3, max_size=5), st.booleans())
def test_ipv4_format(parts, pad):
    text = ".".join((f"{p:03d}" if pad else str(p)) for p in parts)
    try:
        ipaddress.IPv4Address(text)
        valid = True
    except ValueError:
        valid = False
    assert ok({"type": "string", "format": "ipv4"}, json.dumps(text)) == valid, text


@SETTINGS
@given(st.uuids(), st.booleans())
def test_uuid_format(u, upper):
    text = str(u).upper() if upper else str(u)
    assert ok({"type": "string", "format": "uuid"}, json.dumps(text))
    assert not ok({"type": "string", "format": "uuid"}, json.dumps(text.replace("-", "")))


def test_uri_and_email_examples():
    uri = {"type": "string", "format": "uri"}
    for good in ["http://example.com", "https://user:pw@example.com:8080/a/b?q=1&r=%2F#frag",
                 "urn:isbn:0451450523", "mailto:a@b.c", "file:///etc/hosts", "http://[2001:db8::1]/x",
                 "http://192.168.0.1/", "foo+bar.baz:", "a:b/c?d#e", "http://[v1.fe]/"]:
        assert ok(uri, json.dumps(good)), good
    for bad in ["example.com", "//foo", "http://exa mple.com", "1http://x", "http://x/%zz", "", ":x",
                "http://x#a#b", "http://[::1"]:
        assert not ok(uri, json.dumps(bad)), bad
    email = {"type": "string", "format": "email"}
    for good in ["joe@example.com", "a.b+c@sub.example.org", "x@[127.0.0.1]", '"j d"@example.com',
                 "te~st@localhost", "x@[IPv6:::1]"]:
        assert ok(email, json.dumps(good)), good
    for bad in ["joe", "@example.com", "a..b@x.com", ".a@x.com", "a@-x.com", "a@x-.com", "a@", "a@b@c"]:
        assert not ok(email, json.dumps(bad)), bad


# ---------------------------------------------------------------------------
# Cross-check with the jsonschema package

jsonschema = pytest.importorskip("jsonschema")

CROSS_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": -5, "maximum": 1234},
        "name": {"type": "string", "minLength": 1, "maxLength": 6},
        "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]?$"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", None, 3]}, "maxItems": 3},
        "score": {"type": "number", "minimum": 0},
        "when": {"type": "string", "format": "date"},
        "kind": {"oneOf": [{"const": "x"}, {"type": "boolean"}, {"type": "null"}]},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    },
    "required": ["id", "name"],
    "additionalProperties": False,
}

_scalar = (st.integers(-10, 2000) | st.floats(-1e6, 1e6, allow_nan=False).filter(lambda f: not f.is_integer())
           | st.text(max_size=7) | st.booleans() | st.none())
# key -> (mostly valid values, values that are often invalid)
_VALUES = {
    "id": (st.integers(-5, 1234), st.integers(-10, 1300) | _scalar),
    "name": (st.text(min_size=1, max_size=6), st.text(max_size=8) | _scalar),
    "code": (st.from_regex(r"[A-Z]{2}[0-9]?", fullmatch=True),
             st.from_regex(r"[A-Z]{1,3}[0-9]{0,2}", fullmatch=True) | st.text(max_size=3)),
    "tags": (st.lists(st.sampled_from(["a", "b", None, 3]), max_size=3),
             st.lists(st.sampled_from(["a", "b", "c", None, 3, 4, 3.5]), max_size=4) | _scalar),
    "score": (st.floats(0, 1e300) | st.integers(0, 5), st.floats(-1e9, 1e9, allow_nan=False) | _scalar),
    "when": (st.dates().map(lambda d: d.isoformat()),
             st.from_regex(r"\d{4}-[01]\d-[0-3]\d", fullmatch=True) | _scalar),
    "kind": (st.sampled_from(["x", True, False, None]), st.sampled_from(["y", 0, 1.5, [], {}])),
    "pair": (st.tuples(st.text(max_size=2), st.integers(-3, 3)).map(list).flatmap(
        lambda p: st.integers(0, 2).map(lambda n: p[:n])),
             st.lists(st.text(max_size=2) | st.integers(-3, 3), max_size=3)),
}


@st.composite
def instances(draw):
    out = {}
    for key, (good, anything) in _VALUES.items():
        if key in ("id", "name") and draw(st.integers(0, 19)) > 0 or draw(st.booleans()):
            out[key] = draw(anything if draw(st.integers(0, 11)) == 0 else good)
    if draw(st.integers(0, 19)) == 0:
        out["zz"] = 1  # an extra member (after the listed ones)
    return out


LAYOUTS = [
    ({}, {}),  # any whitespace; json.dumps default separators
    ({"any_whitespace": False}, {"separators": (",", ":")}),
    ({"any_whitespace": False, "indent": 2}, {"indent": 2}),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), st.sampled_from(LAYOUTS), st.booleans())
def test_cross_check_with_jsonschema(instance, layout, ascii_):
    opts, dumps = layout
    validator = jsonschema.Draft202012Validator(CROSS_SCHEMA, format_checker=jsonschema.FormatChecker())
    expected = validator.is_valid(instance)
    text = json.dumps(instance, ensure_ascii=ascii_, **dumps)
    # pattern/format strings are matched in their canonical spelling only (documented)
    if ascii_ and any(isinstance(instance.get(k), str) and not instance[k].isascii() for k in ("code", "when")):
        return
    assert dfa(CROSS_SCHEMA, **opts).matches(text.encode()) == expected, (text, expected)


def test_cross_schema_smoke():
    assert ok(CROSS_SCHEMA, '{"id":1,"name":"n","kind":"x","pair":["a",1]}', any_whitespace=False)
    assert not ok(CROSS_SCHEMA, '{"id":1,"name":"n","zz":1}', any_whitespace=False)
