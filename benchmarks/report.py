"""Tables and plots for ``bench_masks.py`` results.

``results[backend]`` holds what the worker sent: ``init``, ``grammars``
(per grammar index: a walk result or ``{"error": ...}``), ``batch``,
``batch_new`` (leapgen only) and ``done``.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata

import numpy as np

GROUPS = ("regex", "schema", "jsb", "cfg", "gbnf", "choice")


def machine() -> str:
    """One line naming the CPU, cores, Python and the engines' versions."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = []
    for dist in ("leapgen", "xgrammar", "llguidance", "outlines-core", "numpy"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}; " + ", ".join(versions)


def _pct(values, q) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def _fmt(x: float, digits: int = 1) -> str:
    return "-" if x != x else f"{x:,.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def steps(results: dict, backend: str, grammars: list) -> list[tuple[int, int, int, int, str]]:
    """Every timed step of a backend: (grammar, instance, step, ns, visit),
    visit ``first``, ``cached`` or ``unknown`` (from leapgen's walk, when run)."""
    ref = results.get("leapgen", {}).get("grammars", {})
    out = []
    for g, res in results[backend]["grammars"].items():
        if "tbm_ns" not in res:
            continue
        ref_first = ref.get(g, {}).get("first")
        for i, times in enumerate(res["tbm_ns"]):
            flags = ref_first[i] if ref_first is not None else []
            for k, ns in enumerate(times):
                visit = ("first" if flags[k] else "cached") if k < len(flags) else "unknown"
                out.append((g, i, k, ns, visit))
    return out


def _stats_row(us: np.ndarray) -> list[str]:
    if not len(us):
        return ["0"] + ["-"] * 5
    return [f"{len(us):,}", _fmt(us.mean()), _fmt(_pct(us, 50)), _fmt(_pct(us, 90)), _fmt(_pct(us, 99)),
            _fmt(us.max())]


def _per_grammar(results: dict, grammars: list, all_steps: dict, group: str, title: str) -> list[str]:
    """The table of one group's grammars: TTFM / TBM mean / TBM p99 per backend."""
    chosen = [g for g, gr in enumerate(grammars) if gr.group == group]
    if not chosen:
        return []
    rows = []
    for g in chosen:
        cells = [grammars[g].name]
        for b in results:
            res = results[b]["grammars"].get(g, {})
            us = np.array([s[3] for s in all_steps[b] if s[0] == g], float) / 1e3
            cells.append(f"{_fmt(res['ttfm_ms'])} / {_fmt(us.mean())} / {_fmt(_pct(us, 99))} ({len(us):,})"
                         if len(us) and "ttfm_ms" in res else res.get("error", "-")[:60])
        rows.append(cells)
    return [f"### {title}: TTFM ms / TBM mean µs / TBM p99 µs (tokens)", "", _table(["grammar", *results], rows), ""]


