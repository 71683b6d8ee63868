"""The kernel library compiled ahead of time (leapgen.automata.aot, aot_build, kernel_types, jit).

- The signature notation reads what it writes, and names the offset of what it cannot read.
- A kernel's wrapper calls the compiled function only for arguments numba's dispatcher would type as
  the signature says (dtype, dimensions, C-contiguity, writability, scalar types); anything else goes to
  numba's JIT. pycc's own conversion checks only dimensions and item size.
- The key changes with every input of the compiled code.
- Where the library is built for this checkout (scripts/install.sh builds it): a process using it never
  imports numba, and its masks equal those of a process using numba's JIT, on regular, counted and
  context-free grammars; a call of types it was not built for switches that process to the JIT, with
  the same results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from leapgen.automata import aot, jit
from leapgen.automata.kernel_types import SignatureSyntaxError, parse_signature, parse_type


def test_notation_reads_what_numba_types_write():
    pytest.importorskip("numba", reason="the notation is written from numba's types; numba is not installed")
    from numba.core import types

    from leapgen.automata.aot_build import numba_type
    from leapgen.automata.kernel_types import format_type

    cases = [types.int64, types.boolean, types.float64, types.uint8, types.none,
             types.Array(types.int32, 1, "C"), types.Array(types.uint8, 2, "C", readonly=True),
             types.Array(types.int64, 2, "A"), types.Tuple([types.int64, types.Array(types.bool_, 1, "C")]),
             types.UniTuple(types.Array(types.int32, 1, "C"), 3), types.Tuple([types.int64])]
    for t in cases:
        text = format_type(t)
        assert numba_type(parse_type(text)) == t, text
    assert format_type(types.IntegerLiteral(0)) == "int64"
    assert format_type(types.Omitted(-1)) == "int64"
    with pytest.raises(TypeError):
        format_type(types.Array(types.int32, 2, "F"))


def test_notation_errors_name_the_offset():
    assert parse_type("readonly uint8[:, ::1]") == ("array", "uint8", 2, "C", True)
    assert parse_type("(int64, int32[:])") == ("tuple", ("int64", ("array", "int32", 1, "A", False)))
    kernel, args, ret = parse_signature("a.b:f(int32[::1], bool) -> (int64,)")
    assert (kernel, args, ret) == ("a.b:f", (("array", "int32", 1, "C", False), "bool"), ("tuple", ("int64",)))
    for bad, offset in [("int33", 0), ("int32[::1, :]", 5), ("readonly int64", 0), ("(int64 int32)", 7)]:
        with pytest.raises(SignatureSyntaxError, match=f"offset {offset}"):
            parse_type(bad)
    with pytest.raises(SignatureSyntaxError, match="module:qualname"):
        parse_signature("f(int64) -> int64")


def _kernel(table, start, flag=True, step=1):
    return "python"


def _wrapped(*accepts):
    """A wrapper over fake compiled functions: the n-th takes arguments whose first is of type accepts[n]
    (raising TypeError otherwise, as the library's strict conversions do)."""
    calls, missed = [], []

    def compiled(n, kind):
        def f(*args):
            if not isinstance(args[0], kind):
                raise TypeError(f"leapgen kernel library: an argument is not {kind.__name__}")
            calls.append((n, args))
            return f"compiled {n}"
        return f

    def miss(*args):
        missed.append(args)
        return "jit"

    return aot.wrapper(_kernel, [compiled(n, kind) for n, kind in enumerate(accepts)], miss), calls, missed


def test_wrapper_tries_each_signature_then_the_jit():
    k, calls, missed = _wrapped(int, str)
    assert k(1, 2) == "compiled 0" and calls[-1] == (0, (1, 2, True, 1))  # defaults are passed on
    assert k("a", 2, step=5) == "compiled 1" and calls[-1] == (1, ("a", 2, True, 5))
    assert k(table=3, start=4, flag=False) == "compiled 0" and calls[-1] == (0, (3, 4, False, 1))
    assert k(1.5, 2) == "jit" and missed == [(1.5, 2, True, 1)]
    assert len(calls) == 3
    assert k.__wrapped__ is _kernel and k.__name__ == "_kernel"


def test_wrapper_without_signatures_always_misses():
    k, calls, missed = _wrapped()
    assert k(np.zeros(1, np.int32), 1) == "jit"
    assert calls == [] and len(missed) == 1 and missed[0][1] == 1


def test_key_changes_with_the_inputs(tmp_path, monkeypatch):
    pytest.importorskip("numba", reason="the key needs numba's version; numba is not installed")
    source = tmp_path / "kernels.py"
    source.write_text("@njit\ndef f(a):\n    return a\n")
    monkeypatch.setattr(aot, "kernel_sources", lambda: [source])
    monkeypatch.setattr(aot, "_PACKAGE", tmp_path)
    lines = ["m:f(int64) -> int64"]
    key = aot.build_key(lines)
    assert aot.build_key(lines) == key
    assert aot.build_key(lines + ["m:f(int32) -> int32"]) != key
    source.write_text("@njit\ndef f(a):\n    return a + 0\n")
    assert aot.build_key(lines) != key


def test_the_kernel_sources_are_the_kernel_modules():
    names = {path.name for path in aot.kernel_sources()}
    assert {"trie_kernels.py", "token_slices.py", "determinize_kernel.py", "clock_numba.py", "aot_build.py"} <= names
    assert "compiler.py" not in names


def test_signature_list_parses():
    lines = aot.signature_lines()
    kernels = {parse_signature(line)[0] for line in lines}
    assert len(lines) == len(set(lines))
    assert {"leapgen.compiler.trie_kernels:row_walk", "leapgen.automata.determinize_kernel:subset_construction",
            "leapgen.compiler.pda_kernels:frame_walk"} <= kernels


_WORKLOAD = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    from leapgen.automata import jit
    from leapgen.compiler.compiler import GrammarCompiler
    from leapgen.matcher import GrammarMatcher
    from tests.vocab_loaders import load_encoder, load_tokenizer_info

    vocab, encode = load_tokenizer_info("gpt2"), load_encoder("gpt2")
    compiler = GrammarCompiler(vocab)
    schema = {"type": "object", "required": ["name", "tags"], "properties": {
        "name": {"type": "string", "minLength": 3, "maxLength": 12},
        "tags": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 5}}}
    cases = [
        (compiler.compile_regex(r"[a-z]{2,40}@(gmail|yahoo)[.]com( [0-9]+)*"), "bob@gmail.com 12 7"),
        (compiler.compile_json_schema(json.dumps(schema)), '{"name": "alice", "tags": [1, 22, 333]}'),
        (compiler.compile_builtin_json_grammar(), '{"a": [1, {"b": null}], "c": "d"}'),
        (compiler.compile_grammar('root ::= "(" root ")" | "[" [a-z]* "]"'), "(([ab]))"),
    ]
    if sys.argv[1:] == ["switch"]:
        from leapgen.compiler import compact_rows
        print("wrong-type call", compact_rows.narrow_byte(np.arange(8, dtype=np.int64), 0, 8), file=sys.stderr)
        cases.append((compiler.compile_regex("(x|yz)+[0-9]{3}"), "xyzx123"))
    digest = hashlib.sha256()
    bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), np.int32)
    for grammar, text in cases:
        matcher = GrammarMatcher(grammar)
        for token in encode(text):
            matcher.fill_next_token_bitmask(bitmask)
            digest.update(bitmask.tobytes())
            assert matcher.accept_token(token), (text, token)
        assert matcher.is_terminated() or matcher.accept_token(vocab.stop_token_ids[0]), text
    print(json.dumps({"mode": jit.MODE, "numba": "numba" in sys.modules, "digest": digest.hexdigest()}))
