"""leapgen as SGLang's grammar backend ``"leapgen"`` (a ``sglang.srt.plugins`` plugin).

Use
---
``pip install leapgen[sglang]`` registers the plugin; SGLang loads it in its
server, scheduler and detokenizer processes. Then::

    python -m sglang.launch_server --model-path MODEL --grammar-backend leapgen

(or, in a process that builds SGLang's engine itself, call :func:`register`
first). Requests' ``json_schema``, ``regex``, ``ebnf`` (GBNF) and
``structural_tag``
are compiled by leapgen; ``--constrained-json-disable-any-whitespace`` and
``--constrained-json-max-whitespace-cnt`` are honoured,
``--constrained-json-whitespace-pattern`` is refused at start. With
``--reasoning-parser``, the backend is wrapped in SGLang's own
``ReasonerGrammarBackend``, as SGLang wraps its built-in backends.

:func:`register` calls SGLang's ``register_grammar_backend("leapgen",
init_func)`` (``init_func(server_args, tokenizer, vocab_size,
eos_token_ids)``) and ``add_grammar_backend_choices(["leapgen"])``; the
classes are in :mod:`leapgen.integrations.sglang_backend`.
"""

from __future__ import annotations

import logging
from typing import Any

from leapgen.integrations import BACKEND_NAME

SUPPORTED_SGLANG = ((0, 5),)
"""(major, minor) SGLang versions whose grammar-backend interface leapgen implements (tested: 0.5.23)."""

logger = logging.getLogger(__name__)


class UnsupportedSglangVersion(RuntimeError):
    """The installed SGLang is not one leapgen's backend supports."""


def check_sglang_version() -> str:
    """The installed SGLang's version.

    Raises
    ------
    UnsupportedSglangVersion
        It is not in :data:`SUPPORTED_SGLANG`.
    """
    from importlib.metadata import version

    found = version("sglang")
    parts = found.split(".")
    try:
        supported = (int(parts[0]), int(parts[1])) in SUPPORTED_SGLANG
    except (IndexError, ValueError):
        supported = False
    if not supported:
        names = ", ".join(f"{a}.{b}.x" for a, b in SUPPORTED_SGLANG)
        raise UnsupportedSglangVersion(
            f"leapgen's SGLang grammar backend supports SGLang {names}; this is SGLang {found}. Install a "
            f"supported one (pip install 'leapgen[sglang]'), or leave the plugin out with SGLANG_PLUGINS")
    return found


def register() -> None:
    """Make ``"leapgen"`` one of this process's SGLang grammar backends (idempotent).

    Raises
    ------
    UnsupportedSglangVersion
        SGLang is not a supported version (nothing is registered).
    """
    check_sglang_version()
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])
    register_grammar_backend(BACKEND_NAME, create_grammar_backend)


def load_plugin() -> None:
    """The ``sglang.srt.plugins`` entry point: :func:`register`, or a warning on an unsupported SGLang
    (a raising plugin would stop SGLang whatever backend it uses)."""
    try:
        register()
    except UnsupportedSglangVersion as exc:
        logger.warning("%s", exc)


def create_grammar_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None):
    """SGLang's ``init_func`` for ``--grammar-backend leapgen``.

    Parameters
    ----------
    server_args : sglang.srt.server_args.ServerArgs
        ``constrained_json_*`` options and ``reasoning_parser`` are read.
    tokenizer : Hugging Face tokenizer
    vocab_size : int
        The model's logits width.
    eos_token_ids : set of int or int, optional
        The model's EOS ids: the grammars' stop tokens.

    Returns
    -------
    BaseGrammarBackend
        :class:`~leapgen.integrations.sglang_backend.LeapgenGrammarBackend`,
        inside SGLang's ``ReasonerGrammarBackend`` when a reasoning parser is set.

    Raises
    ------
    ValueError
        ``constrained_json_whitespace_pattern`` is set (leapgen bounds JSON
        whitespace by count, not by a pattern).
    """
    from leapgen.integrations.sglang_backend import LeapgenGrammarBackend

    if getattr(server_args, "constrained_json_whitespace_pattern", None) is not None:
        raise ValueError("--constrained-json-whitespace-pattern is not supported by the leapgen grammar backend; "
                         "use --constrained-json-disable-any-whitespace or --constrained-json-max-whitespace-cnt")
    if isinstance(eos_token_ids, int):
        eos_token_ids = [eos_token_ids]
    backend = LeapgenGrammarBackend(
        tokenizer, vocab_size=vocab_size, eos_token_ids=sorted(eos_token_ids) if eos_token_ids else None,
        any_whitespace=not getattr(server_args, "constrained_json_disable_any_whitespace", False),
        max_whitespace=getattr(server_args, "constrained_json_max_whitespace_cnt", None))
    reasoning_parser = getattr(server_args, "reasoning_parser", None)
    if not reasoning_parser:
        return backend
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    parser = ReasoningParser(model_type=reasoning_parser, stream_reasoning=False, tokenizer=tokenizer)
    return ReasonerGrammarBackend(backend, parser, tokenizer,
                                  enable_strict_thinking=bool(getattr(server_args, "enable_strict_thinking", False)))
