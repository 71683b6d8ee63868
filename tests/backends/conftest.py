"""Fixtures for the backend suites: every installed backend on the Llama-3 vocabulary."""

from __future__ import annotations

import functools

import pytest

FAMILY = "llama3"


@functools.lru_cache(maxsize=None)
def _backend(name: str):
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    from leapgen.backends import get_backend

    return get_backend(name, load_tokenizer_info(FAMILY), hf_tokenizer=load_hf_tokenizer(FAMILY))


@pytest.fixture(scope="session")
def backend_named():
    """``backend_named(name) -> GrammarBackend`` on llama3, cached (skips when files are missing)."""
    return _backend


@pytest.fixture(scope="session")
def encode():
    """``encode(text) -> list[int]``: the Llama-3 tokenization, no special tokens."""
    from vocab_loaders import load_encoder

    return load_encoder(FAMILY)
