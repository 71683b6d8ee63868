"""Jump-forward on the order demo: constrained with and without jump-forward,
and unconstrained, on the embedded SmolLM2-135M-Instruct.

    python examples/jump_forward_demo.py [--threads N] [--repeat R]

Prints the constrained output, checks it with jsonschema (+ FormatChecker),
and a table: tokens, jump-forward tokens, forward passes, tokens/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from leapgen.engine import LLM, SamplingParams

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: idle CPUs)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per setting (median tokens/s)")
    args = parser.parse_args()

    schema = json.loads((HERE / "schemas" / "order.json").read_text())
    prompt = (HERE / "prompts" / "order.txt").read_text().strip()
    llm = LLM(num_threads=args.threads)
    settings = {
        "json schema + jump-forward": SamplingParams(json_schema=schema, max_tokens=300),
        "json schema, no jump-forward": SamplingParams(json_schema=schema, max_tokens=300, jump_forward=False),
        "unconstrained": SamplingParams(max_tokens=300),
    }
    llm.generate(prompt, settings["json schema + jump-forward"])  # warm-up + compile (cached after)
    rows = []
    for name, params in settings.items():
        outs = [llm.generate(prompt, params)[0] for _ in range(args.repeat)]
        out = outs[-1]
        if name.startswith("json schema + "):
            print(out.text)
            try:
                import jsonschema

                jsonschema.validate(json.loads(out.text), schema, format_checker=jsonschema.FormatChecker())
                print("-> valid against examples/schemas/order.json\n")
            except ImportError:
                print("(install jsonschema to validate)\n")
        tps = statistics.median(o.tokens_per_s for o in outs)
        rows.append((name, out.completion_tokens, out.jump_forward_tokens, out.forward_passes,
                     tps, out.finish_reason))
    print(f"{'setting':30} {'tokens':>6} {'jump-fwd':>9} {'forwards':>8} {'tok/s':>7}  finish")
    for name, n, jf, fw, tps, fin in rows:
        print(f"{name:30} {n:6d} {jf:5d} {100 * jf / max(n, 1):2.0f}% {fw:8d} {tps:7.1f}  {fin}")


if __name__ == "__main__":
    main()
