"""TokenizerInfo: token bytes, special/stop ids, padding, constructors, on a
hand-built vocabulary and on every real tokenizer family of ../shared/MODELS.md."""

import pickle
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from vocab_loaders import ALL_FAMILIES, HF_FAMILIES, load_encoder, load_hf_tokenizer, load_tokenizer_info

from leapgen.errors import TokenizerError
from leapgen.vocab import TokenizerInfo, VocabType

# ---------------------------------------------------------------- hand-built vocabularies


def test_raw_vocab_holes_padding_and_invariant():
    info = TokenizerInfo([b"a", "é", None, b"", b"<eos>", b"xyz"], vocab_size=8,
                         stop_token_ids=[4], special_token_ids=[4])
    assert info.vocab_type is VocabType.RAW and info.vocab_size == len(info) == 8
    assert info.token_bytes == (b"a", "é".encode(), b"", b"", b"", b"xyz", b"", b"")
    assert info.special_token_ids == {2, 3, 4, 6, 7}  # hole, empty, stop, padding
    assert info.stop_token_ids == (4,)
    assert all((b == b"") == (i in info.special_token_ids) for i, b in enumerate(info.token_bytes))


def test_byte_fallback_decoding():
    vocab = ["<unk>", "<0x41>", "<0x0A>", "<0xff>", "\u2581the", "\u2581\u2581", "<0xZZ>", "日本", "<0x4>"]
    info = TokenizerInfo(vocab, "byte_fallback", special_token_ids=[0])
    assert info.token_bytes == (b"", b"A", b"\n", b"\xff", b" the", b"  ", b"<0xZZ>", "日本".encode(), b"<0x4>")


def test_byte_level_decoding():
    # GPT-2 table: printable bytes map to themselves, others to U+0100 + k ("Ġ" is a space).
    vocab = ["hello", "\u0120world", "\u010a", "\u00e6\u0139\u00a5", "<|endoftext|>", "a b", "\u0100"]
    info = TokenizerInfo(vocab, VocabType.BYTE_LEVEL, special_token_ids=[4])
    assert info.token_bytes[:4] == (b"hello", b" world", b"\n", "日".encode())
    assert info.token_bytes[4] == b""
    assert info.token_bytes[5] == b"a b"  # a raw space is outside the table: UTF-8, as tokenizers does
    assert info.token_bytes[6] == b"\x00"


def test_token_byte_matrix_sorted_cached_read_only():
    info = TokenizerInfo([b"ab", b"", b"abc", b"x", b"yz", b"<s>"], special_token_ids=[5])
    matrix, lengths, ids = info.token_byte_matrix()
    assert matrix.dtype == np.uint8 and lengths.dtype == ids.dtype == np.int32
    assert ids.tolist() == [2, 0, 4, 3] and lengths.tolist() == [3, 2, 2, 1]
    assert matrix.tolist() == [list(b"abc"), list(b"ab\0"), list(b"yz\0"), list(b"x\0\0")]
    assert info.token_byte_matrix()[0] is matrix
    with pytest.raises(ValueError):
        matrix[0, 0] = 1


def test_immutable_and_fingerprint():
    info = TokenizerInfo([b"a", b"b"], stop_token_ids=[1])
    with pytest.raises(AttributeError):
        info.vocab_size = 3
    fp = info.fingerprint
    assert len(fp) == 64 and int(fp, 16) >= 0
    assert TokenizerInfo([b"a", b"b"], stop_token_ids=[1]) == info
    assert hash(TokenizerInfo([b"a", b"b"], stop_token_ids=[1])) == hash(info)
    for other in (TokenizerInfo([b"a", b"b"]), TokenizerInfo([b"c", b"b"], stop_token_ids=[1]),
                  TokenizerInfo([b"a", b"b"], stop_token_ids=[1], vocab_size=3),
                  TokenizerInfo(["a", "b"], "byte_level", stop_token_ids=[1])):
        assert other.fingerprint != fp


def test_pickle_round_trip_keeps_caches_read_only():
    info = TokenizerInfo([b"a", b"bc"], stop_token_ids=[0])
    info.token_byte_matrix()
    copy = pickle.loads(pickle.dumps(info))
    assert copy == info and copy.token_bytes == info.token_bytes
    assert not copy.token_byte_matrix()[0].flags.writeable


def test_import_is_light():
    code = "import sys, leapgen.vocab; print(sorted({'torch', 'transformers', 'tokenizers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout
    assert out.strip() == "[]"


def test_vocab_size_truncation_drops_only_special_ids():
    info = TokenizerInfo([b"a", b"b", b"<img>"], vocab_size=2, special_token_ids=[2])
    assert info.token_bytes == (b"a", b"b") and info.special_token_ids == frozenset()
    with pytest.raises(TokenizerError, match="non-special token 2"):
        TokenizerInfo([b"a", b"b", b"c"], vocab_size=2)


