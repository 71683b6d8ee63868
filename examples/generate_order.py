"""Generate an order as JSON with the Python API (the same as the CLI demo).

    python examples/generate_order.py
"""

import json
from pathlib import Path

from leapgen.engine import LLM, SamplingParams

HERE = Path(__file__).resolve().parent

schema = json.loads((HERE / "schemas" / "order.json").read_text())
prompt = (HERE / "prompts" / "order.txt").read_text().strip()

llm = LLM()  # the embedded SmolLM2-135M-Instruct (first run converts it, ~20 s)
out = llm.generate(prompt, SamplingParams(json_schema=schema, max_tokens=300))[0]
if out.error:
    raise SystemExit(out.error)
print(out.text)
print(
    f"{out.completion_tokens} tokens, {out.jump_forward_tokens} jump-forward "
    f"({100 * out.jump_forward_ratio:.0f}%), {out.forward_passes} forward passes, "
    f"{out.tokens_per_s:.1f} tokens/s, compile {out.compile_ms:.0f} ms, finish {out.finish_reason}"
)
