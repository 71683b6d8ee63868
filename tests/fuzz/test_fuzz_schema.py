"""Differential fuzzing of the JSON Schema front-end against ``jsonschema`` (issue 15).

Per seed: a random schema (:mod:`.schema_gen`), compiled by leapgen in the
compact layout with the specification's semantics (``strict_mode=False``),
in schema order (even seeds) or with ``any_order=True`` (odd seeds); its
oracle twin validated by ``jsonschema`` (draft 2020-12 and its
``FORMAT_CHECKER``; patterns written for Python's ``re`` with ECMAScript's
meaning; numbers read exactly; the year 0000 allowed in dates, see
:func:`_format_checker`). Texts:
instances the test writes for the schema, random JSON values, texts walked
out of leapgen's automaton, and mutations of them. An instance is laid out as
the grammar was compiled: compact, numbers positional, keys in schema order
(:func:`tests.conformance.key_order.schema_order`) or, with ``any_order``, in
the instance's own order.

Checked, per text parsed with duplicate keys noted. A text writing a key twice
is judged as a JSON consumer reads it: the last member wins (``json.loads``,
``JSON.parse``, ``jsonschema`` on the parsed value); RFC 8259 leaves the
meaning of repeated names to the parser, and leapgen promises only that a
grammar compiled without warnings accepts no text whose value is invalid. The
texts include each instance with one object's key written twice
(:func:`.schema_gen.repeated_key_texts`: a key replaced by another member's,
one repeated), so a count that takes members for keys is caught:

- soundness: a text leapgen accepts is JSON whose value the oracle accepts
  (instances with a member written twice among the texts),
  unless the grammar was compiled with warnings (a repeated key that a
  keyword counts, ``{"b":1,"b":2}`` under ``minProperties: 2``, is invalid);
- completeness: a valid value in leapgen's layout, with no repeated key, is
  accepted (formats: only the test's own instances, since ``jsonschema``'s
  format checks are looser than the RFCs leapgen follows);
- masks against the brute-force ``accept_token`` set on the toy and a real
  vocabulary, and jump-forward, at prefixes of accepted texts;
- a schema leapgen says admits no value has no valid instance among the texts.
"""

from __future__ import annotations

import copy
import decimal
import json
import random
from fractions import Fraction

import jsonschema
import pytest
import regex

from leapgen import CompileLimitError, GrammarError, GrammarMatcher
from tests.conformance.key_order import schema_order

from . import regex_gen as rg
from . import schema_gen as sg
from .harness import (REAL_FAMILIES, REPORTS, Brute, Failure, check_jump_forward, check_mask, chunks,
                      leapgen_strings, run_seeds, shrink_failure, verdict, vocab)

CI_SEEDS = range(0, 160)
SLOW_SEEDS = range(300_000, 312_000)  # ~0.04 s a seed on one core: ~8 min (see test_fuzz_gbnf.py)
CHUNK = 40


