"""The benchmark scripts still run: each on a tiny workload, in a new process, as a user runs it.

The speed figures of the issues come from these scripts (never from timed tests), so a script
broken by a change elsewhere (``bench_gc.py`` was, by a change of ``runner.compile_grammar``'s
arguments) is a lost measurement. Nothing here checks a speed; each test checks that the script
exits 0 and prints its table. Those that walk JSONSchemaBench need ``../shared``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
CORPORA = ROOT.parent / "shared" / "corpora" / "jsonschemabench"
needs_corpus = pytest.mark.skipif(not CORPORA.is_dir(), reason="../shared/corpora/jsonschemabench is missing")


def _run(*args: str, timeout: float = 600) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@needs_corpus
def test_bench_gc_measures_a_few_schemas():
    out = _run(str(BENCH / "bench_gc.py"), "--mode", "library", "--json", "--schemas", "3", "--half", "holdout")
    res = json.loads(out.strip().splitlines()[-1])
    assert res["mode"] == "library" and res["steps"] > 0


@needs_corpus
def test_bench_masks_then_its_corpus_reports(tmp_path):
    out_file = tmp_path / "run.json"
    _run(str(BENCH / "bench_masks.py"), "--backend", "leapgen", "--schemas", "4", "--groups", "jsb",
         "--out", str(out_file))
    tables = _run(str(BENCH / "bench_masks.py"), "--from-results", str(out_file))
    assert "JSONSchemaBench, tune: per subset" in tables or "JSONSchemaBench, holdout: per subset" in tables
    lengths = _run(str(BENCH / "report_lengths.py"), str(out_file))
    assert "| leapgen |" in lengths


@needs_corpus
def test_profile_tbm_of_named_grammars():
    name = next(p for p in sorted((CORPORA / "schemas" / "Glaiveai2K").glob("*.json")))
    out = _run(str(BENCH / "profile_tbm.py"), "--names", f"jsb/Glaiveai2K/{name.stem}", "--top", "3")
    assert "computing rows (first visits)" in out


@needs_corpus
def test_bench_ttfm_interleaves_backends():
    out = _run(str(BENCH / "bench_ttfm.py"), "--schemas", "3", "--backend", "leapgen,llguidance", "--half", "holdout")
    assert "| leapgen |" in out and "| llguidance |" in out
