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
                if marker in item.keywords:
                    item.add_marker(pytest.mark.skip(reason=reason))
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
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


TOY_PIECES = [
    b"ab", b"abc", b"bc", b"cat", b"dog", b"12", b"123", b"42", b"00", b"  ", b" \t", b"\n", b"true", b"false",
    b"null", b'{"', b'":', b'",', b'"}', b"}", b"}\n", b"}}", b", ", b"-1", b"+7", b".5", b"e+", b"\\n", b"\\u00",
    b"ok", b"yes", b"no", "日".encode(), "日本".encode(), "月潭".encode(), "本海".encode(), "é".encode(),
    "🎉".encode(), "🌀".encode(), "日".encode()[:2], "月".encode()[1:], "🌀".encode()[:3],
]
TOY_STOP, TOY_SPECIAL, TOY_PADDING = "<eos>", "<special>", 3


@functools.lru_cache(maxsize=None)
def _toy_info():
    from leapgen import TokenizerInfo

    vocab = [bytes([b]) for b in range(256)] + TOY_PIECES + [TOY_STOP.encode(), TOY_SPECIAL.encode()]
    n = len(vocab)
    return TokenizerInfo(vocab, "raw", vocab_size=n + TOY_PADDING, stop_token_ids=[n - 2], special_token_ids=[n - 1])


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
