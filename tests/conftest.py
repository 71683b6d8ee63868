"""Shared test options and fixtures.

* ``--run-slow``: run tests marked ``slow`` (skipped by default) and let
  parametrized suites widen their sampling (see the ``run_slow`` fixture).
* ``toy_info`` / ``toy_compiler``: a hand-built raw vocabulary (every single
  byte, some multi-byte pieces, a stop and a special token, padding ids) for
  fast tests that need no download.
* ``grammar_compiler(family)``: one cached :class:`leapgen.GrammarCompiler`
  per tokenizer family of ``vocab_loaders`` (loading a vocabulary and
  building its token index takes seconds; compiled grammars are shared).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/, for vocab_loaders

from vocab_loaders import toy_tokenizer_info as _toy_info  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="run tests marked slow and widen sampled suites")


ENGINE_MARKERS = {
    "vllm": ("vllm", "needs vLLM: bash scripts/install_vllm.sh, then run its venv's python -m pytest -m vllm"),
    "sglang": ("sglang", "needs SGLang: bash scripts/install_sglang.sh, then run its venv's python -m pytest -m sglang"),
}
"""Marker -> (module the tests need, skip reason): tests of leapgen inside a host engine run in that
engine's own venv (.ci/run does), and skip in one without it."""


def pytest_collection_modifyitems(config, items):
    import importlib.util

    for marker, (module, reason) in ENGINE_MARKERS.items():
        if importlib.util.find_spec(module) is None:
            for item in items:
                if item.get_closest_marker(marker):
                    item.add_marker(pytest.mark.skip(reason=reason))
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if item.get_closest_marker("slow"):  # not item.keywords: it also holds the checkout's folder names
            item.add_marker(skip)


@pytest.fixture(scope="session")
def run_slow(request) -> bool:
    """True when the session was started with ``--run-slow``."""
    return bool(request.config.getoption("--run-slow"))


@functools.lru_cache(maxsize=None)
def _compiler(family: str):
    from vocab_loaders import load_tokenizer_info

    from leapgen import GrammarCompiler

    return GrammarCompiler(load_tokenizer_info(family))


@pytest.fixture(scope="session")
def grammar_compiler():
    """``grammar_compiler(family) -> GrammarCompiler``, cached per family
    (skips, through ``vocab_loaders``, when the family's files are missing)."""
    return _compiler


@pytest.fixture(scope="session")
def toy_info():
    """A raw toy vocabulary: ids 0-255 are the single bytes, then ``TOY_PIECES``,
    then a stop token and a special token; 3 padding ids past those."""
    return _toy_info()


@pytest.fixture(scope="session")
def toy_compiler(toy_info):
    """A ``GrammarCompiler`` over ``toy_info`` (session-wide, caches grammars)."""
    from leapgen import GrammarCompiler

    return GrammarCompiler(toy_info)