def render(results: dict, grammars: list, title: str) -> str:
    """The markdown report of a run."""
    backends = list(results)
    group_of = {g: gr.group for g, gr in enumerate(grammars)}
    n_group = {grp: sum(1 for gr in grammars if gr.group == grp) for grp in GROUPS}
    parts = [f"## {title}", "", f"Machine: {machine()}", ""]

    rows = []
    for b in backends:
        res = results[b]["grammars"]
        ok = {g for g, r in res.items() if "ttfm_ms" in r and "error" not in r}
        errors = [r["error"] for r in res.values() if "error" in r]
        ttfm = np.array([res[g]["ttfm_ms"] for g in ok])
        per_group = ", ".join(f"{grp} {sum(1 for g in ok if group_of[g] == grp)}/{n_group[grp]}"
                              for grp in GROUPS if n_group[grp])
        rows.append([b, f"{len(ok)}/{len(grammars)}", str(sum(e.startswith("timeout") for e in errors)),
                     str(sum(not e.startswith("timeout") for e in errors)), _fmt(_pct(ttfm, 50)),
                     _fmt(_pct(ttfm, 90)), _fmt(_pct(ttfm, 99)), _fmt(ttfm.max() if len(ttfm) else float("nan")),
                     per_group])
    parts += ["### TTFM: compile + first mask (ms)", "",
              _table(["backend", "compiled", "timeouts (>10 s)", "errors", "p50", "p90", "p99", "max",
                      "compiled per group"], rows), ""]

    all_steps = {b: steps(results, b, grammars) for b in backends}
    rows = [[b, *_stats_row(np.array([s[3] for s in all_steps[b]], float) / 1e3)] for b in backends]
    parts += ["### TBM: fill + accept per token (µs), all timed tokens", "",
              _table(["backend", "tokens", "mean", "p50", "p90", "p99", "max"], rows), ""]

    rows = []
    for b in backends:
        for visit in ("first", "cached"):
            us = np.array([s[3] for s in all_steps[b] if s[4] == visit], float) / 1e3
            rows.append([b, visit, *_stats_row(us)])
    parts += ["### TBM by visit (µs): first visit of an automaton state vs a state seen before", "",
              _table(["backend", "visit", "tokens", "mean", "p50", "p90", "p99", "max"], rows), ""]

    present = [grp for grp in GROUPS if n_group[grp]]
    rows = []
    for b in backends:
        cells = [b]
        for grp in present:
            us = np.array([s[3] for s in all_steps[b] if group_of[s[0]] == grp], float) / 1e3
            cells.append(f"{_fmt(us.mean())} / {_fmt(_pct(us, 99))}" if len(us) else "-")
        rows.append(cells)
    parts += ["### TBM by workload group (mean / p99 µs)", "", _table(["backend", *present], rows), ""]

    for group, title in (("cfg", "Context-free grammars"), ("gbnf", "GBNF corpora"), ("choice", "Choice (vLLM's choice)")):
        parts += _per_grammar(results, grammars, all_steps, group, title)

    if "leapgen" in all_steps:
        mine = {s[:3]: s[3] for s in all_steps["leapgen"]}
        rows = []
        for b in backends:
            if b == "leapgen":
                continue
            common = [(mine[s[:3]], s[3]) for s in all_steps[b] if s[:3] in mine]
            if common:
                a = np.array(common, float) / 1e3
                rows.append([b, f"{len(a):,}", _fmt(a[:, 0].mean()), _fmt(_pct(a[:, 0], 99)),
                             _fmt(a[:, 1].mean()), _fmt(_pct(a[:, 1], 99))])
        parts += ["### TBM on the same tokens (µs): leapgen vs each peer, steps both timed", "",
                  _table(["peer", "tokens", "leapgen mean", "leapgen p99", "peer mean", "peer p99"], rows), ""]

    rows = []
    for b in backends:
        walked = [r for r in results[b]["grammars"].values() if "rejected" in r]
        rej = [x for r in walked for x in r["rejected"]]
        end = [x for r in walked for x, j in zip(r["end_ok"], r["rejected"]) if j is None]
        rows.append([b, str(len(rej)), str(rej.count(None)), str(rej.count("mask")), str(rej.count("accept")),
                     str(end.count(False))])
    parts += ["### Valid instances", "",
              _table(["backend", "walked", "accepted", "token not in mask", "token rejected by accept",
                      "stop token not allowed at the end"], rows), ""]

    rows = []
    for b in backends:
        init, done = results[b].get("init", {}), results[b].get("done", {})
        rows.append([b, _fmt(init.get("init_s", float("nan")), 2), _fmt(init.get("rss_start_mib", float("nan")), 0),
                     _fmt(init.get("rss_init_mib", float("nan")), 0), _fmt(done.get("rss_peak_mib", float("nan")), 0)])
    parts += ["### Setup and memory (worker process RSS, MiB)", "",
              _table(["backend", "backend init (s)", "RSS at start", "RSS after init", "peak RSS"], rows), ""]

    rows = []
    for b in backends:
        batch = results[b].get("batch", {})
        for mode in ("loop", "batch"):
            cells = batch.get(mode, {})
            rows.append([b, "serial loop" if mode == "loop" else "backend batch fill",
                         *(_fmt(cells.get(s, cells.get(str(s), float("nan")))) for s in (1, 16, 64))])
        for label, us in results[b].get("batch_new", {}).items():
            rows.append([b, f"64 new states, {label}", "-", "-", _fmt(us)])
    parts += ["### Batch fill, median µs per batch (states seen before unless said)", "",
              _table(["backend", "mode", "batch 1", "batch 16", "batch 64"], rows), ""]
    return "\n".join(parts)


