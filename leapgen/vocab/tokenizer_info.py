"""``TokenizerInfo``: a model's vocabulary as exact bytes per token id.

The grammar layer walks automata over bytes; this module turns a tokenizer's
own token strings into the bytes each token contributes to the output text,
for the three vocabulary encodings in use (see :class:`VocabType`), and records
which ids must never match grammar text (special, added and padding ids).
"""

from __future__ import annotations

import binascii
import hashlib
import os
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

import numpy as np

from leapgen.errors import TokenizerError
from leapgen.vocab.hf import huggingface_vocab
from leapgen.vocab.vocab_type import DEFAULT_STOP_TOKEN_STRINGS, VocabType

__all__ = ["VocabType", "TokenizerInfo", "DEFAULT_STOP_TOKEN_STRINGS", "decode_token_strings"]


def _byte_level_table() -> dict[int, int]:
    """``str.translate`` table: byte-level character -> ``chr(byte)``; other
    Latin-1 characters -> U+0100, which makes ``encode("latin-1")`` fail."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    table = {c: 0x100 for c in range(256)}
    extra = 0
    for b in range(256):
        if b in printable:
            table[b] = b
        else:
            table[256 + extra] = b
            extra += 1
    return table


def _decode_byte_level(tokens: Sequence[str]) -> list[bytes]:
    # As tokenizers' ByteLevel decoder: a token with any character outside the
    # table is taken as its UTF-8 bytes.
    table = _byte_level_table()
    out = []
    for tok in tokens:
        try:
            out.append(tok.translate(table).encode("latin-1"))
        except UnicodeEncodeError:
            out.append(tok.encode("utf-8"))
    return out


def _decode_byte_fallback(tokens: Sequence[str]) -> list[bytes]:
    # As tokenizers' Replace("▁", " ") + ByteFallback decoders.
    out = []
    for tok in tokens:
        if len(tok) == 6 and tok.startswith("<0x") and tok[5] == ">":
            try:
                out.append(bytes((int(tok[3:5], 16),)))
                continue
            except ValueError:
                pass
        out.append(tok.replace("\u2581", " ").encode("utf-8"))
    return out


def _special_text(tok) -> str | None:
    """The text of a special id's ``encoded_vocab`` entry (None: a hole, or bytes that are not UTF-8)."""
    if isinstance(tok, str):
        return tok
    if isinstance(tok, (bytes, bytearray, memoryview)):
        try:
            return bytes(tok).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def decode_token_strings(encoded_vocab: Sequence[bytes | str | None], vocab_type: "VocabType | str") -> list[bytes]:
    """Every entry's bytes as the tokenizer's decoder writes them, special or not.

    The decoding of :class:`TokenizerInfo` without its special-token rule:
    a control token such as ``"<|im_end|>"`` gives its spelling, ``None`` and
    undecodable entries ``b""`` (xgrammar's ``decoded_vocab``).

    Parameters
    ----------
    encoded_vocab : sequence of bytes, str or None
        Token strings by id (not mutated).
    vocab_type : VocabType or str

    Returns
    -------
    list of bytes
        One entry per input entry.

    Raises
    ------
    TokenizerError
        An unknown ``vocab_type``.
    """
    try:
        vtype = VocabType(vocab_type.lower() if isinstance(vocab_type, str) else vocab_type)
    except ValueError:
        raise TokenizerError(f"unknown vocab_type {vocab_type!r}") from None
    strs = []
    for tok in encoded_vocab:
        if isinstance(tok, (bytes, bytearray, memoryview)):
            tok = bytes(tok)
            if vtype is not VocabType.RAW:
                tok = tok.decode("utf-8", errors="replace")
        elif isinstance(tok, str) and vtype is VocabType.RAW:
            tok = tok.encode("utf-8", errors="surrogatepass")
        strs.append(tok if isinstance(tok, (bytes, str)) else "")
    if vtype is VocabType.RAW:
        return strs
    return _decode_byte_level(strs) if vtype is VocabType.BYTE_LEVEL else _decode_byte_fallback(strs)


