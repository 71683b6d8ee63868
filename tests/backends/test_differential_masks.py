"""Differential masks: leapgen's bitmask against xgrammar's and llguidance's.

For the benchmark's fixed regexes and compact JSON Schemas
(``benchmarks/workloads.py``) and the JSON grammar, every state along every
valid instance is compared on the Llama-3 vocabulary (stop tokens are the
same for all three: ``tokenizer_info.stop_token_ids``). The differences
found were each investigated with a brute-force walk; they fall into the
categories below, which the comparison discounts, and
:func:`test_difference_evidence` replays the walk that decides each one.
Any other difference fails the test.

==========  ============  =====================================================
category    engine        finding (who is right)
==========  ============  =====================================================
special     xgrammar      Allows Llama-3's special tokens (``<|begin_of_text|>``,
                          reserved ids...) wherever text could contain their
                          spelling: its ``TokenizerInfo.from_huggingface`` finds
                          no special ids for Llama-3, so they count as text.
                          They decode to no text; leapgen never allows them.
                          xgrammar's bug.
escapes     xgrammar      In a string with ``maxLength``/``minLength`` it allows
                          raw control characters U+0000-U+001F (invalid JSON)
                          and forbids every escape (``\\n``, ``\\"``...).
                          xgrammar's bug (both directions).
numbers     xgrammar,     For numbers with bounds (``minimum: 0``...), leapgen
            llguidance    allows ``-0`` and exponents (``19.99e0``), which are
                          valid instances; the peers forbid them. A peer
                          incompleteness, harmless for generation.
canonical   llguidance    Where the grammar forces text, llguidance allows only
                          the tokens of the forced text's canonical tokenization
                          (``{"`` but not ``{``): by design (its fast-forward).
                          leapgen allows every tokenization.
llg-json    llguidance    In strings it forbids ``\\/``, ``\\uXXXX`` escapes of
                          characters that need none, and raw U+007F: valid JSON.
                          By design (``json_allowed_escapes``,
                          ``json_allow_general_unicode_escapes``).
whitespace  xgrammar,     The builtin JSON grammar: leapgen bounds whitespace
            llguidance    runs (``leapgen.grammar.builtin``), the peers do not.
                          By design, both sides.
json-root   llguidance    Its builtin JSON grammar (the schema ``{}``) starts
                          with any value; leapgen's and xgrammar's with an
                          object or an array only. By design.
self        xgrammar      Its builtin JSON mask forbids tokens its own matcher
                          accepts: after ``[{"m":"x"``, ``}]`` (and ``}]\n``,
                          `` }],``...) is masked off, though ``accept_token``
                          takes it and the text is valid JSON. xgrammar's bug
                          (a stack-dependent token its mask cache misjudges).
padding     xgrammar      With every token allowed it sets the bits of ids past
                          ``vocab_size`` in the last word (no such logits
                          exist); ignored: only ids below ``vocab_size`` count.
==========  ============  =====================================================
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from backend_helpers import mask_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import workloads  # noqa: E402

from leapgen.backends import available_backends  # noqa: E402

PEERS = [p for p in ("xgrammar", "llguidance") if p in available_backends()]
GRAMMARS = workloads.fixed_grammars() + workloads.cfg_grammars()[:1]  # + the builtin JSON grammar


def _compile(backend, grammar):
    if grammar.kind == "regex":
        return backend.compile_regex(grammar.source)
    if grammar.kind == "json_schema":
        return backend.compile_json_schema(grammar.source, any_whitespace=False)
    return backend.compile_builtin_json()


def _has_length_bounds(grammar) -> bool:
    return grammar.kind == "json_schema" and ('"maxLength"' in grammar.source or '"minLength"' in grammar.source)


def explained(peer: str, grammar, data: bytes, only_leapgen: bool, forced: bytes, special: bool,
              at_start: bool, peer_accepts, before: bytes = b"") -> str | None:
    """The documented category of one differing token, or None (``peer_accepts()``:
    whether the peer's own matcher accepts the token; ``before``: the text so far)."""
    escaping = (len(before) - len(before.rstrip(b"\\"))) % 2 == 1  # the token continues an escape
    if peer == "llguidance" and grammar.kind == "builtin_json" and not only_leapgen and at_start:
        return "json-root"
    if peer == "xgrammar" and grammar.kind == "builtin_json" and only_leapgen and peer_accepts():
        return "self"
    is_json = grammar.kind in ("json_schema", "builtin_json")
    if peer == "xgrammar" and special and not only_leapgen:
        return "special"
    if peer == "xgrammar" and _has_length_bounds(grammar) and (b"\\" in data or any(b < 0x20 for b in data)):
        return "escapes"
    if grammar.kind == "json_schema" and only_leapgen and (b"-" in data or data[:1] in (b"e", b"E")):
        return "numbers"
    if peer == "llguidance" and only_leapgen and forced and (forced.startswith(data) or data.startswith(forced)):
        return "canonical"
    if peer == "llguidance" and is_json and only_leapgen and (b"\\/" in data or b"\\u" in data or b"\x7f" in data
                                                              or escaping and data[:1] in (b"/", b"u")):
        return "llg-json"
    if grammar.kind == "builtin_json" and not only_leapgen and not data.strip():
        return "whitespace"
    return None


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("grammar", GRAMMARS, ids=[g.name for g in GRAMMARS])
def test_masks_equal_up_to_documented_differences(backend_named, encode, peer, grammar):
    mine_backend, peer_backend = backend_named("leapgen"), backend_named(peer)
    info = mine_backend.tokenizer_info
    mine_compiled, peer_compiled = _compile(mine_backend, grammar), _compile(peer_backend, grammar)
    unexplained = []
    for text in grammar.instances:
        ids = encode(text)
        mine, theirs = mine_backend.new_state(mine_compiled), peer_backend.new_state(peer_compiled)
        before = b""
        for k in range(len(ids) + 1):
            a, b = set(mask_of(mine_backend, mine).tolist()), set(mask_of(peer_backend, theirs).tolist())
            forced = mine.find_jump_forward_bytes()
            for t in sorted(t for t in a ^ b if t < info.vocab_size):  # past it: "padding"
                if not explained(peer, grammar, info.token_bytes[t], t in a, forced, t in info.special_token_ids,
                                 k == 0, lambda: theirs.fork().accept_token(t), before):
                    unexplained.append((text[:40], k, t, info.token_bytes[t], "leapgen" if t in a else peer))
            if k < len(ids):
                assert mine.accept_token(ids[k]) and theirs.accept_token(ids[k])
                before += info.token_bytes[ids[k]]
    assert not unexplained, f"{len(unexplained)} unexplained differences, e.g. {unexplained[:5]}"


def _accepts(backend, compiled, text: str) -> bool:
    state = backend.new_state(compiled)
    return state.accept_string(text) and state.is_completed()


def test_difference_evidence(backend_named, encode):
    """The brute-force walks behind each category (see the module docstring)."""
    import jsonschema

    mine = backend_named("leapgen")
    info = mine.tokenizer_info
    schemas = {name: schema for name, schema, _ in workloads.SCHEMAS}
    person, product = schemas["person"], schemas["product"]
    sku = '"sku":"ABC-1234"'
    cases = {  # text: (valid JSON instance?, schema)
        '{"name":"a\\nb","age":1}': (True, person),        # escapes: xgrammar rejects
        '{"name":"a\x01b","age":1}': (False, person),      # escapes: xgrammar accepts invalid JSON
        '{"name":"a","age":-0}': (True, person),           # numbers: peers reject
        '{' + sku + ',"price":19.99e0,"in_stock":true}': (True, product),  # numbers
        '{"name":"a\\/b","age":1}': (True, person),        # llg-json: llguidance rejects
        '{"name":"\\u00e9","age":1}': (True, person),      # llg-json
        '{"name":"a\x7fb","age":1}': (True, person),       # llg-json
    }
    for text, (valid, schema) in cases.items():
        try:
            jsonschema.validate(json.loads(text), schema)
            truth = True
        except (json.JSONDecodeError, jsonschema.ValidationError):
            truth = False
        assert truth == valid, text
        assert _accepts(mine, mine.compile_json_schema(schema, any_whitespace=False), text) == valid, text
    verdicts = {
        "xgrammar": {'{"name":"a\\nb","age":1}': False, '{"name":"a\x01b","age":1}': True,
                     '{"name":"a","age":-0}': False},
        "llguidance": {'{"name":"a\\/b","age":1}': False, '{"name":"\\u00e9","age":1}': False,
                       '{"name":"a\x7fb","age":1}': False, '{"name":"a","age":-0}': False},
    }
    for peer in PEERS:
        backend = backend_named(peer)
        compiled = backend.compile_json_schema(person, any_whitespace=False)
        for text, peer_accepts in verdicts[peer].items():
            assert _accepts(backend, compiled, text) == peer_accepts, (peer, text)
    # special: a special token contributes no text, so it can never be part of grammar text.
    special = 128000
    assert special in info.special_token_ids and info.token_bytes[special] == b""
    if "xgrammar" in PEERS:
        xgr = backend_named("xgrammar")
        allowed = mask_of(xgr, xgr.new_state(xgr.compile_regex(r"[^\n]{0,200}")))
        assert special in set(allowed.tolist())
        assert allowed.max() >= info.vocab_size  # padding bits set
    # canonical: llguidance allows the canonical first token of forced text only.
    if "llguidance" in PEERS:
        llg = backend_named("llguidance")
        state = llg.new_state(llg.compile_json_schema(person, any_whitespace=False))
        allowed = set(mask_of(llg, state).tolist())
        assert encode('{"')[0] in allowed and encode("{")[0] not in allowed
    # self: xgrammar's builtin JSON mask forbids "}]" after [{"m":"x" while its matcher accepts it (valid JSON).
    if "xgrammar" in PEERS:
        xgr = backend_named("xgrammar")
        state = xgr.new_state(xgr.compile_builtin_json())
        assert state.accept_string('[{"m":"x"') and json.loads('[{"m":"x"}]')
        (close,) = encode("}]")
        assert close not in set(mask_of(xgr, state).tolist()) and state.fork().accept_token(close)
    # whitespace: a long run is valid JSON; leapgen's builtin grammar bounds runs.
    from leapgen.grammar.builtin import JSON_GBNF

    bound = int(re.search(r"ws\s*::=.*\{0,(\d+)\}", JSON_GBNF).group(1))
    text = "[" + " " * (bound + 10) + "1]"
    assert json.loads(text) == [1] and not _accepts(mine, mine.compile_builtin_json(), text)
    for peer in PEERS:
        backend = backend_named(peer)
        assert _accepts(backend, backend.compile_builtin_json(), text), peer
