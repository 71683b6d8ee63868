"""The ``leapgen`` command line.

Subcommands:

``leapgen generate [--model default] [--json-schema FILE|JSON | --regex PATTERN | --ebnf FILE|GRAMMAR] PROMPT|-``
    Generate one completion (greedy by default) and print it on stdout, then
    one summary line on stderr (tokens, jump-forward tokens and share,
    tokens/s, compile ms), so ``leapgen generate ... > out.json`` keeps the
    output clean. ``-`` reads the prompt from standard input.

``leapgen serve [--model default] [--grammar-backend leapgen|xgrammar|llguidance|outlines-core] [...]``
    Serve the OpenAI-compatible HTTP API (see :mod:`leapgen.server.app`);
    needs the ``serve`` extra. ``leapgen serve --help`` lists every flag with
    its default: the address, batching, the limits (API key, body size,
    queue, grammar cache bytes in memory and on disk, per-grammar size,
    context length) and the logs (level, per-request lines, the grammar
    debug log).

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
                        help="precision of prompt tokens (auto: bfloat16 on CPUs with AMX/AVX512-BF16, "
                             "float32 elsewhere; generated tokens are always float32)")


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in its help: ``(default: X)``, written by the help text itself where the
    default is not a plain value (None: what happens then) and left out for on/off flags."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or isinstance(action.default, bool):
            return action.help or ""
        return super()._get_help_string(action)


def _add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="default",
                        help="'default' (embedded SmolLM2-135M-Instruct) or a local Hugging Face folder")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands: ``generate``, ``serve``)."""
    from leapgen.version import __version__

    parser = argparse.ArgumentParser(
        prog="leapgen",
        description="Structured generation for LLMs: regex and JSON Schema constraints with jump-forward.",
    )
    parser.add_argument("--version", action="version", version=f"leapgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    defaults = _DefaultsFormatter

    gen = sub.add_parser(
        "generate",
        help="generate one completion",
        description="Generate one completion, optionally constrained by a JSON Schema, a regex or a GBNF grammar. "
                    "Greedy by default (the server samples at temperature 1.0 unless a request says otherwise).",
        formatter_class=defaults,
    )
    gen.add_argument("prompt", metavar="PROMPT", help="the user message (or raw text with --raw); - reads stdin")
    _add_model(gen)
    grammar = gen.add_mutually_exclusive_group()
    grammar.add_argument("--json-schema", metavar="FILE|JSON",
                         help="constrain the output to this JSON Schema: a file, or the schema itself ('{...}') "
                              "(default: unconstrained)")
    grammar.add_argument("--regex", metavar="PATTERN", help="constrain the output to match this regex")
    grammar.add_argument("--ebnf", metavar="FILE|GRAMMAR",
                         help="constrain the output to this GBNF grammar (root rule 'root'): a file, or the "
                              "grammar itself (text holding '::=')")
    gen.add_argument("--no-jump-forward", action="store_true", help="sample every token, even forced ones")
    gen.add_argument("--max-tokens", type=int, default=256, metavar="N", help="most output tokens")
    gen.add_argument("--temperature", type=float, default=0.0, metavar="T", help="0 = greedy")
    gen.add_argument("--top-p", type=float, default=1.0, metavar="P", help="nucleus sampling")
    gen.add_argument("--top-k", type=int, default=-1, metavar="K", help="top-k sampling (-1: off)")
    gen.add_argument("--seed", type=int, default=None, metavar="S", help="random seed (default: none, a fresh one)")
    gen.add_argument("--raw", action="store_true", help="continue PROMPT as raw text (no chat template)")
    gen.add_argument("--threads", type=int, default=None, metavar="N",
                     help="torch CPU threads (default: $LEAPGEN_NUM_THREADS, else the idle CPUs)")
    _add_prefill_dtype(gen)
    gen.set_defaults(handler=_cmd_generate)

    _add_serve_parser(sub)
    return parser


def _add_serve_parser(sub: argparse._SubParsersAction) -> None:
    from leapgen.backends import known_backends
    from leapgen.engine.chat.reasoning import REASONING_PARSERS
    from leapgen.engine.chat.tool_formats import TOOL_CALL_FORMATS

    srv = sub.add_parser("serve", help="serve the OpenAI-compatible HTTP API",
                         description="Serve /v1/chat/completions, /v1/completions, /v1/responses, /generate, "
                                     "/get_model_info, /v1/models, /health, /metrics. Requests sample at "
                                     "temperature 1.0 unless they say otherwise (OpenAI's default; `leapgen "
                                     "generate` is greedy).",
                         formatter_class=_DefaultsFormatter)
    _add_model(srv)
    srv.add_argument("--served-model-name", metavar="NAME", default=None,
                     help="the model id /v1/models lists and requests may name (default: the --model value; "
                          "'default' is always accepted too)")
    srv.add_argument("--grammar-backend", default="leapgen", choices=known_backends(),
                     help="grammar engine of the server (the peers need their package: "
                          "pip install 'leapgen[peers]'; outlines-core has no jump-forward)")
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (loopback only by default)")
    srv.add_argument("--port", type=int, default=8000, help="port to bind")
    srv.add_argument("--api-key", metavar="KEY", default=None,
                     help="require 'Authorization: Bearer KEY' on every route but /health (default: "
                          "$LEAPGEN_API_KEY if set, else no authentication)")
    srv.add_argument("--timeout-keep-alive", type=int, default=75, metavar="SECONDS",
                     help="how long an idle HTTP connection stays open (uvicorn's, vLLM's and SGLang's default is 5 "
                          "s, the time httpx and the openai SDK pool one: a request sent as the server closes it "
                          "fails)")
    srv.add_argument("--max-running", type=int, default=16, metavar="N", help="most requests decoding together")
    srv.add_argument("--max-queued-requests", type=int, default=256, metavar="N",
                     help="most requests waiting to run (tokenizing, compiling or waiting for a slot); past it a "
                          "request gets 429 with Retry-After")
    srv.add_argument("--kv-token-budget", type=int, default=65536, metavar="N",
                     help="most KV tokens reserved by running requests (prompt + max_tokens each)")
    srv.add_argument("--max-model-len", type=int, default=None, metavar="N",
                     help="most tokens of a request, prompt + max_tokens (default: the model's context)")
    srv.add_argument("--max-request-bytes", type=int, default=8 << 20, metavar="N",
                     help="largest request body; a bigger one gets 413")
    srv.add_argument("--prefix-cache-tokens", type=int, default=4096, metavar="N",
                     help="token budget of the cross-request prompt KV cache (LRU; 0 disables)")
    srv.add_argument("--grammar-cache-mb", type=float, default=512, metavar="MB",
                     help="bound on the compiled grammars kept in memory, in the server and in its compile "
                          "worker each (mask rows filled later included)")
    srv.add_argument("--max-grammar-mb", type=float, default=256, metavar="MB",
                     help="largest compiled grammar; a bigger one is refused with a 400 naming the grammar field")
    srv.add_argument("--grammar-cache-dir", metavar="DIR", default=None,
                     help="disk cache of compiled grammars, kept (default: a temporary folder "
                          "$TMPDIR/leapgen-grammars-<pid>-*, removed on exit)")
    srv.add_argument("--grammar-disk-cache-mb", type=float, default=1024, metavar="MB",
                     help="bound on the disk cache (compressed files; least recently used removed)")
    srv.add_argument("--warmup", metavar="DIR", help="compile every *.json JSON Schema in DIR before serving (default: none)")
    srv.add_argument("--threads", type=int, default=None, metavar="N",
                     help="torch CPU threads (default: $LEAPGEN_NUM_THREADS, else the idle CPUs)")
    srv.add_argument("--tool-call-format", default=None, choices=sorted(TOOL_CALL_FORMATS),
                     help="how the model writes tool calls (default: the one its chat template names; hermes "
                          "when it names none)")
    srv.add_argument("--reasoning-parser", default=None, choices=sorted(REASONING_PARSERS),
                     help="split a reasoning model's <think>...</think> off as reasoning_content; grammars and "
                          "tools apply after it (default: none)")
    _add_prefill_dtype(srv)
    srv.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                     help="log level of the server")
    srv.add_argument("--disable-log-requests", action="store_true",
                     help="no log line per finished request nor access log (failed requests are still logged "
                          "with their reason)")
    srv.add_argument("--grammar-log-level", default=None, choices=("critical", "error", "warning", "info", "debug"),
                     help="level of the grammar debug log: debug prints a line per grammar compile, per "
                          "jump-forward and per mask fill, hit or miss (default: $LEAPGEN_GRAMMAR_LOG_LEVEL, else "
                          "--log-level)")
    srv.set_defaults(handler=_cmd_serve)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``leapgen`` script.

    Parameters
    ----------
    argv : sequence of str or None
        Arguments without the program name; None = ``sys.argv[1:]`` (the
        console script), where ``generate`` then ends the process itself
        (:func:`_exit_now`) once its output is written.

    Returns
    -------
    int
        The exit status (also what the console script exits with).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    status = args.handler(args)
    if argv is None and args.handler is _cmd_generate:
        _exit_now(status)
    return status


