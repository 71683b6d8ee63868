"""Where leapgen's TBM goes on bench_structural_tag.py's walks, by visit kind.

Usage (from the repository root)::

    python benchmarks/profile_structural_tag.py --tools 16
    python benchmarks/profile_structural_tag.py --tools 16 --lazy   # as before issue 17's precompute

One process, leapgen only, the benchmark's tools, tag and outputs (``--first-tool``
as there). Each step (fill + accept, the thread's CPU time) is sorted by the DFA
state it fills from: *free text* (at least 170 live bytes), *forced* (one live
byte: a tag's begin and end, JSON keys and punctuation) or *JSON content* (the
rest: whitespace, numbers, strings), and by how its row was got: *computed* at
this fill (a first visit), *precomputed* at compile time (expanded into the
bitmask), or *cached* (a later visit). ``--lazy`` compiles with only the
free-text states' masks computed at compile time, the others at a first visit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE)]

import bench_structural_tag as bench  # noqa: E402
import report  # noqa: E402
import workloads  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tools", type=int, default=16)
    p.add_argument("--first-tool", type=int, default=0)
    p.add_argument("--tokenizer", default="llama3")
    p.add_argument("--lazy", action="store_true", help="masks at a state's first visit (free text aside)")
    args = p.parse_args(argv)
    import numpy as np
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    import leapgen.compiler.structural_tags as structural_tags
    from leapgen import GrammarCompiler, GrammarMatcher

    if args.lazy:
        structural_tags.EAGER_ROW_STATES = 0
    info, hf = load_tokenizer_info(args.tokenizer), load_hf_tokenizer(args.tokenizer)
    chosen = bench.tools(workloads.JSB_ROOT, args.first_tool + args.tools, bench.leapgen_accepts(info))[args.first_tool:]
    compiler = GrammarCompiler(info, cache_entries=0)
    compiler.compile_structural_tag(bench.structural_tag(chosen[:1]))  # kernels loaded
    t0 = time.perf_counter()
    compiled = compiler.compile_structural_tag(bench.structural_tag(chosen))
    compile_ms = (time.perf_counter() - t0) * 1e3
    if not compiled.is_regular:
        raise SystemExit("the tag compiled to a pushdown grammar: no DFA states to sort steps by")
    live = (compiled.dfa.trans >= 0).sum(axis=1)
    stored = compiled._compact
    clock = time.thread_time_ns
    bitmask = np.zeros((1, compiled.token_index.bitmask_words), np.int32)
    steps: dict[tuple[str, str], list[float]] = {}
    for text in bench.outputs(chosen):
        m = GrammarMatcher(compiled)
        for token in hf.encode(text, add_special_tokens=False):
            q = m.state
            kind = "free text" if live[q] >= 170 else "forced" if live[q] == 1 else "JSON content"
            how = ("cached" if compiled._rows.get(q) is not None else
                   "precomputed" if stored is not None and stored.holds(q) else "computed")
            a = clock()
            m.fill_next_token_bitmask(bitmask, 0)
            if not m.accept_token(token):
                raise SystemExit(f"leapgen rejected token {token} of {text!r}")
            steps.setdefault((kind, how), []).append((clock() - a) / 1e3)
    total = sum(sum(v) for v in steps.values())
    n = sum(len(v) for v in steps.values())
    print(f"{report.machine()}\n{args.tools} tools from {args.first_tool}, {compiled.n_states} DFA states, "
          f"compile {compile_ms:.0f} ms{' (lazy)' if args.lazy else ''}; {n} steps, "
          f"TBM mean {total / n:.1f} µs\n")
    rows = [[kind, how, str(len(v)), f"{statistics.fmean(v):.1f}", f"{max(v):.1f}", f"{100 * sum(v) / total:.0f} %"]
            for (kind, how), v in sorted(steps.items())]
    print(report._table(["state", "row", "steps", "mean µs", "max µs", "share of TBM"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
