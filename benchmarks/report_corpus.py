"""Per-half and per-subset tables of ``bench_masks.py`` results (JSONSchemaBench).

The corpus is split in two fixed halves by schema hash (``workloads.split_half``):
speed work is tuned on ``tune`` only, and ``holdout`` stands in for schemas
nobody looked at, so every table here reports the halves apart (and both
together). A JSONSchemaBench grammar's subset is the second part of its name
(``jsb/<Subset>/<file>``).
"""

from __future__ import annotations

import re

import numpy as np

import report
import workloads
from workloads import HALVES

_KEYS = ("TTFM p50 ms", "TTFM p99 ms", "TBM mean µs", "TBM p99 µs", "first-visit mean µs")


def subset_of(grammar) -> str:
    """The JSONSchemaBench subset of a ``jsb`` grammar."""
    return grammar.name.split("/")[1]


def jsb_results(results: dict, grammars: list, half: str | None, subset: str | None = None, where=None) -> dict:
    """``results`` restricted to the JSONSchemaBench grammars of ``half`` (None: both halves), of
    ``subset`` (None: every subset) and, given ``where``, those ``where(grammar)`` holds for; still
    indexed by position in ``grammars``."""
    keep = {g for g, gr in enumerate(grammars) if gr.group == "jsb" and (half is None or gr.half == half)
            and (subset is None or subset_of(gr) == subset) and (where is None or where(gr))}
    return {b: {**res, "grammars": {g: r for g, r in res["grammars"].items() if g in keep}}
            for b, res in results.items()}


def select(results: dict, grammars: list, half: str | None) -> tuple[dict, list]:
    """``(results, grammars)`` of the JSONSchemaBench schemas of ``half``; every grammar when None."""
    return (results if half is None else jsb_results(results, grammars, half)), grammars


def _cell(x: float, digits: int = 1) -> str:
    return "-" if x != x else f"{x:,.{digits}f}"


def _verdict(fig: dict, key: str) -> str:
    """``yes`` when leapgen's figure is at most every peer's (``-`` without leapgen or peers)."""
    if "leapgen" not in fig or len(fig) < 2:
        return "-"
    mine = fig["leapgen"][key]
    peers = [f[key] for b, f in fig.items() if b != "leapgen" and f[key] == f[key]]
    return "-" if mine != mine or not peers else ("yes" if mine <= min(peers) else "**no**")


def half_tables(results: dict, grammars: list, half: str | None) -> str:
    """Headline figures per backend, over the half (None: both) and per subset."""
    jsb = [gr for gr in grammars if gr.group == "jsb" and (half is None or gr.half == half)]
    rows = []
    for subset in [None] + sorted({subset_of(gr) for gr in jsb}):
        fig = report.headline(jsb_results(results, grammars, half, subset), grammars)
        n = sum(1 for gr in jsb if subset is None or subset_of(gr) == subset)
        for b, f in fig.items():
            rows.append([f"**all** ({n:,})" if subset is None else f"{subset} ({n:,})", b,
                         *(_cell(f[k], 2 if k == "TTFM p50 ms" else 1) for k in _KEYS),
                         _verdict(fig, "TBM mean µs") if b == "leapgen" else "",
                         _verdict(fig, "TBM p99 µs") if b == "leapgen" else ""])
    return (f"#### JSONSchemaBench, {half or 'both halves'}: per subset (schemas)\n\n"
            + report._table(["subset", "backend", *_KEYS, "TBM mean <= peers", "TBM p99 <= peers"], rows) + "\n")


def visit_kinds(results: dict, grammars: list, half: str | None) -> str:
    """leapgen's TBM by visit (first / cached) and grammar kind (one DFA / pushdown): where it goes."""
    res = jsb_results(results, grammars, half).get("leapgen")
    if res is None:
        return ""
    rows = []
    cells = {}
    for g, r in res["grammars"].items():
        if "tbm_ns" not in r:
            continue
        kind = "counted" if r.get("counted") else "regular" if r.get("regular", True) else "context-free"
        for times, flags in zip(r["tbm_ns"], r["first"]):
            for ns, first in zip(times, flags):
                cells.setdefault((kind, "first" if first else "cached"), []).append(ns / 1e3)
    total = sum(sum(v) for v in cells.values())
    for key in sorted(cells):
        us = np.array(cells[key])
        rows.append([key[0], key[1], f"{len(us):,}", _cell(us.mean()), _cell(np.percentile(us, 50)),
                     _cell(np.percentile(us, 99)), f"{100 * us.sum() / total:.0f} %"])
    return (f"#### Where leapgen's TBM goes, {half or 'both halves'}: grammar kind (one DFA, one DFA with counted "
            f"string lengths, pushdown) x visit\n\n"
            + report._table(["grammar", "visit", "tokens", "mean µs", "p50 µs", "p99 µs", "share of TBM time"], rows)
            + "\n")


