"""serialize_json / deserialize_json of TokenizerInfo, Grammar and CompiledGrammar.

Round trips give identical masks, in this process and after a restart (a
fresh interpreter reads the files and walks the same tokens); reading a
compiled grammar back never runs a front-end; malformed, foreign and
other-version documents raise xgrammar's error classes. Ported (rewritten)
from the engine-facing parts of xgrammar's ``tests/python/test_serialization.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xgr_pair import allowed, leapgen_info

import leapgen.xgrammar as xgr

CASES = [
    ("regex", r"[A-Z][a-z]+ \d{2,4}", "Ada 1815"),
    ("json_schema", json.dumps({"type": "object", "properties": {"n": {"type": "string"}, "v": {"type": "number"}},
                                "required": ["n"]}), '{"n": "x", "v": 1.5}'),
    ("ebnf", 'root ::= "(" root ")" | [a-z]+', "((ab))"),
    ("ebnf", 'root ::= "<t>" r "</t>"\nr[max_tokens=12, max_chars=40, temperature=0.5] ::= [a-z ]*', "<t>the cat sat on the mat</t>"),
    ("builtin_json", None, '{"a": [1, {"b": null}]}'),
]


def _info():
    return leapgen_info("llama3")


def _encode(text):
    from vocab_loaders import load_encoder

    return load_encoder("llama3")(text)


def _compile(compiler, kind, source):
    if kind == "regex":
        return compiler.compile_regex(source)
    if kind == "json_schema":
        return compiler.compile_json_schema(source)
    if kind == "builtin_json":
        return compiler.compile_builtin_json_grammar()
    return compiler.compile_grammar(source)


def _walk_masks(compiled, ids) -> np.ndarray:
    """The bitmask rows along ``ids`` (then one more), int32 ``(len(ids) + 1, words)``."""
    m = xgr.GrammarMatcher(compiled)
    rows = xgr.allocate_token_bitmask(len(ids) + 1, compiled.tokenizer_info.vocab_size)
    for i, t in enumerate(ids):
        m.fill_next_token_bitmask(rows, i)
        assert m.accept_token(t)
    m.fill_next_token_bitmask(rows, len(ids))
    return rows.numpy()


@pytest.mark.parametrize("kind, source, text", CASES)
def test_compiled_grammar_round_trip(kind, source, text, monkeypatch):
    info = _info()
    compiled = _compile(xgr.GrammarCompiler(info), kind, source)
    ids = _encode(text)
    before = _walk_masks(compiled, ids)
    data = compiled.serialize_json()
    info._binder()  # made once per vocabulary (its warm-up compiles a schema of its own)
    # reading it back must not compile again: every front-end would fail now
    import leapgen.grammar.ebnf
    import leapgen.grammar.json
    import leapgen.grammar.regex

    for module, name in [(leapgen.grammar.regex, "parse_regex"), (leapgen.grammar.ebnf, "parse_ebnf"),
                         (leapgen.grammar.json, "json_schema_to_ir")]:
        monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail("deserializing ran a front-end"))
    again = xgr.CompiledGrammar.deserialize_json(data, info)
    assert np.array_equal(_walk_masks(again, ids), before)
    assert again.grammar == compiled.grammar
    assert type(again.native) is type(compiled.native)


@pytest.mark.parametrize("kind, source, text", CASES)
def test_grammar_round_trip(kind, source, text):
    grammar = {"regex": lambda: xgr.Grammar.from_regex(source), "json_schema": lambda: xgr.Grammar.from_json_schema(source),
               "ebnf": lambda: xgr.Grammar.from_ebnf(source), "builtin_json": xgr.Grammar.builtin_json_grammar}[kind]()
    again = xgr.Grammar.deserialize_json(grammar.serialize_json())
    assert again == grammar and str(again) == str(grammar)
    compiler = xgr.GrammarCompiler(_info())
    ids = _encode(text)
    assert np.array_equal(_walk_masks(compiler.compile_grammar(again), ids),
                          _walk_masks(compiler.compile_grammar(grammar), ids))


def test_concat_union_round_trip():
    g = xgr.Grammar.union(xgr.Grammar.concat(xgr.Grammar.from_regex("[0-9]+"), xgr.Grammar.from_ebnf(
        'root ::= "[" root? "]"')), xgr.Grammar.from_json_schema({"type": "boolean"}))
    assert xgr.Grammar.deserialize_json(g.serialize_json()) == g


def test_tokenizer_info_round_trip():
    info = _info()
    again = xgr.TokenizerInfo.deserialize_json(info.serialize_json())
    for what in ("vocab_type", "vocab_size", "add_prefix_space", "stop_token_ids", "special_token_ids", "decoded_vocab"):
        assert getattr(again, what) == getattr(info, what), what
    assert again == info and again.native.fingerprint == info.native.fingerprint
    raw = xgr.TokenizerInfo([b"\xff\xfe", "a", "</s>", ""], vocab_size=40)
    assert xgr.TokenizerInfo.deserialize_json(raw.serialize_json()) == raw


def test_vocab_and_metadata_rebuild_the_same_vocabulary():
    from vocab_loaders import load_hf_tokenizer

    tok = load_hf_tokenizer("qwen")
    info = leapgen_info("qwen")
    vocab = [""] * info.vocab_size
    for t, i in tok.get_vocab().items():
        vocab[i] = t
    again = xgr.TokenizerInfo.from_vocab_and_metadata(vocab, info.dump_metadata())
    assert again == info and again.special_token_ids == info.special_token_ids


def test_bad_documents():
    info = _info()
    data = json.loads(xgr.GrammarCompiler(info).compile_regex("a+").serialize_json())
    with pytest.raises(xgr.InvalidJSONError):
        xgr.CompiledGrammar.deserialize_json("{not json", info)
    with pytest.raises(xgr.DeserializeVersionError):
        xgr.CompiledGrammar.deserialize_json(json.dumps({**data, "__VERSION__": "v0"}), info)
    with pytest.raises(xgr.DeserializeFormatError):
        xgr.CompiledGrammar.deserialize_json(json.dumps({**data, "type": "Grammar"}), info)
    broken = json.loads(json.dumps(data))
    broken["automaton"]["dfa"]["n_states"] += 1
    with pytest.raises(xgr.DeserializeFormatError):
        xgr.CompiledGrammar.deserialize_json(json.dumps(broken), info)
    other = xgr.TokenizerInfo(["a", "b", "</s>"])
    with pytest.raises(xgr.DeserializeFormatError):
        xgr.CompiledGrammar.deserialize_json(json.dumps(data), other)  # another vocabulary
    with pytest.raises(xgr.DeserializeFormatError):
        xgr.Grammar.deserialize_json(json.dumps({"__VERSION__": xgr.get_serialization_version(), "type": "Grammar",
                                                 "ir": {"nodes": [["seq", [5]]], "root": 0}, "warnings": []}))
    with pytest.raises(xgr.DeserializeVersionError):
        xgr.TokenizerInfo.deserialize_json(json.dumps({"__VERSION__": "nope", "type": "TokenizerInfo"}))
    for error in (xgr.InvalidJSONError, xgr.DeserializeFormatError, xgr.DeserializeVersionError):
        assert issubclass(error, RuntimeError)


_CHILD = r"""
import json, sys
from pathlib import Path
import numpy as np
import leapgen.xgrammar as xgr
folder = Path(sys.argv[1])
info = xgr.TokenizerInfo.deserialize_json((folder / "info.json").read_text())
for case in json.loads((folder / "cases.json").read_text()):
    compiled = xgr.CompiledGrammar.deserialize_json((folder / f"{case['name']}.json").read_text(), info)
    m = xgr.GrammarMatcher(compiled)
    rows = xgr.allocate_token_bitmask(len(case["ids"]) + 1, info.vocab_size)
    for i, t in enumerate(case["ids"]):
        m.fill_next_token_bitmask(rows, i)
        assert m.accept_token(t), (case["name"], i)
    m.fill_next_token_bitmask(rows, len(case["ids"]))
    np.save(folder / f"{case['name']}.npy", rows.numpy())