@pytest.mark.parametrize("args, kwargs, match", [
    (([b"a"], "wordpiece"), {}, "unknown vocab_type"),
    (("abc",), {}, "sequence"),
    (([b"a", 3],), {}, "token 1 is a int"),
    (([b"\xff"], "byte_level"), {}, "not UTF-8"),
    (([b"a"],), {"stop_token_ids": [1]}, r"stop_token_ids: 1 is not a token id"),
    (([b"a"],), {"special_token_ids": [-1]}, "special_token_ids"),
    (([b"a"],), {"vocab_size": "2"}, "vocab_size must be an int"),
])
def test_bad_input_raises(args, kwargs, match):
    with pytest.raises(TokenizerError, match=match):
        TokenizerInfo(*args, **kwargs)


def test_from_huggingface_rejects_unknown_forms():
    with pytest.raises(TokenizerError, match="fast tokenizer"):
        TokenizerInfo.from_huggingface(object())
    tokenizers = pytest.importorskip("tokenizers")
    wordpiece = tokenizers.Tokenizer(tokenizers.models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}))
    wordpiece.decoder = tokenizers.decoders.WordPiece()
    with pytest.raises(TokenizerError, match="WordPiece"):
        TokenizerInfo.from_huggingface(wordpiece)


def test_from_tiktoken_file_and_errors(tmp_path):
    path = tmp_path / "tiny.tiktoken"
    path.write_text("YQ== 0\nYg== 1\nYWI= 3\n")  # a, b, ab; id 2 is a hole
    info = TokenizerInfo.from_tiktoken(path, special_tokens={"<|endoftext|>": 4}, vocab_size=6)
    assert info.token_bytes == (b"a", b"b", b"", b"ab", b"", b"")
    assert info.stop_token_ids == (4,) and info.special_token_ids == {2, 4, 5}
    assert TokenizerInfo.from_tiktoken({b"a": 0, b"b": 1}).token_bytes == (b"a", b"b")
    path.write_text("YQ== 0\nYg==\n")
    with pytest.raises(TokenizerError, match=r"tiny.tiktoken:2"):
        TokenizerInfo.from_tiktoken(path)
    with pytest.raises(TokenizerError, match="cannot read"):
        TokenizerInfo.from_tiktoken(tmp_path / "missing.tiktoken")
    with pytest.raises(TokenizerError, match="is negative or a rank"):
        TokenizerInfo.from_tiktoken({b"a": 0}, special_tokens={"<|endoftext|>": 0})


# ---------------------------------------------------------------- real tokenizers

EXPECTED = {  # family: (vocab type, vocab size, number of ranked/model tokens, a stop token)
    "gpt2": ("byte_level", 50_257, 50_256, "<|endoftext|>"),
    "llama3": ("byte_level", 128_257, 128_000, "<|eot_id|>"),
    "qwen": ("byte_level", 151_669, 151_643, "<|im_end|>"),
    "smollm2": ("byte_level", 49_152, 49_135, "<|im_end|>"),
    "llama2": ("byte_fallback", 32_000, 31_997, "</s>"),
    "mistral": ("byte_fallback", 32_000, 31_997, "</s>"),
    "cl100k": ("raw", 100_277, 100_256, "<|endoftext|>"),
    "o200k": ("raw", 200_019, 199_998, "<|endoftext|>"),
}
STOP_IDS = {"gpt2": [50256], "llama3": [128001, 128009], "qwen": [151645], "smollm2": [2],
            "llama2": [2], "mistral": [2], "cl100k": [100257], "o200k": [199999]}