def _exit_now(status: int) -> None:
    """Flush standard output, standard error and the logs, then ``os._exit(status)``: the
    interpreter's teardown (freeing the objects of torch, transformers and numba module by module,
    ~2 s of CPU on 2 shared cores, ``benchmarks/bench_cold_start.py``) does nothing that a finished
    one-shot ``generate`` needs (its engine is closed, its files written)."""
    import logging

    try:
        sys.stdout.flush()
    except OSError:  # a closed pipe (``| head``): what the interpreter's exit would have met too
        status = status or EXIT_FAILURE
    try:
        sys.stderr.flush()
    except OSError:
        pass
    logging.shutdown()
    os._exit(status)


def _read_grammar_args(args: argparse.Namespace) -> tuple[dict, str | None]:
    """(SamplingParams grammar fields, error message) of --json-schema / --regex / --ebnf."""
    if args.json_schema is not None:
        value = args.json_schema
        inline = value.lstrip().startswith("{") or value.strip() in ("true", "false")
        where = "the --json-schema text" if inline else value
        try:
            if inline:
                return {"json_schema": json.loads(value)}, None
            with open(value, encoding="utf-8-sig") as f:  # a leading BOM is tolerated
                return {"json_schema": json.load(f)}, None
        except OSError as exc:
            return {}, f"cannot read the JSON Schema file: {exc}"
        except ValueError as exc:
            return {}, f"{where} is not valid JSON: {exc}"
        except RecursionError:
            return {}, f"{where}: the JSON nests too deeply to parse"
    if args.ebnf is not None:
        if "::=" in args.ebnf:
            return {"ebnf": args.ebnf}, None
        try:
            with open(args.ebnf, encoding="utf-8-sig") as f:
                return {"ebnf": f.read()}, None
        except OSError as exc:
            return {}, f"--ebnf is neither a grammar (no '::=') nor a readable file: {exc}"
    if args.regex is not None:
        return {"regex": args.regex}, None
    return {}, None


