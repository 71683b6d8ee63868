"""Structural tags on token sequences: markers given as one added token, triggers split over tokens,
``stop_after_first``, ``at_least_one``, ``excludes``, jump-forward inside tags.

A hand-built vocabulary (every byte, a few words, the markers as special tokens, a stop token, a
special token no grammar names, ordinary tokens holding the byte 0xFF) shows each rule on exact
token ids; the Qwen3 tokenizer (whose ``<tool_call>`` and ``<think>`` are added tokens) shows them on
what its tokenizer makes of real outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from leapgen import GrammarCompiler, GrammarMatcher, TokenizerInfo, allocate_token_bitmask
from leapgen.errors import StructuralTagError

WORDS = [b"hello", b" world", b"<tool", b"_call", b">\n", b"_call>\n{", b"</", b"{\"", b"\":", b" \"", b"\"}",
         b"}\n", b"\xff", b"a\xff", b"<think", b">", b"ok"]
SPECIAL = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<|fim|>", "<|im_end|>"]
VOCAB = [bytes([b]) for b in range(256)] + WORDS + SPECIAL
ID = {t.decode("latin-1") if isinstance(t, bytes) else t: i for i, t in enumerate(VOCAB)}
STOP = ID["<|im_end|>"]
CALL_BEGIN = '<tool_call>\n{"name": "get_weather", "arguments": '
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.fixture(scope="module")
def compiler():
    info = TokenizerInfo(VOCAB, "raw", stop_token_ids=[STOP],
                         special_token_ids=range(256 + len(WORDS), len(VOCAB)))
    return GrammarCompiler(info)


def tool_tag(**flags) -> dict:
    return {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<tool_call>"], **flags,
        "tags": [{"begin": CALL_BEGIN, "content": {"type": "json_schema", "json_schema": SCHEMA},
                  "end": "}\n</tool_call>"}]}}


def spell(text: str) -> list[int]:
    """One byte token per byte of ``text``."""
    return [ID[chr(b)] for b in text.encode("utf-8")]


def ids(*pieces) -> list[int]:
    """Token ids: a str piece is spelled one byte per token unless it is a whole vocabulary entry."""
    out = []
    for p in pieces:
        if isinstance(p, int):
            out.append(p)
        elif p in ID:
            out.append(ID[p])
        else:
            out.extend(spell(p))
    return out


def allowed(m: GrammarMatcher) -> set[int]:
    bm = allocate_token_bitmask(1, len(VOCAB))
    m.fill_next_token_bitmask(bm)
    bits = np.unpackbits(bm.numpy().view(np.uint8), bitorder="little")[:len(VOCAB)]
    return set(np.flatnonzero(bits).tolist())


def feed(m: GrammarMatcher, tokens: list[int]) -> int:
    """Accept tokens one by one, checking each against the mask first; returns how many went in."""
    for k, t in enumerate(tokens):
        if t not in allowed(m):
            assert not m.fork().accept_token(t)
            return k
        assert m.accept_token(t)
    return len(tokens)


CALL = ids("<tool_call>", '\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n', "</tool_call>")


def test_markers_match_their_one_token_where_they_go_and_nowhere_else(compiler):
    g = compiler.compile_structural_tag(tool_tag())
    assert set(g.token_literals) == {ID["<tool_call>"], ID["</tool_call>"]}
    m = GrammarMatcher(g)
    start = allowed(m)
    assert ID["<tool_call>"] in start and STOP in start
    assert not {ID["</tool_call>"], ID["<think>"], ID["<|fim|>"], ID["\xff"], ID["a\xff"]} & start
    begin = '\n{"name": "get_weather", "arguments": {"city": "'
    assert feed(m, ids("hello", " world", "<tool_call>", begin)) == 3 + len(begin)
    inside = allowed(m)  # inside a JSON string: text, never a marker token
    assert ID["hello"] in inside and not {ID["<tool_call>"], ID["</tool_call>"], STOP} & inside
    assert feed(m, ids('</tool_call>"}}\n')) == 16  # the marker's text is fine in a string
    assert allowed(m) == {ID["<"], ID["</"], ID["</tool_call>"]}
    assert feed(m, ids("</tool_call>", STOP)) == 2 and m.is_terminated()


def test_a_trigger_split_over_tokens_or_spelled_byte_by_byte(compiler):
    g = compiler.compile_structural_tag(tool_tag())
    for pieces in (("<tool", "_call", ">\n"), ("<tool", "_call>\n{"), ("<tool_call>\n",)):
        m = GrammarMatcher(g)
        rest = '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
        if pieces[-1].endswith("{"):
            rest = rest[1:]
        tokens = ids("hello", *pieces, rest, STOP)
        assert feed(m, tokens) == len(tokens), pieces
    m = GrammarMatcher(g)
    assert feed(m, ids("<tool", "_call", ">")) == 3
    assert allowed(m) == {ID["\n"]}  # only the begin's next byte
    m = GrammarMatcher(g)
    assert feed(m, ids("<tool", "_call>\n{")) == 2 and m.find_jump_forward_string() == '"name": "get_weather", "arguments": {'


def test_two_tags_with_text_between_and_no_trigger_at_all(compiler):
    g = compiler.compile_structural_tag(tool_tag())
    for tokens in (ids("hello", " world", STOP), ids(STOP), CALL + ids(" ok ") + CALL + ids("hello", STOP)):
        m = GrammarMatcher(g)
        assert feed(m, tokens) == len(tokens) and m.is_terminated()
    m = GrammarMatcher(g)  # a tag left open cannot end
    assert feed(m, CALL[:-1] + [STOP]) == len(CALL) - 1 and not m.is_completed()


def test_stop_after_first_and_at_least_one(compiler):
    m = GrammarMatcher(compiler.compile_structural_tag(tool_tag(stop_after_first=True)))
    assert feed(m, ids("hello") + CALL) == 1 + len(CALL)
    assert allowed(m) == {STOP}  # nothing after the first tag: no text, no second call
    m = GrammarMatcher(compiler.compile_structural_tag(tool_tag(at_least_one=True)))
    assert STOP not in allowed(m) and not m.accept_token(STOP)  # no end without a tag
    assert allowed(m) == {ID["<"], ID["<tool"], ID["<tool_call>"]}  # and no text before it
    assert m.find_jump_forward_string() == CALL_BEGIN + "{"  # forced as text (the engine retokenizes it)
    tokens = CALL + ids(" ok", STOP)
    assert feed(m, tokens) == len(tokens) and m.is_terminated()


def test_excludes_and_end_detection_with_markers(compiler):
    think = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "excludes": ["hello"]}, "end": "</think>"},
        {"type": "const_string", "value": "ok"}]}}
    g = compiler.compile_structural_tag(think)
    assert set(g.token_literals) == {ID["<think>"], ID["</think>"]}
    m = GrammarMatcher(g)
    assert feed(m, ids("<think>", " world", "hell")) == 6
    assert ID["o"] not in allowed(m)  # "hello" is excluded
    assert feed(m, ids("</think>", "ok", STOP)) == 3
    m = GrammarMatcher(g)  # spelled "<think" + ">" is the marker too; "</think>" ends the free text
    assert feed(m, ids("<think", ">", "hello")) == 2
    assert feed(m, ids("</", "think>")) == 7 and m.find_jump_forward_string() == "ok"


def test_token_formats_match_the_token_only(compiler):
    fmt = {"type": "structural_tag", "format": {
        "type": "tag", "begin": {"type": "token", "token": "<think>"}, "content": {"type": "any_text"},
        "end": {"type": "token", "token": ID["</think>"]}}}
    m = GrammarMatcher(compiler.compile_structural_tag(fmt))
    assert allowed(m) == {ID["<think>"]}
    tokens = [ID["<think>"], *spell("</think>"), ID["hello"], ID["</think>"], STOP]
    assert feed(m, tokens) == len(tokens) and m.is_terminated()
    for token, words in ((ID["hello"], "not a special or added token"), (STOP, "stop token"),
                         ("<|none|>", "no special or added token")):
        with pytest.raises(StructuralTagError, match=words):
            compiler.compile_structural_tag({"type": "structural_tag", "format": {"type": "token", "token": token}})


def test_a_stop_token_named_as_text_stays_a_stop_token(compiler):
    g = compiler.compile_structural_tag({"type": "structural_tag", "format": {"type": "const_string",
                                                                              "value": "ok<|im_end|>"}})
    assert g.token_literals == {}
    m = GrammarMatcher(g)
    assert feed(m, ids("ok")) == 1 and STOP not in allowed(m)
    assert m.accept_string("<|im_end|>") and STOP in allowed(m)


def test_jump_forward_inside_tags(compiler):
    flexible = GrammarMatcher(compiler.compile_structural_tag(tool_tag()))
    assert flexible.accept_token(ID["<tool_call>"])
    assert flexible.find_jump_forward_string() == '\n{"name": "get_weather", "arguments": {'  # then whitespace or a key
    m = GrammarMatcher(compiler.compile_structural_tag(tool_tag(), any_whitespace=False, separators=(", ", ": ")))
    assert m.find_jump_forward_string() == ""  # free text
    assert m.accept_token(ID["<tool_call>"])
    assert m.find_jump_forward_string() == '\n{"name": "get_weather", "arguments": {"city": "'  # begin + the key
    assert m.accept_string('\n{"name": "get_weather", "arguments": {"city": "Paris"')
    assert m.find_jump_forward_string() == "}}\n</tool_call>"  # the object's end and the tag's, as text
    assert m.accept_string("}")
    assert m.find_jump_forward_string() == "}\n</tool_call>"
    jumped = m.fork()
    assert jumped.accept_string("}\n</tool_call>") and jumped.is_completed()
    assert m.accept_string("}\n") and m.accept_token(ID["</tool_call>"]) and m.is_completed()


def test_bytes_no_text_holds_are_refused(compiler):
    m = GrammarMatcher(compiler.compile_structural_tag(tool_tag()))
    assert not m.accept_string(b"\xff\x00\x00\x01") and not m.accept_token(ID["\xff"])
    literal = compiler.compile_structural_tag(tool_tag()).token_literals[ID["<tool_call>"]]
    assert not m.accept_string(literal)  # a literal's bytes are the token's, never text
    assert m.accept_token(ID["<tool_call>"]) and m.num_accepted_tokens == 1
    m.rollback(1)
    assert m.num_accepted_tokens == 0 and ID["<tool_call>"] in allowed(m)


# ------------------------------------------------------------------------------------------------ Qwen3


def test_qwen_outputs_as_its_tokenizer_writes_them():
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    hf, info = load_hf_tokenizer("qwen"), load_tokenizer_info("qwen")
    compiler = GrammarCompiler(info)
    tc, etc, think, ethink = (hf.convert_tokens_to_ids(t) for t in ("<tool_call>", "</tool_call>", "<think>",
                                                                     "</think>"))
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
        {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
            {"begin": CALL_BEGIN, "content": {"type": "json_schema", "json_schema": SCHEMA},
             "end": "}\n</tool_call>"}]}]}}
    g = compiler.compile_structural_tag(tag)
    assert set(g.token_literals) == {tc, etc, think, ethink}
    text = ('<think>\nThe user wants the weather.\n</think>\n\nLet me check.\n<tool_call>\n{"name": "get_weather", '
            '"arguments": {"city": "Paris"}}\n</tool_call>')
    tokens = hf.encode(text, add_special_tokens=False)
    assert {tc, etc, think, ethink} <= set(tokens)  # the markers are single added tokens
    spelled = [t for piece in ("<", "think", ">", "x", "</", "think", ">") for t in
               hf.encode(piece, add_special_tokens=False)]
    stop = info.stop_token_ids[0]
    bm = allocate_token_bitmask(1, info.vocab_size)
    for seq in (tokens + [stop], spelled + [stop]):
        m = GrammarMatcher(g)
        for t in seq:
            m.fill_next_token_bitmask(bm)
            assert (int(bm[0, t >> 5]) >> (t & 31)) & 1, hf.decode([t])
            assert m.accept_token(t)
        assert m.is_terminated()
    m = GrammarMatcher(g)
    assert m.accept_token(think) and m.accept_string("x")
    m.fill_next_token_bitmask(bm)
    im_start = hf.convert_tokens_to_ids("<|im_start|>")  # special, named nowhere: forbidden
    assert not (int(bm[0, im_start >> 5]) >> (im_start & 31)) & 1
    assert not (int(bm[0, tc >> 5]) >> (tc & 31)) & 1  # no tool call inside the reasoning


def test_a_grammar_read_back_from_the_disk_cache_keeps_its_marker_tokens(compiler, tmp_path):
    info = compiler.tokenizer_info
    first = GrammarCompiler(info, cache_dir=tmp_path).compile_structural_tag(tool_tag())
    second_compiler = GrammarCompiler(info, cache_dir=tmp_path)
    again = second_compiler.compile_structural_tag(tool_tag())
    assert second_compiler.cache.disk_hits == 1 and again is not first
    assert again.token_literals == first.token_literals != {}
    for tokens in (ids("hello"), CALL[:1], CALL[:5], CALL):
        a, b = GrammarMatcher(first), GrammarMatcher(again)
        assert feed(a, tokens) == feed(b, tokens) == len(tokens)
        assert allowed(a) == allowed(b)
