"""TTFM (compile + first mask) of the backends interleaved schema by schema, in one process.

``bench_masks.py`` runs each backend in its own worker, one after the other: over a 30-minute
run the machine's speed drifts between them, and the TTFM ratio with it. Here every schema is
compiled by every backend in turn (the order alternates from schema to schema), after a warm-up,
so the ratios compare the same moments. Schemas are a random sample of one half of the fixed split
(``workloads.split_half``); each backend's compile cache never sees a schema twice.

    python benchmarks/bench_ttfm.py --schemas 1000 --half tune [--backend leapgen,llguidance,xgrammar]

Prints, per backend, the schemas compiled by all of them, the TTFM p50 / p90 / p99 (ms) and the
p50 over leapgen's (the first backend is the reference).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE)]

import runner  # noqa: E402
import workloads  # noqa: E402
from vocab_loaders import load_hf_tokenizer, load_tokenizer_info  # noqa: E402

WARM_UP = 5


def ttfm_ms(backend, grammar) -> float | None:
    """Compile ``grammar`` and fill its first mask; the milliseconds, or None where it failed."""
    bitmask = backend.allocate_bitmask(1)
    t = time.perf_counter()
    try:
        backend.new_state(runner.compile_grammar(backend, grammar)).fill_next_token_bitmask(bitmask, 0)
    except Exception:  # a schema a backend refuses is left out of every backend's figures
        return None
    return (time.perf_counter() - t) * 1e3


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="leapgen,llguidance,xgrammar", help="comma-separated; the first is the reference")
    p.add_argument("--schemas", type=int, default=1000)
    p.add_argument("--half", choices=("tune", "holdout"), default="tune")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    from leapgen.backends import get_backend

    names = args.backend.split(",")
    info, hf = load_tokenizer_info("llama3"), load_hf_tokenizer("llama3")
    grammars = [g for g in workloads.jsonschemabench_grammars(None) if g.half == args.half]
    random.Random(args.seed).shuffle(grammars)
    grammars = grammars[:args.schemas + WARM_UP]
    backends = {n: get_backend(n, info, hf_tokenizer=hf, max_compile_seconds=runner.COMPILE_LIMIT_S)
                if n == "leapgen" else get_backend(n, info, hf_tokenizer=hf) for n in names}
    for backend in backends.values():
        for g in grammars[:WARM_UP]:
            ttfm_ms(backend, g)
    gc.collect()
    gc.freeze()  # as bench_masks.py's workers and leapgen serve do after their start-up
    times: dict[str, list[float]] = {n: [] for n in names}
    for i, g in enumerate(grammars[WARM_UP:]):
        order = names if i % 2 == 0 else names[::-1]
        got = {n: ttfm_ms(backends[n], g) for n in order}
        if all(v is not None for v in got.values()):
            for n, v in got.items():
                times[n].append(v)
    count = len(times[names[0]])
    ref = statistics.median(times[names[0]]) if count else float("nan")
    print(f"## TTFM, {count} {args.half}-half schemas compiled by every backend (interleaved, one process)\n")
    print(f"| backend | p50 ms | p90 ms | p99 ms | p50 / {names[0]}'s |\n|---|---|---|---|---|")
    for n in names:
        ts = sorted(times[n])
        if not ts:
            continue
        p50 = statistics.median(ts)
        p90, p99 = (ts[min(int(q * len(ts)), len(ts) - 1)] for q in (0.9, 0.99))
        print(f"| {n} | {p50:.2f} | {p90:.1f} | {p99:.1f} | {p50 / ref:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
