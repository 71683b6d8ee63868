"""Jump-forward through a structural tag whose markers are single added tokens (Qwen3's tokenizer,
no model): the engine's output text holds the markers' text, the forced begin and end are
retokenized into the marker tokens, and the matcher takes them."""

from __future__ import annotations

import pytest

from leapgen import GrammarMatcher
from leapgen.engine.jump_forward import try_jump_forward

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TAG = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
    {"begin": '<tool_call>\n{"name": "get_weather", "arguments": ',
     "content": {"type": "json_schema", "json_schema": SCHEMA}, "end": "}\n</tool_call>"}]}}


@pytest.fixture(scope="module")
def manager():
    pytest.importorskip("torch")
    from vocab_loaders import load_hf_tokenizer

    from leapgen.engine.grammar_manager import GrammarManager

    hf = load_hf_tokenizer("qwen")
    return GrammarManager(hf, len(hf), [hf.convert_tokens_to_ids("<|im_end|>")], compile_in_process=False), hf


def test_forced_text_around_marker_tokens(manager):
    from leapgen.engine import SamplingParams

    grammar, hf = manager
    compiled, _ = grammar.compile(SamplingParams(structural_tag=TAG))
    call, end = hf.convert_tokens_to_ids("<tool_call>"), hf.convert_tokens_to_ids("</tool_call>")
    assert grammar.token_text_bytes[call] == b"<tool_call>" and grammar.tokenizer_info.token_bytes[call] == b""

    def encode(text):
        return hf.encode(text, add_special_tokens=False)

    def text_of(ids):
        return b"".join(grammar.token_text_bytes[t] for t in ids).decode("utf-8")

    m = GrammarMatcher(compiled)
    ids = encode("Let me check.\n") + [call]
    assert all(m.accept_token(t) for t in ids)
    jump = try_jump_forward(m, ids, text_of(ids), encode, max_tokens=200, healing=grammar.healing)
    assert jump.forced_text == '\n{"name": "get_weather", "arguments": {"city": "'
    assert jump.common_prefix == len(ids) and jump.new_ids[:len(ids)] == ids  # the marker token stays
    ids = jump.new_ids
    full = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "'
    assert hf.decode(ids) == text_of(ids) and full.startswith(text_of(ids))  # healing may hold back ' "'
    assert len(text_of(ids)) >= len(full) - 2
    more = encode(full[len(text_of(ids)):] + 'Paris"}')
    assert all(m.accept_token(t) for t in more)
    ids += more
    jump = try_jump_forward(m, ids, text_of(ids), encode, max_tokens=200, healing=grammar.healing)
    assert jump.forced_text == "}\n</tool_call>" and jump.new_ids[-1] == end  # retokenized into the token
    assert text_of(jump.new_ids).endswith('"Paris"}}\n</tool_call>') and m.is_completed()
