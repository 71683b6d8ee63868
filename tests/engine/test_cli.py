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