def _cmd_generate(args: argparse.Namespace) -> int:
    from leapgen.engine.sampling_params import SamplingParams

    grammar, problem = _read_grammar_args(args)
    if problem is not None:
        return _error(problem, EXIT_USAGE)
    if args.max_tokens < 1:  # (the engine's max_tokens=0 prefills only: nothing to print)
        return _error(f"--max-tokens (max_tokens) must be >= 1, got {args.max_tokens}", EXIT_USAGE)
    prompt = args.prompt
    if prompt == "-":
        prompt = sys.stdin.read()
        if not prompt.strip():
            return _error("the prompt read from standard input is empty", EXIT_USAGE)
    try:
        params = SamplingParams(
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            seed=args.seed,
            jump_forward=not args.no_jump_forward,
            **grammar,
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
    _show_model_conversion()
    from leapgen.engine import LLM, FinishReason, ModelLoadError

    try:
        # One request: no decoding request for a compile to stall, so no compile worker (a second process
        # setting itself up on the same cores would slow this one's compile down).
        # With a grammar, its kernels load on a thread while the model loads (the compile waits for the rest).
        llm = LLM(args.model, num_threads=args.threads, prefill_dtype=args.prefill_dtype, compile_in_process=False,
                  warm_up_grammar=params.constrained)
    except ModelLoadError as exc:
        return _error(str(exc), EXIT_FAILURE)
    try:
        out = llm.generate(prompt, params, chat=not args.raw)[0]
    except ValueError as exc:  # a prompt the engine refuses (too long for the model, ...)
        return _error(str(exc), EXIT_USAGE)
    finally:
        llm.close()
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


def _error(message: str, status: int) -> int:
    print(f"leapgen: error: {message}", file=sys.stderr)
    return status


def _serve_usage_error(args: argparse.Namespace) -> str | None:
    """The first bad serve flag, as a message; None if all are fine."""
    if args.max_running < 1 or args.kv_token_budget < 1:
        return "--max-running and --kv-token-budget must be >= 1"
    checks = [("--prefix-cache-tokens", args.prefix_cache_tokens, 0), ("--max-queued-requests",
              args.max_queued_requests, 1), ("--max-request-bytes", args.max_request_bytes, 1),
              ("--grammar-cache-mb", args.grammar_cache_mb, 1), ("--max-grammar-mb", args.max_grammar_mb, 1),
              ("--grammar-disk-cache-mb", args.grammar_disk_cache_mb, 0)]
    for flag, value, low in checks:
        if value < low:
            return f"{flag} must be >= {low}, got {value:g}"
    if args.max_grammar_mb > args.grammar_cache_mb:
        return (f"--max-grammar-mb ({args.max_grammar_mb:g}) must not exceed --grammar-cache-mb "
                f"({args.grammar_cache_mb:g}): such a grammar could never be kept")
    if args.max_model_len is not None and args.max_model_len < 2:
        return f"--max-model-len must be >= 2, got {args.max_model_len}"
    if args.timeout_keep_alive < 1:
        return f"--timeout-keep-alive must be >= 1, got {args.timeout_keep_alive}"
    if not 0 <= args.port <= 65535:
        return f"--port must be in [0, 65535], got {args.port}"
    if args.threads is not None and args.threads < 1:
        return f"--threads must be >= 1, got {args.threads}"
    if args.warmup is not None and not os.path.isdir(args.warmup):
        return f"--warmup: {args.warmup} is not a folder"
    if args.api_key is not None and not args.api_key.strip():
        return "--api-key must not be empty"
    return None


def _cmd_serve(args: argparse.Namespace) -> int:
    problem = _serve_usage_error(args)
    if problem is not None:
        return _error(problem, EXIT_USAGE)
    from leapgen.backends import available_backends

    if args.grammar_backend not in available_backends():
        return _error(f"--grammar-backend {args.grammar_backend}: not installed (pip install 'leapgen[peers]')",
                      EXIT_USAGE)
    try:
        from leapgen.server.app import serve
        from leapgen.server.limits import ServeLimits
        from leapgen.server.logging_setup import configure_logging
    except ImportError as exc:
        return _error(f"the server needs its extra: pip install 'leapgen[serve]' ({exc})", EXIT_FAILURE)
    from leapgen.engine import ModelLoadError

    try:
        configure_logging(args.log_level, args.grammar_log_level)
    except ValueError as exc:  # a bad $LEAPGEN_GRAMMAR_LOG_LEVEL
        return _error(str(exc), EXIT_USAGE)
    _quiet_transformers()
    api_key = args.api_key if args.api_key is not None else (os.environ.get("LEAPGEN_API_KEY") or None)
    limits = ServeLimits(api_key=api_key, max_request_bytes=args.max_request_bytes,
                         max_queued_requests=args.max_queued_requests)
    mib = 1 << 20
    try:
        serve(model=args.model, host=args.host, port=args.port, max_running=args.max_running,
              kv_token_budget=args.kv_token_budget, prefix_cache_tokens=args.prefix_cache_tokens,
              warmup_dir=args.warmup, num_threads=args.threads, grammar_backend=args.grammar_backend,
              prefill_dtype=args.prefill_dtype, served_model_name=args.served_model_name, limits=limits,
              log_requests=not args.disable_log_requests, log_level=args.log_level,
              max_model_len=args.max_model_len, grammar_cache_bytes=int(args.grammar_cache_mb * mib),
              max_grammar_bytes=int(args.max_grammar_mb * mib), grammar_cache_dir=args.grammar_cache_dir,
              grammar_disk_cache_bytes=int(args.grammar_disk_cache_mb * mib),
              tool_call_format=args.tool_call_format, reasoning_parser=args.reasoning_parser,
              timeout_keep_alive=args.timeout_keep_alive)
    except ModelLoadError as exc:
        return _error(str(exc), EXIT_FAILURE)
    except ValueError as exc:  # --max-model-len past the model's context
        return _error(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        return 130
    return EXIT_OK


def _is_grammar_error(error_type: str | None) -> bool:
    import leapgen.errors

    cls = getattr(leapgen.errors, error_type or "", None)
    return isinstance(cls, type) and issubclass(cls, leapgen.errors.GrammarError)


def _show_model_conversion() -> None:
    """Let the model loader's lines (the first run's conversion: what, where, sizes) reach stderr."""
    import logging

    log = logging.getLogger("leapgen.engine.model_loader")
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[leapgen] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


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