def _check_ids(ids: Iterable[int] | None, vocab_size: int, what: str) -> list[int]:
    if ids is None:
        return []
    if isinstance(ids, (int, np.integer)):
        ids = [ids]
    out = []
    for i in ids:
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or not 0 <= i < vocab_size:
            raise TokenizerError(f"{what}: {i!r} is not a token id in [0, {vocab_size})")
        out.append(int(i))
    return out


class TokenizerInfo:
    """A model's vocabulary: token id -> the exact bytes it adds to the text.

    Immutable and thread-safe once built; build it once per model and share it.

    Parameters
    ----------
    encoded_vocab : sequence of bytes, str or None, length n
        Entry ``i`` is token ``i`` as the tokenizer writes it (see `vocab_type`);
        ``None`` marks an id with no token (a hole), which is treated as special.
    vocab_type : VocabType or str, default "raw"
        How entries encode bytes: a :class:`VocabType` or its lowercase value
        (``"raw"``, ``"byte_fallback"``, ``"byte_level"``). ``bytes`` entries are
        read as UTF-8 for the two non-raw types; ``str`` entries of a raw vocab too.
    vocab_size : int, optional
        Width of the model's logits; defaults to ``n``. A model's logits are often
        padded past the tokenizer (Qwen2.5: 151,936 for 151,665 tokens): ids
        ``n .. vocab_size - 1`` are padding and treated as special. A smaller
        value drops trailing ids, which must all be special or holes (the
        Llama-3.2 tokenizer has 128,257 ids, its text models 128,256 logits).
    stop_token_ids : iterable of int, optional
        Ids that end generation (the matcher allows them where the grammar may
        end). They are also special. Default: none.
    special_token_ids : iterable of int, optional
        Ids that never match grammar text (control, added tokens).
    add_prefix_space : bool, default False
        Whether the tokenizer prepends a space to the text it encodes
        (SentencePiece's ``▁`` before the first word). Informational: token bytes
        are unaffected.

    Raises
    ------
    TokenizerError
        An unknown `vocab_type`, an entry that is not bytes/str/None, a
        `vocab_size` below 1 (an empty vocabulary) or one that would drop a
        non-special token, or an id out of range.

    Notes
    -----
    Invariant: ``token_bytes[i] == b""`` exactly when ``i`` is in
    ``special_token_ids``. Special ids are the given ones, stop ids, holes,
    padding ids and tokens whose bytes are empty. The caller's sequences are
    not mutated and not kept.
    """

    __slots__ = ("_vocab_type", "_vocab_size", "_token_bytes", "_special", "_stop",
                 "_add_prefix_space", "_fingerprint", "_matrix", "_special_texts")

    def __init__(self, encoded_vocab: Sequence[bytes | str | None],
                 vocab_type: VocabType | str = VocabType.RAW, *, vocab_size: int | None = None,
                 stop_token_ids: Iterable[int] | None = None,
                 special_token_ids: Iterable[int] | None = None,
                 add_prefix_space: bool = False):
        try:
            vtype = VocabType(vocab_type.lower() if isinstance(vocab_type, str) else vocab_type)
        except ValueError:
            names = ", ".join(repr(t.value) for t in VocabType)
            raise TokenizerError(f"unknown vocab_type {vocab_type!r}; expected one of {names}") from None
        if isinstance(encoded_vocab, (str, bytes)) or not isinstance(encoded_vocab, Iterable):
            raise TokenizerError("encoded_vocab must be a sequence of bytes/str indexed by token id, "
                                 f"got {type(encoded_vocab).__name__}")
        encoded_vocab = list(encoded_vocab)
        n = len(encoded_vocab)
        if vocab_size is None:
            vocab_size = n
        if not isinstance(vocab_size, (int, np.integer)) or isinstance(vocab_size, bool):
            raise TokenizerError(f"vocab_size must be an int, got {vocab_size!r}")
        if vocab_size < 1:  # no logits to mask: a bitmask needs one word (allocate_token_bitmask refuses 0 too)
            raise TokenizerError(f"a vocabulary needs at least one token id (got {n} tokens and vocab_size "
                                 f"{vocab_size}); pass vocab_size= for a model whose ids are all special")
        special = set(_check_ids(special_token_ids, max(n, vocab_size), "special_token_ids"))
        if vocab_size < n:
            dropped = [i for i in range(vocab_size, n) if encoded_vocab[i] is not None and i not in special]
            if dropped:
                raise TokenizerError(f"vocab_size {vocab_size} is smaller than the {n} tokens of the "
                                     f"vocabulary and would drop non-special token {dropped[0]}")
            encoded_vocab = encoded_vocab[:vocab_size]
            n = vocab_size
            special = {i for i in special if i < n}
        stop = list(dict.fromkeys(_check_ids(stop_token_ids, vocab_size, "stop_token_ids")))
        special.update(stop)
        special.update(range(n, vocab_size))

        ids, strs = [], []
        special_texts: dict[int, str] = {}
        for i, tok in enumerate(encoded_vocab):
            if tok is None or i in special:
                special.add(i)
                text = _special_text(tok)
                if text:
                    special_texts[i] = text
                continue
            if isinstance(tok, (bytes, bytearray, memoryview)):
                tok = bytes(tok)
                if vtype is not VocabType.RAW:
                    try:
                        tok = tok.decode("utf-8")
                    except UnicodeDecodeError:
                        raise TokenizerError(f"token {i} ({tok!r}) is not UTF-8 text; "
                                             f"a {vtype.value} vocabulary holds token strings") from None
            elif isinstance(tok, str):
                if vtype is VocabType.RAW:
                    tok = tok.encode("utf-8")
            else:
                raise TokenizerError(f"token {i} is a {type(tok).__name__}, expected bytes, str or None")
            ids.append(i)
            strs.append(tok)
        if vtype is VocabType.BYTE_LEVEL:
            decoded = _decode_byte_level(strs)
        elif vtype is VocabType.BYTE_FALLBACK:
            decoded = _decode_byte_fallback(strs)
        else:
            decoded = strs
        table = [b""] * vocab_size
        for i, b in zip(ids, decoded):
            if b:
                table[i] = b
            else:
                special.add(i)

        self._vocab_type = vtype
        self._vocab_size = int(vocab_size)
        self._token_bytes = tuple(table)
        self._special = frozenset(special)
        self._stop = tuple(stop)
        self._add_prefix_space = bool(add_prefix_space)
        self._fingerprint: str | None = None
        self._matrix: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._special_texts = special_texts

    # -- constructors ---------------------------------------------------------------------

    @classmethod
    def from_huggingface(cls, tokenizer, *, vocab_size: int | None = None,
                         stop_token_ids: Iterable[int] | None = None) -> TokenizerInfo:
        """Build from a Hugging Face tokenizer.

        Parameters
        ----------
        tokenizer : transformers fast tokenizer or tokenizers.Tokenizer
            Any object with a ``backend_tokenizer`` (``PreTrainedTokenizerFast``,
            transformers 5's ``TokenizersBackend``) or a raw ``tokenizers.Tokenizer``.
            Read, not mutated.
        vocab_size : int, optional
            The model's logits width (``model.config.vocab_size``) when it exceeds
            the tokenizer's size; defaults to the tokenizer's size (added tokens included).
        stop_token_ids : iterable of int, optional
            Overrides the default: the EOS id, then every special token named in
            :data:`DEFAULT_STOP_TOKEN_STRINGS` (``<|im_end|>``, ``<|eot_id|>``...),
            deduplicated, in that order.

        Returns
        -------
        TokenizerInfo
            Vocab type detected from the decoder (``ByteLevel`` -> BYTE_LEVEL;
            ``ByteFallback``, ``Metaspace`` or ``▁`` replacement -> BYTE_FALLBACK).
            All added tokens (special or not) and the tokenizer's special tokens are special.

        Raises
        ------
        TokenizerError
            The object is not a fast HF tokenizer, or its decoder is of a kind
            whose tokens do not map to bytes (WordPiece, none).
        """
        return cls(**huggingface_vocab(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids))

    @classmethod
    def from_tiktoken(cls, ranks: str | os.PathLike | Mapping[bytes, int], *,
                      special_tokens: Mapping[str, int] | None = None, vocab_size: int | None = None,
                      stop_token_ids: Iterable[int] | None = None) -> TokenizerInfo:
        """Build a RAW vocabulary from tiktoken BPE ranks (rank = token id).

        Parameters
        ----------
        ranks : str, os.PathLike or mapping of bytes to int
            A ``.tiktoken`` file (one ``<base64 token> <rank>`` per line), or the
            mapping itself (tiktoken's ``mergeable_ranks``). Not mutated.
        special_tokens : mapping of str to int, optional
            Special token string -> id (cl100k: ``{"<|endoftext|>": 100257, ...}``).
            Ids not covered by a rank or a special token are holes (special).
        vocab_size : int, optional
            The model's logits width; defaults to the largest id + 1.
        stop_token_ids : iterable of int, optional
            Default: the special tokens named in :data:`DEFAULT_STOP_TOKEN_STRINGS`.

        Returns
        -------
        TokenizerInfo
            A RAW vocabulary.

        Raises
        ------
        TokenizerError
            An unreadable file, a malformed line (with its line number), a negative
            or repeated id, or a special token whose id is also a rank.
        """
        if isinstance(ranks, (str, os.PathLike)):
            ranks = _read_tiktoken_file(ranks)
        elif not isinstance(ranks, Mapping):
            raise TokenizerError(f"ranks must be a path or a mapping bytes -> rank, got {type(ranks).__name__}")
        special_tokens = dict(special_tokens or {})
        by_id: dict[int, bytes | str] = {}
        for tok, rank in ranks.items():
            if not isinstance(tok, bytes) or not isinstance(rank, int) or rank < 0 or rank in by_id:
                raise TokenizerError(f"bad or repeated tiktoken rank {rank!r} for token {tok!r}")
            by_id[rank] = tok
        for name, i in special_tokens.items():
            if not isinstance(i, int) or i < 0 or i in by_id:
                raise TokenizerError(f"special token {name!r} has id {i!r}, which is negative or a rank")
            by_id[i] = name
        n = max(by_id, default=-1) + 1
        vocab: list[bytes | str | None] = [None] * n
        for i, tok in by_id.items():
            vocab[i] = tok
        if stop_token_ids is None:
            stop_token_ids = [special_tokens[s] for s in DEFAULT_STOP_TOKEN_STRINGS if s in special_tokens]
        return cls(vocab, VocabType.RAW, vocab_size=vocab_size, stop_token_ids=stop_token_ids,
                   special_token_ids=special_tokens.values())

    # -- read-only views ------------------------------------------------------------------

    @property
    def vocab_type(self) -> VocabType:
        """VocabType: how the source tokenizer wrote token bytes."""
        return self._vocab_type

    @property
    def vocab_size(self) -> int:
        """int: the model's logits width (padding ids included)."""
        return self._vocab_size

    @property
    def token_bytes(self) -> tuple[bytes, ...]:
        """tuple of bytes, length vocab_size: each token's bytes; ``b""`` for special ids."""
        return self._token_bytes

    @property
    def special_token_ids(self) -> frozenset[int]:
        """frozenset of int: ids that never match grammar text (special, added,
        stop, padding, holes, empty tokens)."""
        return self._special

    @property
    def special_token_texts(self) -> Mapping[int, str]:
        """Mapping of int to str (read-only): the text of each special id that has one, as its
        ``encoded_vocab`` entry writes it (added and control tokens: ``"<tool_call>"``,
        ``"<|im_end|>"``); holes and padding ids have none. Grammars never match these ids as
        text; a structural tag may name them (see
        :meth:`~leapgen.GrammarCompiler.compile_structural_tag`)."""
        return MappingProxyType(self._special_texts)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """tuple of int: ids that end generation, in priority order."""
        return self._stop

    @property
    def add_prefix_space(self) -> bool:
        """bool: whether the tokenizer prepends a space to encoded text."""
        return self._add_prefix_space

    @property
    def fingerprint(self) -> str:
        """str: hex SHA-256 of the vocab type, vocab size, every token's bytes,
        the stop ids and the special tokens' texts; equal fingerprints give
        equal masks (cache keys)."""
        if self._fingerprint is None:
            lengths = np.fromiter(map(len, self._token_bytes), np.int32, self._vocab_size)
            h = hashlib.sha256(b"leapgen-vocab-1\0")
            h.update(self._vocab_type.value.encode() + struct.pack("<q", self._vocab_size))
            h.update(lengths.astype("<i4").tobytes())
            h.update(b"".join(self._token_bytes))
            h.update(np.asarray(self._stop, "<i8").tobytes())
            h.update(json.dumps(sorted(self._special_texts.items())).encode())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def token_byte_matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The non-special tokens' bytes as padded arrays, for vectorized walks.

        Rows are sorted by length, longest first (ties by id), so the rows still
        alive after ``k`` bytes are always a prefix ``[:count(lengths > k)]``.
        Computed once, then cached; the arrays are read-only and shared.

        Returns
        -------
        byte_matrix : numpy.ndarray of uint8, shape (n_tokens, max_len)
            Row ``r`` holds token ``token_ids[r]``'s bytes, zero-padded.
        lengths : numpy.ndarray of int32, shape (n_tokens,)
            Number of bytes of each row (>= 1), non-increasing.
        token_ids : numpy.ndarray of int32, shape (n_tokens,)
            Token id of each row.
        """
        if self._matrix is None:
            ids = [i for i, b in enumerate(self._token_bytes) if b]
            lens = np.fromiter((len(self._token_bytes[i]) for i in ids), np.int32, len(ids))
            order = np.argsort(-lens, kind="stable")
            token_ids = np.asarray(ids, np.int32)[order]
            lens = lens[order]
            flat = np.frombuffer(b"".join(self._token_bytes[i] for i in token_ids.tolist()), np.uint8)
            max_len = int(lens[0]) if len(lens) else 0
            matrix = np.zeros((len(lens), max_len), np.uint8)
            starts = np.cumsum(lens, dtype=np.int64) - lens
            rows = np.repeat(np.arange(len(lens)), lens)
            cols = np.arange(flat.size) - np.repeat(starts, lens)
            matrix[rows, cols] = flat
            for a in (matrix, lens, token_ids):
                a.setflags(write=False)
            self._matrix = (matrix, lens, token_ids)
        return self._matrix

    def __getstate__(self) -> dict:
        # The lazy caches are rebuilt after unpickling (keeps the arrays read-only).
        return {k: getattr(self, k) for k in self.__slots__ if k not in ("_fingerprint", "_matrix")}

    def __setstate__(self, state: dict) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        self._fingerprint = self._matrix = None

    def __len__(self) -> int:
        return self._vocab_size

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenizerInfo):
            return NotImplemented
        return self is other or self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return (f"TokenizerInfo(vocab_type={self._vocab_type.value!r}, vocab_size={self._vocab_size}, "
                f"n_special={len(self._special)}, stop_token_ids={self._stop})")


def _read_tiktoken_file(path: str | os.PathLike) -> dict[bytes, int]:
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise TokenizerError(f"cannot read tiktoken file {os.fspath(path)!r}: {e}") from e
    ranks = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            tok, rank = line.split()
            ranks[binascii.a2b_base64(tok)] = int(rank)
        except (ValueError, binascii.Error):
            raise TokenizerError(f"{os.fspath(path)}:{lineno}: expected '<base64 token> <rank>', "
                                 f"got {line[:60]!r}") from None
    return ranks