"""


def test_round_trip_across_a_process_restart(tmp_path: Path):
    info = _info()
    compiler = xgr.GrammarCompiler(info)
    (tmp_path / "info.json").write_text(info.serialize_json())
    cases, expected = [], {}
    for k, (kind, source, text) in enumerate(CASES):
        compiled = _compile(compiler, kind, source)
        ids = _encode(text)
        name = f"case{k}"
        (tmp_path / f"{name}.json").write_text(compiled.serialize_json())
        cases.append({"name": name, "ids": ids})
        expected[name] = _walk_masks(compiled, ids)
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for name, rows in expected.items():
        got = np.load(tmp_path / f"{name}.npy")
        assert np.array_equal(got, rows), name
        assert allowed(got, info.vocab_size, len(got) - 1).size > 0


def test_keyed_objects_are_not_serializable_yet():
    """A schema whose keys are matcher state (a finite set of extra keys, never repeated) refuses to
    serialize by name rather than dropping its key guards; an automaton read back has none."""
    from leapgen.automata.pda import Pda
    from leapgen.errors import GrammarError

    schema = {"type": "object", "propertyNames": {"pattern": "^[a-c]$"},
              "additionalProperties": {"type": "integer"}, "minProperties": 2}
    grammar = xgr.Grammar.from_json_schema(json.dumps(schema))
    with pytest.raises(GrammarError, match="keyed JSON objects"):
        grammar.serialize_json()
    compiled = xgr.GrammarCompiler(_info()).compile_json_schema(json.dumps(schema))
    with pytest.raises(GrammarError, match="keyed JSON objects"):
        compiled.serialize_json()
    pda = Pda.from_rule_dfas(["root"], [Pda(xgr.Grammar.from_ebnf('root ::= "(" root ")" | "x"')._ir,
                                            max_states=1000).dfas[0]])
    assert not pda.guards
