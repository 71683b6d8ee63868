"""The ``leapgen`` command line.

Subcommands:

``leapgen generate [--model default] [--json-schema FILE | --regex PATTERN] PROMPT``
    Generate one completion and print it on stdout, then one summary line on
    stderr (tokens, jump-forward tokens and share, tokens/s, compile ms), so
    ``leapgen generate ... > out.json`` keeps the output clean.

``leapgen serve [--model default] [--grammar-backend leapgen|xgrammar|llguidance|outlines-core]
[--host 127.0.0.1] [--port 8000]
[--max-running N] [--warmup DIR] [--prefill-dtype auto|bfloat16|float32]
[--tool-call-format hermes|llama3_json|mistral] [--reasoning-parser qwen3|deepseek_r1]``
    Serve the OpenAI-compatible HTTP API (see :mod:`leapgen.server.app`);
    needs the ``serve`` extra. Logs grammar compile times, jump-forward token
    counts and the mask-cache hit rate per request.

Exit status: 0 on success, 1 when the model cannot
be loaded or the request fails, 2 on a usage error or a bad grammar.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def _add_prefill_dtype(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prefill-dtype", default="auto", choices=("auto", "bfloat16", "float32"),
                        help="precision of prompt tokens (default auto: bfloat16 on CPUs with AMX/AVX512-BF16, "
                             "float32 elsewhere; generated tokens are always float32)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands: ``generate``)."""
    from leapgen.version import __version__
    from leapgen.backends import known_backends
    from leapgen.engine.chat.reasoning import REASONING_PARSERS
    from leapgen.engine.chat.tool_formats import TOOL_CALL_FORMATS

    parser = argparse.ArgumentParser(
        prog="leapgen",
        description="Structured generation for LLMs: regex and JSON Schema constraints with jump-forward.",
    )
    parser.add_argument("--version", action="version", version=f"leapgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    gen = sub.add_parser(
        "generate",
        help="generate one completion",
        description="Generate one completion, optionally constrained by a JSON Schema or a regex.",
    )
    gen.add_argument("prompt", metavar="PROMPT", help="the user message (or raw text with --raw)")
    gen.add_argument("--model", default="default",
                     help="'default' (embedded SmolLM2-135M-Instruct) or a local Hugging Face folder")
    grammar = gen.add_mutually_exclusive_group()
    grammar.add_argument("--json-schema", metavar="FILE", help="constrain the output to this JSON Schema file")
    grammar.add_argument("--regex", metavar="PATTERN", help="constrain the output to match this regex")
    gen.add_argument("--no-jump-forward", action="store_true", help="sample every token, even forced ones")
    gen.add_argument("--max-tokens", type=int, default=256, metavar="N", help="most output tokens (default 256)")
    gen.add_argument("--temperature", type=float, default=0.0, metavar="T", help="0 = greedy (default)")
    gen.add_argument("--top-p", type=float, default=1.0, metavar="P", help="nucleus sampling (default 1.0)")
    gen.add_argument("--top-k", type=int, default=-1, metavar="K", help="top-k sampling (default -1: off)")
    gen.add_argument("--seed", type=int, default=None, metavar="S", help="random seed")
    gen.add_argument("--raw", action="store_true", help="continue PROMPT as raw text (no chat template)")
    gen.add_argument("--threads", type=int, default=None, metavar="N",
                     help="torch CPU threads (default: $LEAPGEN_NUM_THREADS, else the idle CPUs)")
    _add_prefill_dtype(gen)
    gen.set_defaults(handler=_cmd_generate)

    srv = sub.add_parser("serve", help="serve the OpenAI-compatible HTTP API",
                         description="Serve /v1/chat/completions, /v1/completions, /v1/responses, /generate, "
                                     "/get_model_info, /v1/models, /health, /metrics.")
    srv.add_argument("--model", default="default",
                     help="'default' (embedded SmolLM2-135M-Instruct) or a local Hugging Face folder")
    srv.add_argument("--grammar-backend", default="leapgen", choices=known_backends(),
                     help="grammar engine of the server (default leapgen; the peers need their package: "
                          "pip install 'leapgen[peers]'; outlines-core has no jump-forward)")
    srv.add_argument("--host", default="127.0.0.1")
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument("--max-running", type=int, default=16, metavar="N", help="most requests decoding together")
    srv.add_argument("--kv-token-budget", type=int, default=65536, metavar="N",
                     help="most KV tokens reserved by running requests (prompt + max_tokens each)")
    srv.add_argument("--prefix-cache-tokens", type=int, default=4096, metavar="N",
                     help="token budget of the cross-request prompt KV cache (LRU; 0 disables; default: 4096)")
    srv.add_argument("--warmup", metavar="DIR", help="compile every *.json JSON Schema in DIR before serving")
    srv.add_argument("--threads", type=int, default=None, metavar="N", help="torch CPU threads")
    srv.add_argument("--tool-call-format", default=None, choices=sorted(TOOL_CALL_FORMATS),
                     help="how the model writes tool calls (default: the one its chat template names; hermes "
                          "when it names none)")
    srv.add_argument("--reasoning-parser", default=None, choices=sorted(REASONING_PARSERS),
                     help="split a reasoning model's <think>...</think> off as reasoning_content; grammars and "
                          "tools apply after it (default: none)")
    _add_prefill_dtype(srv)
    srv.set_defaults(handler=_cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``leapgen`` script.

    Parameters
    ----------
    argv : sequence of str or None
        Arguments without the program name; None = ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status (also what the console script exits with).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.handler(args)


def _error(message: str, status: int) -> int:
    print(f"leapgen: error: {message}", file=sys.stderr)
    return status


def _cmd_generate(args: argparse.Namespace) -> int:
    from leapgen.engine.sampling_params import SamplingParams

    schema = None
    if args.json_schema is not None:
        try:
            with open(args.json_schema, encoding="utf-8-sig") as f:  # a leading BOM is tolerated
                schema = json.load(f)
        except OSError as exc:
            return _error(f"cannot read the JSON Schema file: {exc}", EXIT_USAGE)
        except ValueError as exc:
            return _error(f"{args.json_schema} is not valid JSON: {exc}", EXIT_USAGE)
        except RecursionError:
            return _error(f"{args.json_schema}: the JSON nests too deeply to parse", EXIT_USAGE)
    if args.max_tokens < 1:  # (the engine's max_tokens=0 prefills only: nothing to print)
        return _error(f"--max-tokens (max_tokens) must be >= 1, got {args.max_tokens}", EXIT_USAGE)
    try:
        params = SamplingParams(
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            seed=args.seed,
            json_schema=schema,
            regex=args.regex,
            jump_forward=not args.no_jump_forward,
        )
    except ValueError as exc:
        return _error(str(exc), EXIT_USAGE)
    if args.threads is not None and args.threads < 1:
        return _error(f"--threads must be >= 1, got {args.threads}", EXIT_USAGE)
    from leapgen.engine.grammar_manager import GrammarManager
    from leapgen.errors import GrammarError

    try:
        GrammarManager.check(params)  # fail fast, before loading the model
    except GrammarError as exc:
        return _error(str(exc), EXIT_USAGE)

    _quiet_transformers()
    from leapgen.engine import LLM, FinishReason, ModelLoadError

    try:
        # One request: no decoding request for a compile to stall, so no compile worker (a second process
        # setting itself up on the same cores would slow this one's compile down).
        llm = LLM(args.model, num_threads=args.threads, prefill_dtype=args.prefill_dtype, compile_in_process=False)
    except ModelLoadError as exc:
        return _error(str(exc), EXIT_FAILURE)
    out = llm.generate(args.prompt, params, chat=not args.raw)[0]
    if out.finish_reason == FinishReason.ERROR:
        # Grammar problems surface here: the request fails, nothing is printed.
        status = EXIT_USAGE if _is_grammar_error(out.error_type) else EXIT_FAILURE
        return _error(out.error or "the request failed", status)
    print(out.text, flush=True)
    share = 100.0 * out.jump_forward_ratio
    print(
        f"[leapgen] {out.completion_tokens} tokens ({out.jump_forward_tokens} jump-forward, {share:.1f}%), "
        f"{out.tokens_per_s:.1f} tokens/s, compile {out.compile_ms:.0f} ms, "
        f"finish {out.finish_reason}, model load {llm.load_s:.1f} s",
        file=sys.stderr,
    )
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace) -> int:
    import logging

    if args.max_running < 1 or args.kv_token_budget < 1:
        return _error("--max-running and --kv-token-budget must be >= 1", EXIT_USAGE)
    if args.prefix_cache_tokens < 0:
        return _error("--prefix-cache-tokens must be >= 0", EXIT_USAGE)
    if not 0 <= args.port <= 65535:
        return _error(f"--port must be in [0, 65535], got {args.port}", EXIT_USAGE)
    if args.threads is not None and args.threads < 1:
        return _error(f"--threads must be >= 1, got {args.threads}", EXIT_USAGE)
    if args.warmup is not None and not os.path.isdir(args.warmup):
        return _error(f"--warmup: {args.warmup} is not a folder", EXIT_USAGE)
    from leapgen.backends import available_backends

    if args.grammar_backend not in available_backends():
        return _error(f"--grammar-backend {args.grammar_backend}: not installed (pip install 'leapgen[peers]')",
                      EXIT_USAGE)
    try:
        from leapgen.server.app import serve
    except ImportError as exc:
        return _error(f"the server needs its extra: pip install 'leapgen[serve]' ({exc})", EXIT_FAILURE)
    from leapgen.engine import ModelLoadError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    _quiet_transformers()
    try:
        serve(model=args.model, host=args.host, port=args.port, max_running=args.max_running,
              kv_token_budget=args.kv_token_budget,
              prefix_cache_tokens=args.prefix_cache_tokens, warmup_dir=args.warmup, num_threads=args.threads,
              grammar_backend=args.grammar_backend, prefill_dtype=args.prefill_dtype,
              tool_call_format=args.tool_call_format, reasoning_parser=args.reasoning_parser)
    except ModelLoadError as exc:
        return _error(str(exc), EXIT_FAILURE)
    return EXIT_OK


def _is_grammar_error(error_type: str | None) -> bool:
    import leapgen.errors

    cls = getattr(leapgen.errors, error_type or "", None)
    return isinstance(cls, type) and issubclass(cls, leapgen.errors.GrammarError)


def _quiet_transformers() -> None:
    """Silence transformers' progress bars and warnings (CLI only)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
