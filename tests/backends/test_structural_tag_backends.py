"""Structural tags through the backend interface: leapgen's masks equal xgrammar's along Hermes-style
outputs on the Llama-3 vocabulary (free text, split triggers, a tool call with JSON arguments, text
after it; whitespace runs bounded alike), over the tokens both engines judge by their text: stop tokens, and ordinary tokens that are
whole UTF-8 text. (Where everything may follow, xgrammar's mask is all ones: it then allows tokens
holding a stray UTF-8 continuation byte, special tokens, and the padding bits past the vocabulary;
leapgen's masks are exact over UTF-8 and allow a special token only where a tag names its text.)
Backends without structural tags say so."""

from __future__ import annotations

import numpy as np
import pytest

from backend_helpers import mask_of
from leapgen.errors import GrammarError

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
          "required": ["city"]}
TAG = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
    {"begin": '<tool_call>\n{"name": "get_weather", "arguments": ', "content": {"type": "json_schema",
                                                                               "json_schema": SCHEMA,
                                                                               "max_whitespace_cnt": 20},
     "end": "}\n</tool_call>"},
    {"begin": '<tool_call>\n{"name": "get_time", "arguments": ', "content": {"type": "json_schema",
                                                                            "json_schema": {"type": "object"},
                                                                            "max_whitespace_cnt": 20},
     "end": "}\n</tool_call>"}]}}
OUTPUTS = ['Let me check. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n'
           '</tool_call> Done <tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
           'Use <tool or <tool_call>\n{"name": "get_time", "arguments": {"zone": [1, {"a": null}]}}\n</tool_call>']


def test_leapgen_and_xgrammar_masks_agree(backend_named, encode):
    pytest.importorskip("xgrammar")
    leap, xg = backend_named("leapgen"), backend_named("xgrammar")
    info = leap.tokenizer_info
    judged = np.zeros(info.vocab_size + 32, bool)
    for i, data in enumerate(info.token_bytes):
        try:
            judged[i] = bool(data) and bool(data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    judged[list(info.stop_token_ids)] = True
    compiled = (leap.compile_structural_tag(TAG), xg.compile_structural_tag(TAG))
    steps = 0
    for text in OUTPUTS:
        states = [backend.new_state(c) for backend, c in zip((leap, xg), compiled)]
        for token in encode(text):
            ours, theirs = mask_of(leap, states[0]), mask_of(xg, states[1])
            assert not (set(ours) - set(theirs)), (text, steps)  # never looser than xgrammar
            ours, theirs = ours[judged[ours]], theirs[judged[theirs]]
            assert np.array_equal(ours, theirs), (text, steps, len(ours), len(theirs))
            assert all(s.accept_token(token) for s in states)
            steps += 1
        assert all(s.is_completed() for s in states)
    assert steps > 80


def test_the_legacy_form_through_the_xgrammar_backend(backend_named, encode):
    pytest.importorskip("xgrammar")
    xg = backend_named("xgrammar")
    legacy = {"type": "structural_tag", "triggers": ["<tool_call>"], "structures": [
        {"begin": '<tool_call>\n{"name": "get_weather", "arguments": ', "schema": SCHEMA, "end": "}\n</tool_call>"}]}
    state = xg.new_state(xg.compile_structural_tag(legacy))
    assert all(state.accept_token(t) for t in encode(OUTPUTS[0].split(" Done")[0]))


def test_backends_without_structural_tags_refuse_them(backend_named):
    pytest.importorskip("llguidance")
    with pytest.raises(GrammarError, match="no structural tags"):
        backend_named("llguidance").compile_structural_tag(TAG)