HEADLINE = ("TTFM p50 ms", "TTFM p99 ms", "TBM mean µs", "TBM p99 µs", "first-visit mean µs",
            "cached mean µs")


def headline(results: dict, grammars: list) -> dict[str, dict[str, float]]:
    """The issue's target figures of one run, per backend: TTFM p50/p99 (ms)
    and TBM mean/p99, first-visit and cached mean (µs)."""
    out = {}
    for b in results:
        res = results[b]["grammars"]
        ttfm = [r["ttfm_ms"] for r in res.values() if "ttfm_ms" in r and "error" not in r]
        st = steps(results, b, grammars)
        us = np.array([s[3] for s in st], float) / 1e3
        first = np.array([s[3] for s in st if s[4] == "first"], float) / 1e3
        cached = np.array([s[3] for s in st if s[4] == "cached"], float) / 1e3
        out[b] = dict(zip(HEADLINE, (_pct(ttfm, 50), _pct(ttfm, 99), us.mean() if len(us) else float("nan"),
                                     _pct(us, 99), first.mean() if len(first) else float("nan"),
                                     cached.mean() if len(cached) else float("nan"))))
    return out


def median_table(runs: list[dict[str, dict[str, float]]]) -> str:
    """Markdown: each headline figure's median over runs (each run's value in brackets)."""
    backends = [b for b in runs[0] if all(b in r for r in runs)]
    rows = []
    for b in backends:
        cells = []
        for k in HEADLINE:
            vals = [r[b][k] for r in runs]
            cells.append(f"**{_fmt(float(np.median(vals)))}** ({', '.join(_fmt(v) for v in vals)})")
        rows.append([b, *cells])
    return _table(["backend", *HEADLINE], rows)


def failures(results: dict, grammars: list, limit: int = 8) -> str:
    """The most common compile errors per backend, as a markdown list."""
    out = []
    for b, res in results.items():
        counts: dict[str, int] = {}
        for r in res["grammars"].values():
            if "error" in r:
                key = " ".join(r["error"].split(" (at ")[0].split())[:120]
                counts[key] = counts.get(key, 0) + 1
        if counts:
            out.append(f"- **{b}**: " + "; ".join(f"{n}x {msg}" for msg, n in
                                                   sorted(counts.items(), key=lambda kv: -kv[1])[:limit]))
    return "\n".join(out)


def plot(results: dict, grammars: list, path: str) -> None:
    """Empirical CDFs of TBM (all, first visit, cached) and TTFM per backend, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    panels = [("TBM, all tokens", None), ("TBM, first visits", "first"), ("TBM, cached states", "cached")]
    for ax, (name, visit) in zip(axes, panels):
        for b in results:
            us = np.sort([s[3] / 1e3 for s in steps(results, b, grammars) if visit is None or s[4] == visit])
            if len(us):
                ax.plot(us, np.arange(1, len(us) + 1) / len(us), label=b)
        ax.set(xscale="log", xlabel="µs per token (fill + accept)", ylabel="share of tokens", title=name)
        ax.grid(alpha=0.3)
    for b in results:
        ms = np.sort([r["ttfm_ms"] for r in results[b]["grammars"].values() if "tbm_ns" in r])
        if len(ms):
            axes[3].plot(ms, np.arange(1, len(ms) + 1) / len(ms), label=b)
    axes[3].set(xscale="log", xlabel="ms (compile + first mask)", ylabel="share of grammars", title="TTFM")
    axes[3].grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
