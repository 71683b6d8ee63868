"""Token slices' worth, measured in one process: the index with every class against one without some.

Usage (from the repository root)::

    python benchmarks/bench_slice_classes.py --without json_string_nonspace,uri_chars --schemas 1000 --half holdout

Two token indexes of one vocabulary are built in this process: one with every class of
``leapgen.compiler.token_slices.SLICE_CHAR_CLASSES``, one without the classes named by
``--without``. JSONSchemaBench schemas (``bench_masks.py``'s sample) are compiled once; each
compiled automaton is bound to a fresh grammar of each index (``GrammarCompiler.bind``) and its
valid instances walked (fill the bitmask, accept the token), alternating which index goes first
from grammar to grammar and round to round. Both walks see the same machine within seconds, so the
drift between separate ``bench_masks.py`` runs (up to 20 % here) does not enter the comparison.
Reported per index: mask steps (fill + accept, µs) in all, and by grammar kind and visit (first
visit of an automaton state or seen before): count, mean, p50, p90, p99 and the sum; then the
index's build, save and load times and its size on disk. The indexes are built without a disk
cache; the disk figures come from a temporary folder.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE)]


@contextlib.contextmanager
def classes_without(names: list[str]):
    """``SLICE_CHAR_CLASSES`` without ``names`` inside the block, restored after; raises ValueError for an
    unknown class name."""
    import leapgen.compiler.token_slices as token_slices

    classes = dict(token_slices.SLICE_CHAR_CLASSES)
    unknown = sorted(set(names) - set(classes))
    if unknown:
        raise ValueError(f"--without: no slice class {unknown}; the classes are {sorted(classes)}")
    try:
        for name in names:
            del token_slices.SLICE_CHAR_CLASSES[name]
        yield
    finally:
        token_slices.SLICE_CHAR_CLASSES.clear()
        token_slices.SLICE_CHAR_CLASSES.update(classes)


def build_indexes(info, without: list[str]) -> dict:
    """``{"all": TokenIndex, "without": TokenIndex}`` of the vocabulary ``info``."""
    from leapgen.compiler.token_index import TokenIndex

    indexes = {"all": TokenIndex(info)}
    with classes_without(without):
        indexes["without"] = TokenIndex(info)
    return indexes


def disk_figures(info, without: list[str]) -> dict:
    """Build + save, load (ms) and size (MB) of each index in a temporary cache folder."""
    from leapgen.compiler.token_index import TokenIndex

    out = {}
    for mode in ("all", "without"):
        with classes_without(without if mode == "without" else []), tempfile.TemporaryDirectory() as folder:
            t = time.perf_counter()
            TokenIndex(info, cache_dir=folder)
            built = time.perf_counter() - t
            t = time.perf_counter()
            TokenIndex(info, cache_dir=folder)
            loaded = time.perf_counter() - t
            size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
        out[mode] = (built * 1e3, loaded * 1e3, size / 1e6)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--without", required=True, help="comma-separated slice classes the second index lacks")
    parser.add_argument("--schemas", type=int, default=1000)
    parser.add_argument("--half", choices=["tune", "holdout"], default="holdout")
    parser.add_argument("--subsets", default="", help="comma-separated JSONSchemaBench subsets (default all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--family", default="llama3")
    args = parser.parse_args(argv)

    import runner
    import workloads
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    from leapgen.backends.leapgen import LeapgenBackend
    from leapgen.compiler.compiler import GrammarCompiler
    from leapgen.errors import GrammarError

    without = [name for name in args.without.split(",") if name]
    tokenizer, info = load_hf_tokenizer(args.family), load_tokenizer_info(args.family)
    indexes = build_indexes(info, without)
    compilers = {mode: GrammarCompiler(info, token_index=index, max_compile_seconds=runner.COMPILE_LIMIT_S)
                 for mode, index in indexes.items()}
    backend = LeapgenBackend(info, compiler=compilers["all"])
    grammars = workloads.jsonschemabench_grammars(args.schemas, half=args.half, seed=args.seed,
                                                  subsets=[s for s in args.subsets.split(",") if s] or None)
    if not grammars:
        raise SystemExit("no JSONSchemaBench schemas: ../shared/corpora/jsonschemabench is missing")
    work = []
    for grammar in grammars:
        try:
            compiled = runner.compile_grammar(backend, grammar)
        except GrammarError:
            continue
        automaton = compiled.pda if hasattr(compiled, "pda") else compiled.stored_automaton
        tokens = [tokenizer.encode(text, add_special_tokens=False) for text in grammar.instances]
        work.append((automaton, compiled.kind, tokens))
    steps = {mode: collections.defaultdict(list) for mode in compilers}
    stop = info.stop_token_ids[0]
    for round_ in range(args.rounds):
        for i, (automaton, kind, tokens) in enumerate(work):
            order = ["all", "without"] if (i + round_) % 2 == 0 else ["without", "all"]
            for mode in order:
                grammar = compilers[mode].bind(automaton, kind=kind)
                walked = runner.walk(backend, grammar, tokens, stop, record_states=True)
                for times, firsts in zip(walked["tbm_ns"], walked["first"]):
                    for ns, first in zip(times, firsts):
                        us = ns / 1e3
                        steps[mode]["all"].append(us)
                        steps[mode][f"{type(grammar).__name__} {'first' if first else 'seen'}"].append(us)
    print(f"{len(work)} grammars ({args.half} half, seed {args.seed}), {args.rounds} rounds; "
          f"second index without {', '.join(without)}")
    print("| index | steps | count | mean µs | p50 | p90 | p99 | sum ms |")
    print("|---|---|---|---|---|---|---|---|")
    for mode in compilers:
        for key in ["all"] + sorted(k for k in steps[mode] if k != "all"):
            v = np.array(steps[mode][key])
            print(f"| {mode} | {key} | {len(v):,} | {v.mean():.2f} | {np.median(v):.1f} | {np.percentile(v, 90):.1f} "
                  f"| {np.percentile(v, 99):.1f} | {v.sum() / 1e3:,.0f} |")
    mean = {mode: np.mean(steps[mode]["all"]) for mode in compilers}
    print(f"TBM mean, all / without: {mean['all'] / mean['without']:.3f}")
    print("| index | build + save ms | load ms | disk MB |")
    print("|---|---|---|---|")
    for mode, (built, loaded, size) in disk_figures(info, without).items():
        print(f"| {mode} | {built:,.0f} | {loaded:,.0f} | {size:.1f} |")


if __name__ == "__main__":
    main()
