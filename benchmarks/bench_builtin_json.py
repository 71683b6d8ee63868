"""TBM of the builtin JSON grammar, walked again and again, backends interleaved.

One walk of ``cfg/builtin_json`` (bench_masks.py's workload: ~4,300 Llama-3
tokens of real JSON documents) gives a TBM p99 that is the 43rd slowest step,
so it moves by ±15 % between runs on a shared machine. This script compiles the
grammar afresh for each round (first visits included, as in bench_masks.py),
walks it with every backend in turn, and prints each round's TBM and the
median of the rounds' p99 per backend, with its ratio to leapgen.

    python benchmarks/bench_builtin_json.py --rounds 7 [--backend leapgen,llguidance,xgrammar]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE)]

import runner  # noqa: E402
import workloads  # noqa: E402
from vocab_loaders import load_hf_tokenizer, load_tokenizer_info  # noqa: E402


def walk_once(name: str, info, tokenizer, grammar, token_lists) -> np.ndarray:
    """TBM (µs) of every step of one walk, with a fresh backend and compile."""
    from leapgen.backends import get_backend

    backend = get_backend(name, info, hf_tokenizer=tokenizer)
    compiled = runner.compile_grammar(backend, grammar, True)
    result = runner.walk(backend, compiled, token_lists, info.stop_token_ids[0], record_states=False)
    if any(r is not None for r in result["rejected"]):
        raise SystemExit(f"{name} rejected a valid document: {result['rejected']}")
    return np.concatenate([np.asarray(t, float) for t in result["tbm_ns"]]) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--backend", default="leapgen,llguidance,xgrammar",
                        help="comma-separated backends; the first is the reference of the ratios")
    args = parser.parse_args()
    names = args.backend.split(",")
    info, tokenizer = load_tokenizer_info("llama3"), load_hf_tokenizer("llama3")
    grammar = next(g for g in workloads.cfg_grammars() if g.name == "cfg/builtin_json")
    token_lists = [tokenizer.encode(t, add_special_tokens=False) for t in grammar.instances]
    for name in names:  # warm-up: imports, numba caches
        walk_once(name, info, tokenizer, grammar, token_lists)
    p99s: dict[str, list[float]] = {n: [] for n in names}
    print(f"## Builtin JSON grammar: {sum(map(len, token_lists)):,} tokens a walk, {args.rounds} rounds\n")
    print("| round | backend | mean | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|---|")
    for r in range(args.rounds):
        for name in names:
            t = walk_once(name, info, tokenizer, grammar, token_lists)
            p50, p90, p99 = np.percentile(t, [50, 90, 99])
            p99s[name].append(p99)
            print(f"| {r + 1} | {name} | {t.mean():.1f} | {p50:.1f} | {p90:.1f} | {p99:.1f} | {t.max():,.1f} |")
    ref = statistics.median(p99s[names[0]])
    print(f"\n| backend | median p99 (µs) | p99 per round | {names[0]} / backend |\n|---|---|---|---|")
    for name in names:
        med = statistics.median(p99s[name])
        print(f"| {name} | {med:.1f} | {', '.join(f'{v:.1f}' for v in p99s[name])} | {ref / med:.2f} |")


if __name__ == "__main__":
    main()
