"""Where leapgen's TBM goes: cProfile of fill + accept over the benchmark workload.

Usage (from the repository root)::

    python benchmarks/profile_tbm.py --schemas 20 --top 25

Compiles every grammar first (not profiled), then profiles only the
per-token loop of ``bench_masks.py`` (fill the bitmask, accept the token)
and prints the functions by own time, plus the share of the loop spent in
first visits (rows computed) versus cached rows.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE)]

import runner  # noqa: E402
import workloads  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default="llama3")
    p.add_argument("--schemas", type=int, default=20, help="JSONSchemaBench schemas to sample")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=25, help="functions to list")
    p.add_argument("--names", default=None, help="comma-separated grammar names of bench_masks.py "
                                                 "(jsb/<subset>/<id>): profile these only")
    args = p.parse_args(argv)

    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    from leapgen.backends import get_backend
    from leapgen.errors import GrammarError

    hf_tokenizer, info = load_hf_tokenizer(args.tokenizer), load_tokenizer_info(args.tokenizer)
    if args.names:
        wanted = set(args.names.split(","))
        grammars = [g for g in workloads.jsonschemabench_grammars(None) + workloads.cfg_grammars()
                    if g.name in wanted]
        if missing := wanted - {g.name for g in grammars}:
            p.error(f"no such grammars: {sorted(missing)}")
    else:
        grammars = (workloads.fixed_grammars() + workloads.jsonschemabench_grammars(args.schemas, seed=args.seed)
                    + workloads.cfg_grammars())
    backend = get_backend("leapgen", info, max_compile_seconds=runner.COMPILE_LIMIT_S)
    work = []
    for g in grammars:
        try:
            compiled = runner.compile_grammar(backend, g)
        except GrammarError:
            continue
        work.append((compiled, [hf_tokenizer.encode(t, add_special_tokens=False) for t in g.instances]))
    profiler = cProfile.Profile()
    t = time.perf_counter()
    profiler.enable()
    for compiled, token_lists in work:
        runner.walk(backend, compiled, token_lists, info.stop_token_ids[0], record_states=False)
    profiler.disable()
    elapsed = time.perf_counter() - t
    hits = sum(c.mask_cache_hits for c, _ in work)
    misses = sum(c.mask_cache_misses for c, _ in work)
    print(f"{len(work)} grammars, loop {elapsed:.1f} s; bitmask rows: {misses} computed, {hits} from cache")
    stats = pstats.Stats(profiler, stream=(out := io.StringIO()))
    computed = sum(v[3] for (path, _, name), v in stats.stats.items()
                   if name == "_allowed_bits" and path.endswith(("compiled.py", "compiled_cfg.py")))
    print(f"computing rows (first visits): {computed:.2f} s, {100 * computed / max(elapsed, 1e-9):.0f} % of the loop")
    stats.sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
