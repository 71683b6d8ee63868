"""Conformance ratchet (see :mod:`tests.conformance.harness` for the method).

(a) The whole JSON-Schema-Test-Suite, draft 2020-12 (every keyword file, plus
``optional/format``), and (b) a seeded sample of JSONSchemaBench with its
MaskBench instances (``CI_SAMPLE_PER_SUBSET`` schemas per subset), compared
with ``baseline.json``: a file's or subset's passed count (and a subset's
compiled count) must not drop, and no schema that compiled without warnings
may accept an invalid instance (``unsound == 0``).

After an improvement, regenerate the baseline with
``python -m tests.conformance.harness --update`` (and commit it).
"""

from __future__ import annotations

import json

import pytest

from tests.conformance import harness

pytestmark = pytest.mark.skipif(not harness.SUITE_DIR.is_dir() or not harness.BENCH_DIR.is_dir(),
                                reason="../shared/corpora (JSON-Schema-Test-Suite, JSONSchemaBench) is missing")


@pytest.fixture(scope="module")
def baseline() -> dict:
    if not harness.BASELINE.exists():
        pytest.skip("no baseline.json: run python -m tests.conformance.harness --update")
    return json.loads(harness.BASELINE.read_text())


@pytest.fixture(scope="module")
def compiler():
    return harness.byte_compiler(harness.RATCHET_LIMIT_S)


def _regressions(now: dict, base: dict, keys: tuple) -> dict:
    out = {}
    for name, old in base.items():
        new = now.get(name)
        if new is None:
            out[name] = "missing"
            continue
        for k in keys:
            if new[k] < old[k]:
                out[f"{name}.{k}"] = f"{old[k]} -> {new[k]}"
    return out


def test_json_schema_test_suite(baseline, compiler):
    now = harness.ratchet_view(harness.run_test_suite(compiler), {})["json_schema_test_suite"]
    unsound = {f: r["unsound"] for f, r in now.items() if r["unsound"]}
    assert not unsound, f"invalid instances accepted by schemas compiled without warnings: {unsound}"
    regressions = _regressions(now, baseline["json_schema_test_suite"], ("passed",))
    assert not regressions, f"fewer JSON-Schema-Test-Suite tests pass than the baseline: {regressions}"


def test_jsonschemabench_sample(baseline, compiler):
    results = harness.run_jsonschemabench(harness.CI_SAMPLE_PER_SUBSET, compiler=compiler)
    now = harness.ratchet_view({}, results)["jsonschemabench_sample"]
    unsound = {s: r["unsound"] for s, r in now.items() if r["unsound"]}
    assert not unsound, f"invalid MaskBench instances accepted by schemas compiled without warnings: {unsound}"
    regressions = _regressions(now, baseline["jsonschemabench_sample"], ("passed", "compiled"))
    assert not regressions, f"fewer JSONSchemaBench schemas compile or pass than the baseline: {regressions}"


def test_any_order_json_schema_test_suite(baseline, compiler):
    """``any_order=True``, instances in their own key order: no unsound acceptance, and no file passes
    fewer tests than the schema-order baseline."""
    now = harness.ratchet_view(harness.run_test_suite(compiler, any_order=True), {})["json_schema_test_suite"]
    unsound = {f: r["unsound"] for f, r in now.items() if r["unsound"]}
    assert not unsound, f"any_order: invalid instances accepted by schemas compiled without warnings: {unsound}"
    regressions = _regressions(now, baseline["json_schema_test_suite"], ("passed",))
    assert not regressions, f"any_order: fewer JSON-Schema-Test-Suite tests pass than in schema order: {regressions}"


@pytest.mark.slow
def test_any_order_jsonschemabench_sample(baseline, compiler):
    """``any_order=True`` on the JSONSchemaBench sample: at least 99.5 % of the valid instances accepted in
    their own key order, none unsound, no subset compiling fewer schemas than in schema order."""
    results = harness.run_jsonschemabench(harness.CI_SAMPLE_PER_SUBSET, compiler=compiler, any_order=True)
    view = harness.any_order_view({}, results)["jsonschemabench"]
    assert view["unsound"] == 0, {s: r["unsound"] for s, r in results.items() if r["unsound"]}
    assert view["valid_accepted_pct"] >= 99.5, view
    fewer = {s: (baseline["jsonschemabench_sample"][s]["compiled"], r["compiled"]) for s, r in results.items()
             if r["compiled"] < baseline["jsonschemabench_sample"][s]["compiled"]}
    assert not fewer, f"any_order compiles fewer schemas than schema order: {fewer}"
