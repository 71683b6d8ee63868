"""``TokenizerInfo.special_token_texts``: the texts of special and added tokens, kept for structural
tags whose markers are one such token (their bytes stay empty: no grammar matches them as text)."""

from __future__ import annotations

import pickle

import pytest

from leapgen import TokenizerInfo


def test_special_ids_keep_their_text_and_no_bytes():
    info = TokenizerInfo(["a", "b", "<tool_call>", None, b"<|end|>"], "byte_level", vocab_size=6,
                         special_token_ids=[2], stop_token_ids=[4])
    assert dict(info.special_token_texts) == {2: "<tool_call>", 4: "<|end|>"}  # no hole, no padding id
    assert info.token_bytes[2] == b"" and 2 in info.special_token_ids
    with pytest.raises(TypeError):
        info.special_token_texts[2] = "x"  # read-only
    assert dict(pickle.loads(pickle.dumps(info)).special_token_texts) == dict(info.special_token_texts)


def test_the_fingerprint_holds_the_texts():
    a = TokenizerInfo(["a", "<x>"], "raw", special_token_ids=[1])
    b = TokenizerInfo(["a", "<y>"], "raw", special_token_ids=[1])
    assert a.token_bytes == b.token_bytes and a.fingerprint != b.fingerprint


def test_hugging_face_added_tokens():
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    hf, info = load_hf_tokenizer("qwen"), load_tokenizer_info("qwen")
    for text in ("<tool_call>", "</tool_call>", "<think>", "</think>", "<|im_end|>"):
        i = hf.convert_tokens_to_ids(text)
        assert info.special_token_texts[i] == text and info.token_bytes[i] == b""