def _oracle_class():
    """``Draft202012Validator`` reading numbers exactly: JSON numbers with a fraction or exponent are parsed
    as ``Decimal`` (a float rounds ``2243535803092070357504634665043864775554154.01605`` to an integer), so
    ``integer``, ``number`` and ``multipleOf`` take them too (``Fraction`` arithmetic); ``pattern``,
    ``patternProperties`` and ``additionalProperties`` search as ``jsonschema`` does, with a time limit."""
    base = jsonschema.Draft202012Validator

    def is_number(_, x) -> bool:
        return isinstance(x, (int, float, decimal.Decimal)) and not isinstance(x, bool)

    def is_integer(_, x) -> bool:
        if isinstance(x, decimal.Decimal):
            return x == x.to_integral_value()
        return is_number(_, x) and (isinstance(x, int) or x.is_integer())

    def multiple_of(validator, divisor, instance, schema):
        if validator.is_type(instance, "number") and (Fraction(instance) / Fraction(divisor)).denominator != 1:
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {divisor}")

    def pattern(validator, pat, instance, schema):
        if validator.is_type(instance, "string") and not _search(pat, instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {pat!r}")

    def pattern_properties(validator, patterns, instance, schema):
        if validator.is_type(instance, "object"):
            for pat, sub in patterns.items():
                for k, v in instance.items():
                    if _search(pat, k):
                        yield from validator.descend(v, sub, path=k, schema_path=pat)

    def additional_properties(validator, extra, instance, schema):
        if not validator.is_type(instance, "object"):
            return
        listed, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        extras = [k for k in instance if k not in listed and not any(_search(p, k) for p in patterns)]
        if validator.is_type(extra, "object"):
            for k in extras:
                yield from validator.descend(instance[k], extra, path=k)
        elif extra is False and extras:
            yield jsonschema.ValidationError(f"additional properties {extras!r}")

    types = base.TYPE_CHECKER.redefine_many({"number": is_number, "integer": is_integer})
    keywords = {"multipleOf": multiple_of, "pattern": pattern, "patternProperties": pattern_properties,
                "additionalProperties": additional_properties}
    return jsonschema.validators.extend(base, keywords, type_checker=types)


class OracleTimeout(Exception):
    """A pattern search of the oracle ran past its time limit (a backtracking blow-up of a random pattern)."""


def _search(pattern: str, text: str) -> bool:
    """``re.search`` as ``jsonschema`` does it, through the ``regex`` module for its time limit."""
    try:
        return regex.search(pattern, text, timeout=0.5) is not None
    except TimeoutError:
        raise OracleTimeout(pattern) from None


#: RFC 3339 Appendix A ``duration``, written from the RFC's ABNF (``jsonschema`` checks it only with the
#: ``isoduration`` package, which is not a dependency; unchecked, a negated format turns into false verdicts).
_DUR_TIME = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DURATION = regex.compile(rf"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)(?:{_DUR_TIME})?"
                          rf"|{_DUR_TIME}|[0-9]+W)")
#: RFC 1123 host names: labels of 1-63 letters, digits and inner hyphens, 253 characters in all (``jsonschema``
#: checks ``hostname`` only with the ``fqdn`` package).
_LABEL = regex.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def _is_duration(text) -> bool:
    return not isinstance(text, str) or _DURATION.fullmatch(text) is not None


def _is_hostname(text) -> bool:
    if not isinstance(text, str):
        return True
    return 0 < len(text) <= 253 and all(_LABEL.fullmatch(label) for label in text.split("."))


def _format_checker() -> jsonschema.FormatChecker:
    """Draft 2020-12's format checks, with ``duration`` and ``hostname`` (above) where ``jsonschema``
    would skip them; ``date`` and ``date-time`` of the year 0000 (RFC 3339 allows 0000-9999, Python's
    ``datetime`` starts at 1) are checked as the year 2000, the same calendar."""
    checker = copy.deepcopy(jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for name, func in (("duration", _is_duration), ("hostname", _is_hostname)):
        if name not in checker.checkers:
            checker.checks(name)(func)
    for name in ("date", "date-time"):
        func, raises = checker.checkers[name]

        def widened(text, func=func, raises=raises):
            try:
                ok = func(text)
            except raises:
                ok = False
            return ok or (isinstance(text, str) and text.startswith("0000") and func("2000" + text[4:]))
        checker.checkers[name] = (widened, raises)
    return checker


ORACLE = _oracle_class()
FORMAT_CHECKER = _format_checker()


class OracleNumber(Exception):
    """A JSON number whose exponent is too large for the oracle's exact arithmetic (``Fraction``)."""


def _decimal(text: str) -> decimal.Decimal:
    d = decimal.Decimal(text)
    if abs(d.adjusted()) > 400:
        raise OracleNumber(text)
    return d


def _parse(text: str):
    """(value, has a repeated key) of JSON text, or None when it is not JSON (NaN and Infinity are not).
    Raises :class:`OracleNumber` for a number the oracle cannot check exactly."""
    repeated = [False]

    def pairs(items):
        keys = [k for k, _ in items]
        repeated[0] = repeated[0] or len(set(keys)) != len(keys)
        return dict(items)

    def constant(name):
        raise ValueError(name)

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=constant, parse_float=_decimal)
    except decimal.InvalidOperation:
        raise OracleNumber(text) from None
    except (ValueError, RecursionError):
        return None
    return value, repeated[0]


def _has_format(schema) -> bool:
    if isinstance(schema, dict):
        return "format" in schema or any(_has_format(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_format(v) for v in schema)
    return False


def check_schema(schema: dict, patterns: dict, any_order: bool, rng: random.Random, seed: int, report) -> None:
    """Every check of the module docstring on one schema; raises :class:`Failure` (not shrunk)."""
    text_of_schema = json.dumps(schema, ensure_ascii=False)
    twin = sg.oracle_twin(schema, patterns)
    try:
        validator = ORACLE(twin, format_checker=FORMAT_CHECKER)
        validator.is_valid(None)
    except (jsonschema.exceptions.SchemaError, jsonschema.exceptions.RefResolutionError, re_error()):
        report.notes["schemas the oracle cannot read"] += 1
        return
    toy = vocab("toy")
    ours = [sg.instance(schema, rng, schema, patterns) for _ in range(6)]
    for value in ours:  # (also: laid out below by the oracle's branch choices)
        try:
            validator.is_valid(value)
        except OracleTimeout:
            report.notes["schemas the oracle timed out on"] += 1
            return
    try:
        compiled = toy.compiler.compile_json_schema(schema, any_whitespace=False, strict_mode=False,
                                                    any_order=any_order)
    except CompileLimitError:
        report.notes["compile limits"] += 1
        return
    except GrammarError as e:  # SchemaError, or an empty language found by the automaton
        if "admits no JSON value" in str(e) or "matches no string" in str(e):
            for value in ours:
                if validator.is_valid(value):  # (timed out above otherwise)
                    raise Failure("empty", text_of_schema, sg.layout(value),
                                  "leapgen says the schema admits no value; the oracle accepts this one") from None
            report.notes["empty languages"] += 1
        else:
            report.refused += 1
        return
    formats = _has_format(schema)

    def laid_out(value) -> str:
        return sg.layout(value if any_order else schema_order(twin, value))

    texts = {laid_out(v): True for v in ours}
    texts.update({laid_out(rng.choice([None, 0, -1.5, "", "a", True, [], {}, [1], {"a": 1}])): False
                  for _ in range(2)})
    for data in leapgen_strings(compiled, rng, 6, max_bytes=60):
        texts.setdefault(data.decode("utf-8", "surrogateescape"), False)
    for t in rng.sample(sorted(texts), min(6, len(texts))):
        texts.setdefault(rg.mutate(t, rng), False)
    for value in ours:  # a key written twice, at any depth (fault 3: a repeat must not count towards minProperties)
        for t in sg.repeated_key_texts(value if any_order else schema_order(twin, value), rng):
            texts.setdefault(t, False)
    accepted = []
    for text, own in texts.items():
        got = verdict(compiled, text.encode("utf-8", "surrogateescape"))
        try:
            parsed = _parse(text)
            valid = parsed is not None and validator.is_valid(parsed[0])
        except OracleTimeout:
            report.notes["texts the oracle timed out on"] += 1
            continue
        except OracleNumber:
            report.notes["texts with a number beyond the oracle's exponents"] += 1
            continue
        if got and not valid and not compiled.warnings:
            raise Failure("unsound", text_of_schema, text, "leapgen accepts it, jsonschema rejects it"
                          + (" (a repeated key)" if parsed and parsed[1] else ""))
        if valid and not got and not parsed[1] and text == laid_out(parsed[0]) and (own or not formats):
            raise Failure("incomplete", text_of_schema, text, "jsonschema accepts it, leapgen rejects it")
        if got:
            accepted.append(text.encode("utf-8", "surrogateescape"))
    report.strings += len(texts)
    real = vocab(REAL_FAMILIES[seed % len(REAL_FAMILIES)])
    targets = [(toy, compiled, 2)]
    if accepted:
        targets.append((real, real.compiler.compile_json_schema(schema, any_whitespace=False, strict_mode=False,
                                                                any_order=any_order), 1))
    for v, compiled_v, n in targets:
        brute = Brute(compiled_v, v)
        for data in rng.sample(accepted, min(n, len(accepted))):
            cut = data[:rng.randint(0, len(data))]
            matcher = GrammarMatcher(compiled_v)
            assert matcher.accept_string(cut)
            rests = [a[len(cut):] for a in accepted if a.startswith(cut)]
            mask = check_mask(matcher, brute, rng, text_of_schema, cut, report)
            check_jump_forward(matcher, mask, v, rests, text_of_schema, cut)


def re_error():
    import re

    return re.error


def run_seed(seed: int, report) -> None:
    rng = random.Random(f"schema:{seed}")
    gen = sg.SchemaGen(rng)
    schema = gen.root()
    any_order = seed % 2 == 1
    state = rng.getstate()
    report.grammars += 1
    report.notes["any_order schemas"] += any_order
    try:
        check_schema(schema, gen.patterns, any_order, rng, seed, report)
    except Failure as first:
        raise _shrunk(first, schema, gen.patterns, any_order, state, seed) from None


def smaller_schemas(schema):
    """Schemas with one part gone: a keyword dropped, a subschema replaced by one of its own, an item dropped."""
    if isinstance(schema, list):
        for i in range(len(schema)):
            if len(schema) > 1:
                yield schema[:i] + schema[i + 1:]
            for c in smaller_schemas(schema[i]):
                yield schema[:i] + [c] + schema[i + 1:]
    elif isinstance(schema, dict):
        for k in list(schema):
            if k != "type":
                yield {kk: v for kk, v in schema.items() if kk != k}
        for k, v in schema.items():
            if isinstance(v, dict) and k not in ("properties", "$defs", "patternProperties", "dependentRequired"):
                yield v
            for c in smaller_schemas(v):
                yield {**schema, k: c}


def _shrunk(first: Failure, schema, patterns, any_order: bool, state, seed: int) -> Failure:
    def run(s):
        rng = random.Random()
        rng.setstate(state)
        check_schema(s, patterns, any_order, rng, seed, REPORTS["(shrinking)"])

    failure = shrink_failure(first, schema, run, lambda s: list(smaller_schemas(s)))
    failure.detail += f" (any_order={any_order})"
    return failure


@pytest.mark.parametrize("seeds", chunks(CI_SEEDS, CHUNK), ids=lambda s: f"seeds{s.start}-{s.stop - 1}")
def test_schema_fuzz(seeds):
    run_seeds(run_seed, seeds, REPORTS["JSON Schema (CI tier)"])


@pytest.mark.slow
@pytest.mark.parametrize("seeds", chunks(SLOW_SEEDS, CHUNK), ids=lambda s: f"seeds{s.start}-{s.stop - 1}")
def test_schema_fuzz_slow(seeds):
    run_seeds(run_seed, seeds, REPORTS["JSON Schema (slow tier)"])
