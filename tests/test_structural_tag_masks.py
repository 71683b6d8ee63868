"""Exact structural-tag masks on real vocabularies: Llama-3, Qwen3 (whose tool and think markers
are single added tokens) and a SentencePiece one (Mistral).

For states along outputs of three tags (free text and tool calls with a JSON Schema content; reasoning
then tools with regex contents; free text with excludes), cut at every character near the markers
(a trigger split over tokens, a token straddling the trigger's end, a marker given as its one added
token, a state inside a UTF-8 character), the bitmask must equal

(a) a brute-force walk of every token through the compiled DFA (``compiled.dfa.trans``): an
    ordinary token is allowed when all its bytes walk and none is 0xFF; a marker token when its
    token literal (0xFF and the id in three bytes, :func:`leapgen.grammar.ir.token_literal`'s
    documented form, written out here) walks; stop tokens where the DFA accepts;
(b) an oracle sharing no code with leapgen: ``regex.fullmatch(pattern, prefix + text,
    partial=True)`` with a hand-written pattern per tag, in which each marker token is a private-use
    character of plane 16 (``prefix``: the text so far, markers given as tokens written the same
    way). Tokens are pruned by first character (partial matches are prefix-closed), then a seeded
    sample of the rest is checked (all of them with ``--run-slow``).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import regex

from leapgen import GrammarCompiler, GrammarMatcher
from test_mask_exactness import JSON_STR, brute_force_walk, unpack, vocab_tables

FAMILIES = ["llama3", "qwen", "mistral"]
MARKERS = ["<tool_call>", "</tool_call>", "<think>", "</think>"]
PUA = {m: chr(0x100001 + i) for i, m in enumerate(MARKERS)}  # a marker given as its one token, in the oracle
NOT_PUA = "[^\U00100000-\U0010ffff]"
JSON_TEXT = JSON_STR.replace(r'[^"\\\x00-\x1f]', r'[^"\\\x00-\x1f\U00100000-\U0010ffff]')  # no marker token
ORACLE_SAMPLE = 1500


def _either(marker: str) -> str:
    return f"(?:{regex.escape(marker)}|{PUA[marker]})"


def _free(*patterns: str) -> str:
    """Text with none of ``patterns`` in it (none of them overlaps itself)."""
    return f"(?:(?!{'|'.join(regex.escape(p) for p in patterns)}){NOT_PUA})*"


CALL_BEGIN = '<tool_call>\n{"name": "get_weather", "arguments": '
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _tag(begin, content, end):
    return {"type": "tag", "begin": begin, "content": content, "end": end}


TOOLS = {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
    _tag(CALL_BEGIN, {"type": "json_schema", "json_schema": SCHEMA}, "}\n</tool_call>")]}
TOOLS_RX = (f"(?:{_free('<tool_call>')}{_either('<tool_call>')}"
            + regex.escape('\n{"name": "get_weather", "arguments": {"city": ') + JSON_TEXT + r"\}\}\n"
            + f"{_either('</tool_call>')})*{_free('<tool_call>')}")

THINK_THEN_TOOLS = {"type": "sequence", "elements": [
    _tag("<think>", {"type": "any_text"}, "</think>"),
    {"type": "triggered_tags", "triggers": ["<function="], "tags": [
        _tag("<function=add>", {"type": "regex", "pattern": r"[0-9]{1,3}\+[0-9]{1,3}"}, "</function>"),
        _tag("<function=neg>", {"type": "regex", "pattern": "-[0-9]{1,3}"}, "</function>")]}]}
THINK_THEN_TOOLS_RX = (f"{_either('<think>')}{_free('</think>')}{_either('</think>')}"
                       f"(?:{_free('<function=')}<function=(?:add>[0-9]{{1,3}}\\+[0-9]{{1,3}}|neg>-[0-9]{{1,3}})"
                       f"</function>)*{_free('<function=')}")

EXCLUDES = {"type": "sequence", "elements": [{"type": "any_text", "excludes": ["\n\n", "STOP"]},
                                             {"type": "const_string", "value": "STOP"}]}
EXCLUDES_RX = f"{_free(chr(10) * 2, 'STOP')}STOP"

# (tag, oracle pattern, the output walked: text, or ("token", marker); cut at every character of
# the pieces marked "*", at the end of the others)
CASES = {
    "tools": (TOOLS, TOOLS_RX, [
        "Let me check", ("*", " <tool_call>\n{"), '"name": "get_weather", "arguments": {"city": "',
        ("*", "Pa日"), 'ris"}}', ("*", "\n</tool_call>"), " Done."]),
    "tools_as_tokens": (TOOLS, TOOLS_RX, [
        "Hi ", ("token", "<tool_call>"), ("*", '\n{"name"'), ': "get_weather", "arguments": {"city": "x"}}\n',
        ("token", "</tool_call>"), ("*", " <too")]),
    "think_then_tools": (THINK_THEN_TOOLS, THINK_THEN_TOOLS_RX, [
        ("*", "<think>"), "Add them", ("*", "</think>"), " So: ", ("*", "<function=add>1"), "2+3</function>"]),
    "think_as_tokens": (THINK_THEN_TOOLS, THINK_THEN_TOOLS_RX, [
        ("token", "<think>"), ("*", "a</thin"), "x no", ("token", "</think>"), ("*", "<function=ne")]),
    "excludes": (EXCLUDES, EXCLUDES_RX, [("*", "Some text\nST"), ("*", "STO")]),
}


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture(scope="module")
def compiler(family):
    return GrammarCompiler(vocab_tables(family).info)


def _marker_ids(info) -> dict[str, int]:
    """The vocabulary's added tokens whose text is a marker (read off its special tokens' texts)."""
    return {text: i for i, text in info.special_token_texts.items() if text in MARKERS}


def _literal(token: int) -> bytes:
    return bytes([0xFF]) + token.to_bytes(3, "big")


def _walk_states(compiled, steps, marker_ids):
    """(oracle prefix, bytes so far, forked matcher) at each cut of the walked output."""
    m = GrammarMatcher(compiled)
    prefix, data = "", b""
    out = [(prefix, data, m.fork())]
    for step in steps:
        if isinstance(step, tuple) and step[0] == "token":
            if step[1] not in marker_ids:  # this vocabulary has no such token: spell the marker
                step = step[1]
            else:
                assert m.accept_token(marker_ids[step[1]])
                prefix += PUA[step[1]]
                out.append((prefix, data, m.fork()))
                continue
        cut = isinstance(step, tuple)
        text = step[1] if cut else step
        for ch in text if cut else [text]:
            raw = ch.encode("utf-8")
            if cut and len(raw) > 1:  # stand inside the character once
                assert m.accept_string(raw[:1])
                out.append((None, data + raw[:1], m.fork()))
                assert m.accept_string(raw[1:])
            else:
                assert m.accept_string(ch), (prefix, ch)
            prefix, data = prefix + ch, data + raw
            out.append((prefix, data, m.fork()))
    return out


def _brute_force(v, compiled, state: int, literals: dict[int, bytes], has_ff: np.ndarray) -> np.ndarray:
    trans = compiled.dfa.trans
    want = np.zeros(v.info.vocab_size, bool)
    ends = brute_force_walk(v, trans, state)
    want[v.by_len_ids[(ends >= 0) & ~has_ff]] = True
    for token, data in literals.items():
        q = state
        for b in data:
            q = int(trans[q, b]) if q >= 0 else -1
        want[token] = q >= 0
    want[v.stop_ids] = bool(compiled.dfa.accepting[state])
    return want


def _oracle(v, rx, prefix: str, got: np.ndarray, marker_ids: dict, rng, run_slow: bool) -> int:
    """Check ``got`` against the regex on text tokens and marker tokens; returns how many were checked."""
    checked = 0
    full = []
    for ch, idx in v.first_groups.items():
        if rx.fullmatch(prefix + ch, partial=True) is None:
            ids = np.concatenate([v.text_ids[k] for k in idx.tolist()])
            assert not got[ids].any(), f"after {prefix!r}: a token starting with {ch!r} is allowed"
            checked += len(ids)
        else:
            full.append(idx)
    full = np.concatenate(full) if full else np.zeros(0, np.int64)
    if not run_slow and len(full) > ORACLE_SAMPLE:
        full = rng.choice(full, ORACLE_SAMPLE, replace=False)
    for k in full.tolist():
        ok = rx.fullmatch(prefix + v.texts[k], partial=True) is not None
        ids = v.text_ids[k]
        assert (got[ids] == ok).all(), f"after {prefix!r}: token {v.texts[k]!r} mask={got[ids][0]} oracle={ok}"
        checked += len(ids)
    for marker, token in marker_ids.items():
        ok = rx.fullmatch(prefix + PUA[marker], partial=True) is not None
        assert got[token] == ok, f"after {prefix!r}: the {marker} token mask={got[token]} oracle={ok}"
    complete = rx.fullmatch(prefix) is not None
    assert (got[v.stop_ids] == complete).all(), (prefix, complete)
    return checked


@pytest.mark.parametrize("case", list(CASES))
def test_masks_are_exact(family, compiler, case, run_slow):
    tag, pattern, steps = CASES[case]
    v = vocab_tables(family)
    marker_ids = _marker_ids(v.info)
    if case.endswith("as_tokens") and not marker_ids:
        pytest.skip(f"{family} has no marker tokens (the spelled cases cover it)")
    compiled = compiler.compile_structural_tag({"type": "structural_tag", "format": tag}, any_whitespace=False,
                                               separators=(", ", ": "))
    assert compiled.is_regular
    named = {t for t in marker_ids if any(t in s for s in _strings(tag))}
    assert set(compiled.token_literals) == {marker_ids[t] for t in named}
    literals = {marker_ids[t]: _literal(marker_ids[t]) for t in named}
    has_ff = np.array([0xFF in v.token_bytes[i] for i in v.by_len_ids.tolist()], bool)
    rx = regex.compile(pattern)
    assert not any(ch >= "\U00100000" for t in v.texts for ch in t), "a token holds a plane-16 character"
    rng = np.random.default_rng(zlib.crc32(f"{family}\0{case}".encode()))
    special = sorted(set(v.info.special_token_ids) - set(v.stop_ids.tolist()) - set(literals))
    words = (v.info.vocab_size + 31) // 32
    checked = 0
    states = _walk_states(compiled, steps, marker_ids)
    for prefix, data, m in states:
        bitmask = np.zeros((1, words), np.int32)
        m.fill_next_token_bitmask(bitmask, 0)
        got = unpack(bitmask[0])[:v.info.vocab_size]
        want = _brute_force(v, compiled, m.state, literals, has_ff)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"bitmask != brute force after {data!r}: " + ", ".join(
            f"{i} {v.token_bytes[i]!r} mask={got[i]}" for i in bad[:8].tolist())
        assert not got[special].any(), "a special token no marker names is allowed"
        if prefix is not None:
            checked += _oracle(v, rx, prefix, got, {t: marker_ids[t] for t in named}, rng, run_slow)
    assert checked > 0 and len(states) > 10


def test_states_hold_straddling_tokens_and_split_triggers(family, compiler):
    """The walks above do reach the cases the masks must get right: a token that completes the trigger
    and starts the tag (``>\\n`` in Llama-3 and Qwen), a trigger's first half as one token."""
    v = vocab_tables(family)
    compiled = compiler.compile_structural_tag({"type": "structural_tag", "format": TOOLS}, any_whitespace=False,
                                               separators=(", ", ": "))
    ids = {b: i for i, b in enumerate(v.token_bytes) if b}
    m = GrammarMatcher(compiled)
    assert m.accept_string("x <tool_call")
    bitmask = np.zeros((1, (v.info.vocab_size + 31) // 32), np.int32)
    m.fill_next_token_bitmask(bitmask, 0)
    got = unpack(bitmask[0])
    straddling = [b for b in (b">\n", b">\n{", b">\n\n") if b in ids]
    assert straddling or family == "mistral", "no token straddles the trigger's end"  # SentencePiece: <0x0A>
    for b in straddling:
        assert got[ids[b]] == (b in (b">\n", b">\n{")), b
    m = GrammarMatcher(compiled)
    assert m.accept_string("x ")
    m.fill_next_token_bitmask(bitmask, 0)
    got = unpack(bitmask[0])
    halves = [b for b in (b"<", b"<tool", b" <") if b in ids]
    assert halves and all(got[ids[b]] for b in halves)


def _strings(fmt) -> list[str]:
    """Every begin, end, trigger and constant string of a format (for the markers it names)."""
    out = []
    if isinstance(fmt, dict):
        for key in ("begin", "end", "value"):
            if isinstance(fmt.get(key), str):
                out.append(fmt[key])
        out += fmt.get("triggers", [])
        for value in fmt.values():
            if isinstance(value, (dict, list)):
                out += _strings(value)
    elif isinstance(fmt, list):
        for value in fmt:
            out += _strings(value)
    return out