SMOLLM2_MISSING_BYTES = {4, 6, 19, 20, 22, 29, 192, 193, 241, 242, *range(245, 256)}
TEXTS = [unicodedata.normalize("NFC", text) for text in (  # Qwen normalizes to NFC
    "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    'def f(x):\n    return {"a": [1, 2.5e-3, null, true]}  # ok',
    '{"name": "Ada", "age": 36, "tags": ["x", "y"]}',
    "日本語のトークナイザー 中文 한국어 Ωμέγα Икс हिन्दी",
    "emoji \U0001f680\U0001f525\U0001f44d\U0001f468\u200d\U0001f469\u200d\U0001f467 mixed",
    "   leading\n\ttabs and  spaces   \r\n windows lines \r\n", "\n\n\n", "  ", " ", "a",
    "ALLCAPS 1234567890 3.14159 0xDEADBEEF 99.99% don't I'll", "caf\u00e9 cafe\u0301 na\u00efve \u00e1\u031bz",
    "\x00\x01\x7f control \u2581 lower-block and <0x41> literal",
)]


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_family_shape(family):
    info = load_tokenizer_info(family)
    vtype, size, n_plain, _ = EXPECTED[family]
    assert (info.vocab_type.value, info.vocab_size) == (vtype, size)
    assert info.vocab_size - len(info.special_token_ids) == n_plain
    assert all((b == b"") == (i in info.special_token_ids) for i, b in enumerate(info.token_bytes))
    missing = {b for b in range(256) if bytes([b]) not in info.token_bytes}
    # SmolLM2 has no token for 6 control characters, the never-valid UTF-8 bytes and the
    # lead bytes 0xF1, 0xF2 (U+40000..U+BFFFF): such text cannot be generated with it.
    assert missing == (SMOLLM2_MISSING_BYTES if family == "smollm2" else set())


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_family_stop_and_special_ids(family):
    info = load_tokenizer_info(family)
    assert set(STOP_IDS[family]) <= set(info.stop_token_ids) <= info.special_token_ids
    assert len(set(info.stop_token_ids)) == len(info.stop_token_ids)
    if family in HF_FAMILIES:
        tok = load_hf_tokenizer(family)
        assert info.stop_token_ids[0] == tok.eos_token_id
        assert tok.convert_tokens_to_ids(EXPECTED[family][3]) in info.stop_token_ids
        assert set(tok.added_tokens_decoder) <= info.special_token_ids
        assert set(tok.all_special_ids) <= info.special_token_ids


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_family_retokenized_text_round_trips(family):
    info, encode = load_tokenizer_info(family), load_encoder(family)
    for text in TEXTS:
        ids = encode(text)
        assert not set(ids) & info.special_token_ids, text
        got = b"".join(info.token_bytes[i] for i in ids)
        expected = text.encode()
        if info.vocab_type is VocabType.BYTE_FALLBACK:  # spaces are "▁": a literal "▁" reads as one
            expected = expected.replace("\u2581".encode(), b" ")
        if info.add_prefix_space:  # SentencePiece prepends "▁" to the text
            expected = b" " + expected
        assert got == expected, (family, text)


@pytest.mark.parametrize("family", HF_FAMILIES)
def test_family_token_bytes_match_hf_decode(family):
    info, tok = load_tokenizer_info(family), load_hf_tokenizer(family)
    ids = [i for i, b in enumerate(info.token_bytes) if b]
    decoded = tok.batch_decode([[i] for i in ids])
    checked = 0
    for i, text in zip(ids, decoded):
        try:
            mine = info.token_bytes[i].decode("utf-8")  # partial UTF-8 tokens: not comparable
        except UnicodeDecodeError:
            continue
        if info.vocab_type is VocabType.BYTE_FALLBACK and mine.startswith(" "):
            mine = mine[1:]  # the decoder strips the first token's prefix space
        assert text == mine, (family, i)
        checked += 1
    assert checked > 0.9 * len(ids)


@pytest.mark.parametrize("family", ["llama3", "llama2"])
def test_raw_tokenizers_object_gives_same_bytes(family):
    tok = load_hf_tokenizer(family)
    info = TokenizerInfo.from_huggingface(tok.backend_tokenizer)
    assert info.token_bytes == load_tokenizer_info(family).token_bytes
    assert info.stop_token_ids  # found by name without an eos_token_id


def test_mistral_pieces():
    info = load_tokenizer_info("mistral")
    assert info.token_bytes[3 + 0x41] == b"A" and info.token_bytes[3 + 0x0A] == b"\n"
    assert b" the" in info.token_bytes and info.add_prefix_space


@pytest.mark.parametrize("family", ["qwen", "cl100k"])
def test_padding_ids_are_special(family):
    base = load_tokenizer_info(family)
    n = base.vocab_size
    if family == "qwen":
        info = TokenizerInfo.from_huggingface(load_hf_tokenizer(family), vocab_size=n + 267)
    else:
        info = TokenizerInfo(list(base.token_bytes), vocab_size=n + 267,
                             special_token_ids=base.special_token_ids, stop_token_ids=base.stop_token_ids)
    assert info.vocab_size == n + 267 and info.token_bytes[:n] == base.token_bytes
    assert set(range(n, n + 267)) <= info.special_token_ids
    assert info.stop_token_ids == base.stop_token_ids and info.fingerprint != base.fingerprint
    _, _, ids = info.token_byte_matrix()
    assert ids.max() < n


@pytest.mark.parametrize("family", ["llama3", "o200k"])
def test_family_byte_matrix(family):
    info = load_tokenizer_info(family)
    matrix, lengths, ids = info.token_byte_matrix()
    assert len(ids) == info.vocab_size - len(info.special_token_ids)
    assert np.all(np.diff(lengths) <= 0) and lengths[-1] >= 1
    for row in range(0, len(ids), 997):
        assert matrix[row, :lengths[row]].tobytes() == info.token_bytes[ids[row]]
        assert not matrix[row, lengths[row]:].any()