_BOUND = re.compile(r'"(?:min|max)Length"\s*:\s*(\d+)')


_SOURCES: dict[str, str] = {}


def long_string_bound(grammar) -> bool:
    """Whether a schema's text holds a ``minLength`` or ``maxLength`` of at least
    :data:`leapgen.grammar.json.lengths.COUNTED_MIN_LENGTH` (32): the strings leapgen counts at run time
    where the schema is one regular language (approximate: a pattern's bound counts too). A grammar read
    back from saved results has no text: the corpus gives it."""
    text = grammar.source
    if not text:
        if not _SOURCES:
            _SOURCES.update((g.name, g.source) for g in workloads.jsonschemabench_grammars(None))
        text = _SOURCES.get(grammar.name, "")
    return any(int(n) >= 32 for n in _BOUND.findall(text))


def bound_tables(results: dict, grammars: list, half: str | None) -> str:
    """The headline figures of the schemas with a long string bound and of the others."""
    rows = []
    for label, where in (("with a string bound >= 32", long_string_bound),
                         ("the others", lambda gr: not long_string_bound(gr))):
        n = sum(1 for gr in grammars if gr.group == "jsb" and (half is None or gr.half == half) and where(gr))
        fig = report.headline(jsb_results(results, grammars, half, where=where), grammars)
        for b, f in fig.items():
            rows.append([f"{label} ({n:,})", b, *(_cell(f[k], 2 if k == "TTFM p50 ms" else 1) for k in _KEYS)])
    return (f"#### JSONSchemaBench, {half or 'both halves'}: schemas with long string bounds and the others\n\n"
            + report._table(["schemas", "backend", *_KEYS], rows) + "\n")


def gc_table(results: dict) -> str:
    """The collector's pauses in each backend's workers (the ``done`` message of the last one)."""
    rows = []
    for b, res in results.items():
        gc = res.get("done", {}).get("gc")
        if not gc:
            continue
        steps = sum(len(t) for r in res["grammars"].values() for t in r.get("tbm_ns", ()))
        over = sum(ms > 10 for r in res["grammars"].values() for ms in r.get("gc_ms", ()))
        rows.append([b, f"{steps:,}", str(over), _cell(1e5 * over / max(steps, 1), 2),
                     str(gc["collections"]), _cell(gc["total_ms"], 0)])
    if not rows:
        return ""
    return ("#### Garbage-collector pauses (the last worker's counts; pauses over 10 ms inside walks over all)\n\n"
            + report._table(["backend", "timed steps", "pauses > 10 ms in walks", "per 100k steps",
                             "collections (last worker)", "total pause ms (last worker)"], rows) + "\n")


def render(results: dict, grammars: list) -> str:
    """The corpus tables: each half and both, per subset; leapgen's TBM by visit kind; GC pauses."""
    if not any(gr.group == "jsb" for gr in grammars):
        return gc_table(results)
    halves = [h for h in HALVES if any(gr.group == "jsb" and gr.half == h for gr in grammars)]
    parts = ["### JSONSchemaBench per half of the split and per subset", ""]
    for half in halves + ([None] if len(halves) > 1 else []):
        parts += [half_tables(results, grammars, half), bound_tables(results, grammars, half),
                  visit_kinds(results, grammars, half)]
    parts.append(gc_table(results))
    return "\n".join(parts)


def median_subsets(runs: list[tuple[dict, list]], half: str | None) -> str:
    """Per subset of ``half``: the median over runs of each backend's figures (each run in brackets)."""
    grammars = runs[0][1]
    subsets = sorted({subset_of(gr) for gr in grammars if gr.group == "jsb" and (half is None or gr.half == half)})
    rows = []
    for subset in [None] + subsets:
        figs = [report.headline(jsb_results(results, grs, half, subset), grs) for results, grs in runs]
        backends = [b for b in figs[0] if all(b in f for f in figs)]
        med = {b: {k: float(np.median([f[b][k] for f in figs])) for k in _KEYS} for b in backends}
        for b in backends:
            cells = []
            for k in ("TBM mean µs", "TBM p99 µs", "first-visit mean µs", "TTFM p50 ms", "TTFM p99 ms"):
                digits = 2 if k == "TTFM p50 ms" else 1
                cells.append(f"**{_cell(med[b][k], digits)}** ({', '.join(_cell(f[b][k], digits) for f in figs)})")
            rows.append(["**all**" if subset is None else subset, b, *cells,
                         _verdict(med, "TBM mean µs") if b == "leapgen" else "",
                         _verdict(med, "TBM p99 µs") if b == "leapgen" else ""])
    return (f"#### Medians over {len(runs)} runs, JSONSchemaBench {half or 'both halves'}, per subset\n\n"
            + report._table(["subset", "backend", "TBM mean µs", "TBM p99 µs", "first-visit mean µs", "TTFM p50 ms",
                             "TTFM p99 ms", "TBM mean <= peers", "TBM p99 <= peers"], rows) + "\n")
