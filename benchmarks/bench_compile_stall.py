"""Does a long grammar compile stall the other requests' decoding?

Eight unconstrained requests decode (no stop token, so they never end on
their own); the step time is measured for ``--steps`` steps, then a request
whose JSON Schema takes seconds to compile (a string with a large
``maxLength``) is added and the step time is measured until its compile has
finished. Prints the step time p50 / p90 / max before, during and after the
compile, and the compile's wall time. ``--in-thread`` compiles on the
engine's thread instead of the compile worker process.

    python benchmarks/bench_compile_stall.py --max-length 250 --steps 15 [--in-thread] [--recursive]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def step_times(llm, n: int | None = None, until=None) -> list[float]:
    """Wall ms of ``n`` engine steps, or of the steps until ``until()`` is true."""
    out = []
    while (n is not None and len(out) < n) or (until is not None and not until()):
        t = time.perf_counter()
        llm.step()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def describe(name: str, ms: list[float]) -> str:
    """One line: count, p50, p90 and max of step times."""
    p50, p90 = np.percentile(ms, [50, 90])
    return f"{name}: {len(ms)} steps, step ms p50 {p50:.0f}, p90 {p90:.0f}, max {max(ms):.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-length", type=int, default=250, help="maxLength of the slow schema's string")
    parser.add_argument("--steps", type=int, default=15, help="baseline steps")
    parser.add_argument("--decoders", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--recursive", action="store_true",
                        help="the slow schema is recursive (a tree of such strings): a context-free grammar")
    parser.add_argument("--in-thread", action="store_true",
                        help="compile on the engine's thread (compile_in_process=False), the old way")
    args = parser.parse_args()

    from leapgen.engine import LLM, SamplingParams

    llm = LLM(num_threads=args.threads, max_running=args.decoders + 1, compile_in_process=not args.in_thread)
    _ = llm.grammar.compiler  # the vocabulary's setup is per model, not per compile
    free = SamplingParams(max_tokens=4000, stop_token_ids=())
    for i in range(args.decoders):
        llm.add_request(f"Story {i}: Once upon a time", free, chat=False)
    step_times(llm, 3)  # prefill and first decodes
    before = step_times(llm, args.steps)
    schema = {"type": "object", "properties": {"note": {"type": "string", "maxLength": args.max_length}},
              "required": ["note"]}
    if args.recursive:
        schema["properties"]["children"] = {"type": "array", "items": {"$ref": "#"}}
    slow = llm.add_request("A note.", SamplingParams(json_schema=schema, max_tokens=8), chat=False)
    start = time.perf_counter()
    during = step_times(llm, until=lambda: slow.matcher is not None or slow.is_finished)
    compile_s = time.perf_counter() - start
    after = step_times(llm, args.steps)
    where = "the engine's thread" if args.in_thread else "a worker process"
    kind = "recursive (context-free) " if args.recursive else ""
    print(f"threads {args.threads}, {args.decoders} decoders, slow {kind}schema maxLength {args.max_length}, "
          f"compiled on {where}")
    print(describe("before the compile", before))
    print(describe(f"during the compile ({compile_s:.1f} s)", during))
    print(describe("after the compile", after))


if __name__ == "__main__":
    main()