""")


def _run(mode: str, *args: str) -> dict:
    env = dict(os.environ, LEAPGEN_KERNELS=mode)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", _WORKLOAD, *args], env=env, cwd=root, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"stderr": done.stderr}


needs_library = pytest.mark.skipif(
    jit.LIBRARY is None, reason="this process does not use a kernel library built for this checkout "
    "(python -m leapgen.automata.aot_build builds it; scripts/install.sh runs that; LEAPGEN_KERNELS=jit turns it off)")


@needs_library
def test_library_functions_take_exactly_their_types():
    """The compiled functions themselves (no wrapper): pycc alone would take most of these."""
    (row_hash,) = jit.LIBRARY.exports["leapgen.compiler.compact_rows:row_hash"]  # (uint32[::1], uint64[::1])
    (narrow_byte,) = jit.LIBRARY.exports["leapgen.compiler.compact_rows:narrow_byte"]  # (int32[::1], int64, int64)
    words, seeds = np.arange(6, dtype=np.uint32), np.arange(8, dtype=np.uint64)  # salts at least as many
    frozen = seeds.copy()
    frozen.flags.writeable = False
    bad = [
        (words.astype(np.int32), seeds),  # same item size, another kind
        (words.astype(np.float32), seeds),
        (words.astype(np.uint64), seeds),  # another size
        (words.astype(">u4"), seeds),  # another byte order
        (np.arange(12, dtype=np.uint32)[::2], seeds),  # not contiguous
        (words.reshape(2, 3), seeds),  # two dimensions: pycc alone copies both into a one-dimension array
        (words, frozen),  # read-only where a writable array is typed
        (list(words), seeds),
    ]
    for args in bad:
        with pytest.raises(TypeError):
            row_hash(*args)
    assert row_hash(words, seeds) == row_hash(words.copy(), seeds.copy())
    (matches_whole,) = jit.LIBRARY.exports["leapgen.compiler.compact_rows:matches_whole"]  # (u32[::1], ro u32[::1])
    assert matches_whole(words, words.copy())  # a writable array where a read-only one is typed
    table = np.arange(10, dtype=np.int32)
    assert narrow_byte(table, 2, np.int64(5)) == narrow_byte(table, True, 5)
    for args in [(table, 2.0, 5), (table, 2, None), (table, np.array([2]), 5), (table.astype(np.int64), 2, 5)]:
        with pytest.raises(TypeError):
            narrow_byte(*args)


@needs_library
def test_library_process_imports_no_numba_and_masks_equal_the_jit():
    pytest.importorskip("tests.vocab_loaders").load_tokenizer_info("gpt2")
    library, jitted = _run("aot"), _run("jit")
    assert (library["mode"], library["numba"]) == ("aot", False), library["stderr"][-2000:]
    assert (jitted["mode"], jitted["numba"]) == ("jit", True)
    assert library["digest"] == jitted["digest"]


@needs_library
def test_call_of_other_types_switches_to_the_jit_with_the_same_results():
    pytest.importorskip("tests.vocab_loaders").load_tokenizer_info("gpt2")
    switched, jitted = _run("aot", "switch"), _run("jit", "switch")
    assert (switched["mode"], switched["numba"]) == ("jit", True)
    assert "switch to numba's JIT" in switched["stderr"] and "narrow_byte" in switched["stderr"]
    assert switched["digest"] == jitted["digest"]
