"""The ``leapgen`` command line."""

from __future__ import annotations

import json
import re

import pytest

from leapgen.cli import EXIT_OK, EXIT_USAGE, main


def test_requires_a_subcommand(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2


def test_regex_and_schema_are_exclusive(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--regex", "a", "--json-schema", "x.json", "hi"])
    assert exc.value.code == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--regex", "(ab"], "regex"),
        (["--max-tokens", "0"], "max_tokens"),
        (["--temperature", "-1"], "temperature"),
        (["--json-schema", "/nonexistent/schema.json"], "cannot read"),
        (["--threads", "0"], "threads"),
    ],
)
def test_usage_errors_exit_2_before_loading_the_model(args, message, capsys):
    assert main(["generate", *args, "hi"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("leapgen: error:") and message in err


def test_bad_schema_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "objec"}')
    assert main(["generate", "--json-schema", str(bad), "hi"]) == EXIT_USAGE
    assert "/type" in capsys.readouterr().err
    bad.write_text("{nope")
    assert main(["generate", "--json-schema", str(bad), "hi"]) == EXIT_USAGE
    assert "not valid JSON" in capsys.readouterr().err


@pytest.mark.model
def test_generate_prints_output_and_summary(loaded_model, monkeypatch, capsys):
    from leapgen.engine import llm_engine

    monkeypatch.setattr(llm_engine, "load_model", lambda *a, **k: loaded_model)
    status = main(["generate", "--threads", "1", "--regex", r"[0-9]{3}-[0-9]{4}", "Give me a phone number."])
    assert status == EXIT_OK
    out, err = capsys.readouterr()
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}\n", out)
    assert re.search(r"\d+ tokens \(\d+ jump-forward, [\d.]+%\), [\d.]+ tokens/s, compile \d+ ms", err)


@pytest.mark.model
def test_generate_json_schema_file(loaded_model, monkeypatch, capsys, tmp_path):
    from leapgen.engine import llm_engine

    monkeypatch.setattr(llm_engine, "load_model", lambda *a, **k: loaded_model)
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}},
                                  "required": ["ok"], "additionalProperties": False}))
    assert main(["generate", "--threads", "1", "--json-schema", str(schema), "--no-jump-forward", "Is it ok?"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["ok"] in (True, False)
    assert "(0 jump-forward, 0.0%)" in err


def test_serve_usage_errors_exit_2_before_loading(tmp_path, capsys):
    from leapgen.cli import main

    assert main(["serve", "--max-running", "0"]) == 2
    assert main(["serve", "--warmup", str(tmp_path / "missing")]) == 2
    assert "--warmup" in capsys.readouterr().err


def test_serve_grammar_backend_choices():
    from leapgen.backends import known_backends
    from leapgen.cli import build_parser

    for name in known_backends():
        assert build_parser().parse_args(["serve", "--grammar-backend", name]).grammar_backend == name
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--grammar-backend", "nope"])


def test_an_inline_schema_that_is_not_json_is_a_usage_error(capsys):
    assert main(["generate", "--json-schema", '{"type": ', "hi"]) == EXIT_USAGE
    assert "the --json-schema text is not valid JSON" in capsys.readouterr().err
    assert main(["generate", "--ebnf", "/nonexistent/grammar.gbnf", "hi"]) == EXIT_USAGE
    assert "--ebnf is neither a grammar" in capsys.readouterr().err


@pytest.mark.model
def test_generate_inline_schema_ebnf_and_stdin_prompt(loaded_model, monkeypatch, capsys):
    import io

    from leapgen.engine import llm_engine

    monkeypatch.setattr(llm_engine, "load_model", lambda *a, **k: loaded_model)
    schema = '{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], ' \
             '"additionalProperties": false}'
    assert main(["generate", "--threads", "1", "--json-schema", schema, "Is it ok?"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["ok"] in (True, False)
    monkeypatch.setattr("sys.stdin", io.StringIO("Is the sky blue? Answer yes or no.\n"))
    assert main(["generate", "--threads", "1", "--ebnf", 'root ::= "yes" | "no"', "-"]) == EXIT_OK
    assert capsys.readouterr().out in ("yes\n", "no\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("  \n"))
    assert main(["generate", "-"]) == EXIT_USAGE
    assert "standard input is empty" in capsys.readouterr().err


#: Text of one option's help: anything up to the next option (`` --name``).
SAME_OPTION = r"(?:(?! --[a-z]).)*?"


def test_serve_help_shows_every_default(capsys):
    from leapgen.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in [("--host", "127.0.0.1"), ("--port", "8000"), ("--max-running", "16"),
                          ("--kv-token-budget", "65536"), ("--grammar-cache-mb", "512"),
                          ("--max-request-bytes", "8388608"), ("--max-queued-requests", "256"),
                          ("--log-level", "info"), ("--max-grammar-mb", "256"),
                          ("--grammar-disk-cache-mb", "1024"), ("--timeout-keep-alive", "75")]:
        assert re.search(re.escape(flag) + rf" {SAME_OPTION}\(default: " + re.escape(default) + r"\)", text), flag
    for flag in ("--api-key", "--max-model-len", "--served-model-name", "--grammar-cache-dir", "--threads"):
        assert re.search(re.escape(flag) + rf" {SAME_OPTION}default: ", text.replace("--model value", "model value")), flag


def test_serve_limit_flags_are_checked_before_loading(capsys):
    assert main(["serve", "--max-grammar-mb", "600"]) == EXIT_USAGE  # over the default 512 MB cache
    assert "--max-grammar-mb" in capsys.readouterr().err
    assert main(["serve", "--max-queued-requests", "0"]) == EXIT_USAGE
    assert main(["serve", "--api-key", " "]) == EXIT_USAGE
    assert main(["serve", "--timeout-keep-alive", "0"]) == EXIT_USAGE
    assert "--timeout-keep-alive" in capsys.readouterr().err


@pytest.mark.parametrize("flag, env, expected", [([], "from-env", "from-env"), (["--api-key", "k"], "from-env", "k"),
                                                 ([], "", None)])
def test_serve_takes_the_api_key_from_the_flag_or_leapgen_api_key(monkeypatch, flag, env, expected):
    pytest.importorskip("fastapi", reason="needs the server stack: pip install 'leapgen[serve]'")
    import leapgen.server.app
    import leapgen.server.logging_setup

    seen = {}
    monkeypatch.setattr(leapgen.server.app, "serve", lambda **kw: seen.update(kw))
    monkeypatch.setattr(leapgen.server.logging_setup, "configure_logging", lambda *a: None)  # the process's log
    monkeypatch.setenv("LEAPGEN_API_KEY", env)
    assert main(["serve", *flag]) == EXIT_OK
    assert seen["limits"].api_key == expected
    assert seen["timeout_keep_alive"] == leapgen.server.app.KEEP_ALIVE_S  # longer than the openai SDK's pool


def test_the_console_script_ends_generate_at_once_with_its_output_flushed():
    import subprocess
    import sys

    code = ("import sys; sys.argv = ['leapgen', 'generate', '--max-tokens', '0', 'hi']\n"
            "from leapgen.cli import main\nmain()\nprint('after main')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_USAGE
    assert "--max-tokens (max_tokens) must be >= 1" in proc.stderr  # written before the process ended
    assert "after main" not in proc.stdout  # main() did not return: os._exit, no interpreter teardown
    assert main(["generate", "--max-tokens", "0", "hi"]) == EXIT_USAGE  # with argv given, main returns
