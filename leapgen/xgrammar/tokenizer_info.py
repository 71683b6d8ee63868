"""xgrammar's ``TokenizerInfo`` and ``VocabType`` over leapgen's vocabulary.

The constructor, ``from_huggingface``, the metadata and the JSON round trip of
``xgrammar.TokenizerInfo``; underneath, a :class:`leapgen.vocab.TokenizerInfo`
(``native``) gives the token bytes every mask is computed from. What follows
xgrammar here rather than leapgen's own defaults:

- ``stop_token_ids`` given to the constructor, else the tokens whose text is
  one of :data:`DETECTION_STOP_TOKENS` (``"</s>"``, ``"<|endoftext|>"``...);
- ``from_huggingface``: the tokenizer's EOS alone (leapgen adds end-of-turn
  tokens); added tokens that are not special (Qwen3's ``<think>``) match
  their text; a ``vocab_size`` below the tokenizer's drops the ids past it.

Special tokens stay leapgen's (see the differences table of
:mod:`leapgen.xgrammar`): a tokenizer's control tokens never match text.
"""

from __future__ import annotations

import enum
import json
import threading
import warnings
from typing import Any

from leapgen.errors import DeserializeFormatError, InvalidJSONError, TokenizerError
from leapgen.vocab import TokenizerInfo as NativeTokenizerInfo
from leapgen.vocab import VocabType as NativeVocabType
from leapgen.vocab import decode_token_strings
from leapgen.xgrammar import serialization as ser

#: The token texts xgrammar takes as stop tokens when none are given.
DETECTION_STOP_TOKENS = frozenset(t.encode("utf-8") for t in (
    "</s>", "<|end_of_text|>", "<|eot_id|>", "<|endoftext|>", "<eos>", "<|eos|>", "<end_of_turn>",
    "<｜end▁of▁sentence｜>"))


class VocabType(enum.Enum):
    """How a vocabulary writes token bytes (xgrammar's values).

    Attributes
    ----------
    RAW : 0
        The tokens are the bytes (tiktoken).
    BYTE_FALLBACK : 1
        SentencePiece: ``"▁"`` is a space, ``"<0xNN>"`` a byte (Llama-2, Mistral).
    BYTE_LEVEL : 2
        GPT-2's byte-to-unicode table (GPT-2, Llama-3, Qwen).
    """

    RAW = 0
    BYTE_FALLBACK = 1
    BYTE_LEVEL = 2

    @property
    def native(self) -> NativeVocabType:
        """The same type in :class:`leapgen.vocab.VocabType`."""
        return NativeVocabType[self.name]


def _vocab_type(value) -> VocabType:
    if isinstance(value, VocabType):
        return value
    if isinstance(value, NativeVocabType):
        return VocabType[value.name]
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1, 2):
        return VocabType(value)
    if isinstance(value, str) and value.upper() in VocabType.__members__:
        return VocabType[value.upper()]
    raise TokenizerError(f"unknown vocab_type {value!r}; expected a VocabType (RAW, BYTE_FALLBACK, BYTE_LEVEL)")


def _stop_list(stop_token_ids) -> list[int] | None:
    if stop_token_ids is None:
        return None
    return [stop_token_ids] if isinstance(stop_token_ids, int) else list(stop_token_ids)


class TokenizerInfo:
    """A model's vocabulary for grammar-guided generation (``xgrammar.TokenizerInfo``).

    Parameters
    ----------
    encoded_vocab : list of str or bytes
        Token ``i`` as the tokenizer writes it (see ``vocab_type``); ``""``
        marks an id with no text (special).
    vocab_type : VocabType, default VocabType.RAW
        Also accepted: :class:`leapgen.vocab.VocabType`, 0/1/2, the names.
    vocab_size : int, optional
        The model's logits width; default ``len(encoded_vocab)``. Ids past the
        vocabulary are padding (special).
    stop_token_ids : int or list of int, optional
        Default: the tokens whose text is in :data:`DETECTION_STOP_TOKENS`.
    add_prefix_space : bool, default False
        Whether the tokenizer prepends a space to the text it encodes.

    An empty vocabulary (``TokenizerInfo([])``, xgrammar's way to build a
    matcher that only accepts strings) is accepted, as in xgrammar: leapgen's
    own :class:`leapgen.vocab.TokenizerInfo` refuses one, so :attr:`native`
    holds a single padding id (never allowed); :attr:`vocab_size` stays 0.

    Raises
    ------
    TokenizerError
        (also a RuntimeError) ``vocab_size`` below the vocabulary's length, a
        stop id outside ``[0, vocab_size)``, an entry that is not str/bytes,
        an unknown ``vocab_type``.

    Notes
    -----
    Immutable; share one per model. The caller's list is copied, not mutated.
    """

    def __init__(self, encoded_vocab, vocab_type: Any = VocabType.RAW, *, vocab_size: int | None = None,
                 stop_token_ids=None, add_prefix_space: bool = False):
        self._init(list(encoded_vocab), _vocab_type(vocab_type), vocab_size, _stop_list(stop_token_ids),
                   bool(add_prefix_space), special=None)

    def _init(self, encoded: list, vocab_type: VocabType, vocab_size: int | None, stop: list[int] | None,
              add_prefix_space: bool, special) -> None:
        n = len(encoded)
        if vocab_size is None:
            vocab_size = n
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < n:
            raise TokenizerError(f"vocab_size ({vocab_size!r}) must be an int at least the number of tokens in "
                                 f"the vocab ({n})")
        decoded = decode_token_strings(encoded, vocab_type.native)
        if stop is None:
            stop = [i for i, b in enumerate(decoded) if b in DETECTION_STOP_TOKENS]
        self._encoded = encoded
        self._decoded = decoded
        self._vocab_type = vocab_type
        self._vocab_size = vocab_size
        # leapgen's vocabulary refuses to be empty (no logits to mask); xgrammar's TokenizerInfo([]) is
        # a matcher that only accepts strings: the native vocabulary underneath gets one padding id
        # (special, never allowed), while vocab_size here stays 0
        self._native = NativeTokenizerInfo([None if t == "" or t == b"" else t for t in encoded],
                                           vocab_type.native, vocab_size=max(vocab_size, 1), stop_token_ids=stop,
                                           special_token_ids=special, add_prefix_space=add_prefix_space)
        self._lock = threading.Lock()
        self._index = self._bind_compiler = self._jump = None

    @classmethod
    def _create(cls, encoded, vocab_type, vocab_size, stop, add_prefix_space, special) -> "TokenizerInfo":
        obj = cls.__new__(cls)
        obj._init(encoded, vocab_type, vocab_size, stop, add_prefix_space, special)
        return obj

    # -- constructors -----------------------------------------------------------------------

    @staticmethod
    def from_huggingface(tokenizer, *, vocab_size: int | None = None, stop_token_ids=None) -> "TokenizerInfo":
        """From a Hugging Face fast tokenizer (``PreTrainedTokenizerFast``,
        transformers 5's ``TokenizersBackend``, or a ``tokenizers.Tokenizer``).

        Parameters
        ----------
        tokenizer
            Read, not mutated.
        vocab_size : int, optional
            The model's logits width (``model.config.vocab_size``); ids past
            the tokenizer's are padding, and a smaller value drops the
            tokenizer's ids past it (Llama-3.2's ``<|image|>``).
        stop_token_ids : int or list of int, optional
            Default: the tokenizer's ``eos_token_id`` alone (or, without one,
            the detected tokens of :data:`DETECTION_STOP_TOKENS`, with a warning).

        Returns
        -------
        TokenizerInfo
            Vocab type and ``add_prefix_space`` read from the tokenizer's
            decoder and pre-tokenizer.

        Raises
        ------
        ValueError
            ``stop_token_ids`` is an empty list.
        TokenizerError
            A slow / tiktoken / SentencePiece tokenizer (no ``tokenizer.json``
            pipeline), or a decoder whose tokens do not map to bytes.
        """
        from leapgen.vocab.hf import huggingface_vocab

        stop = _stop_list(stop_token_ids)
        if stop == []:
            raise ValueError("stop_token_ids cannot be empty")
        args = huggingface_vocab(tokenizer, stop_token_ids=[])
        encoded, special = args["encoded_vocab"], set(args["special_token_ids"])
        special -= _text_added_tokens(tokenizer)
        if vocab_size:
            encoded = (encoded + [None] * vocab_size)[:vocab_size]
            special = {i for i in special if i < vocab_size}
        else:
            vocab_size = len(encoded)
        if stop is None:
            eos = getattr(tokenizer, "eos_token_id", None)
            if isinstance(eos, int):
                stop = [eos]
            else:
                warnings.warn("When constructing TokenizerInfo from a huggingface tokenizer, stop_token_ids is "
                              "neither provided by user nor found from the tokenizer. It will be automatically "
                              "detected.", stacklevel=2)
        return TokenizerInfo._create(["" if t is None else t for t in encoded], _vocab_type(args["vocab_type"]),
                                     vocab_size, stop, args["add_prefix_space"], special)

    @staticmethod
    def from_vocab_and_metadata(encoded_vocab, metadata: str) -> "TokenizerInfo":
        """From the vocabulary and :meth:`dump_metadata`'s text.

        Raises
        ------
        InvalidJSONError
            ``metadata`` is not JSON.
        DeserializeFormatError
            A field is missing or malformed.
        """
        try:
            meta = json.loads(metadata)
        except (TypeError, ValueError) as e:
            raise InvalidJSONError(f"the tokenizer metadata is not valid JSON: {e}") from None
        if not isinstance(meta, dict):
            raise DeserializeFormatError("the tokenizer metadata is a JSON object")
        return TokenizerInfo._from_fields(list(encoded_vocab), meta, "tokenizer metadata")

    @staticmethod
    def _from_fields(encoded: list, meta: dict, what: str) -> "TokenizerInfo":
        vtype = ser.field(meta, "vocab_type", int, what)
        if vtype not in (0, 1, 2):
            raise DeserializeFormatError(f"{what}: vocab_type must be 0, 1 or 2, got {vtype}")
        size = ser.field(meta, "vocab_size", int, what)
        aps = ser.field(meta, "add_prefix_space", bool, what)
        stop = ser.int_list(ser.field(meta, "stop_token_ids", list, what), f"{what}: stop_token_ids")
        special = meta.get("special_token_ids")
        if special is not None:
            special = ser.int_list(special, f"{what}: special_token_ids")
        try:
            return TokenizerInfo._create(encoded, VocabType(vtype), size, stop, aps, special)
        except TokenizerError as e:
            raise DeserializeFormatError(f"{what} does not fit the vocabulary: {e}") from None

    # -- views ----------------------------------------------------------------------------------

    @property
    def native(self) -> NativeTokenizerInfo:
        """The :class:`leapgen.vocab.TokenizerInfo` underneath (masks are computed from it)."""
        return self._native

    @property
    def vocab_type(self) -> VocabType:
        return self._vocab_type

    @property
    def vocab_size(self) -> int:
        """The model's logits width (the bitmask covers ``ceil(vocab_size / 32)`` words); 0 for
        an empty vocabulary, whose :attr:`native` one holds a single padding id."""
        return self._vocab_size

    @property
    def add_prefix_space(self) -> bool:
        return self._native.add_prefix_space

    @property
    def prepend_space_in_tokenization(self) -> bool:
        """Deprecated name of :attr:`add_prefix_space` (warns, as xgrammar does)."""
        warnings.warn("prepend_space_in_tokenization is deprecated. Use add_prefix_space instead.", stacklevel=2)
        return self.add_prefix_space

    @property
    def decoded_vocab(self) -> list[bytes]:
        """Each entry's decoded text, special tokens' spellings included
        (``len(encoded_vocab)`` entries, padding ids not listed)."""
        return list(self._decoded)

    @property
    def stop_token_ids(self) -> list[int]:
        return list(self._native.stop_token_ids)

    @property
    def special_token_ids(self) -> list[int]:
        """Ids that never match grammar text and are not stop tokens: empty
        tokens, padding, and the tokenizer's special / control tokens."""
        stop = set(self._native.stop_token_ids)
        return sorted(i for i in self._native.special_token_ids if i not in stop)

    # -- serialization -----------------------------------------------------------------------------

    def _metadata(self) -> dict:
        return {"vocab_type": self._vocab_type.value, "vocab_size": self.vocab_size,
                "add_prefix_space": self.add_prefix_space, "stop_token_ids": self.stop_token_ids,
                "special_token_ids": self.special_token_ids}

    def dump_metadata(self) -> str:
        """xgrammar's metadata JSON (``vocab_type``, ``vocab_size``,
        ``add_prefix_space``, ``stop_token_ids``) plus ``special_token_ids``,
        so :meth:`from_vocab_and_metadata` rebuilds this vocabulary exactly."""
        return json.dumps(self._metadata(), separators=(",", ":"))

    def serialize_json(self) -> str:
        """The whole vocabulary as JSON text (versioned; read with :meth:`deserialize_json`)."""
        vocab = [t if isinstance(t, str) else {"b64": _b64(bytes(t))} for t in self._encoded]
        return ser.to_text({**self._metadata(), "encoded_vocab": vocab}, "TokenizerInfo")

    @staticmethod
    def deserialize_json(json_string: str) -> "TokenizerInfo":
        """Read :meth:`serialize_json`'s text.

        Raises
        ------
        InvalidJSONError, DeserializeFormatError, DeserializeVersionError
        """
        import base64

        doc = ser.load_document(json_string, "TokenizerInfo")
        encoded = []
        for t in ser.field(doc, "encoded_vocab", list, "TokenizerInfo"):
            if isinstance(t, str):
                encoded.append(t)
            elif isinstance(t, dict) and isinstance(t.get("b64"), str):
                try:
                    encoded.append(base64.b64decode(t["b64"].encode("ascii"), validate=True))
                except ValueError:
                    raise DeserializeFormatError("TokenizerInfo: a token's bytes are not base64") from None
            else:
                raise DeserializeFormatError("TokenizerInfo: a token is neither a str nor {'b64': ...}")
        return TokenizerInfo._from_fields(encoded, doc, "TokenizerInfo")

    # -- shared machinery ---------------------------------------------------------------------------

    def _token_index(self):
        """The vocabulary's :class:`~leapgen.compiler.TokenIndex`, built once and
        shared by every compiler and deserialized grammar of this object."""
        with self._lock:
            if self._index is None:
                from leapgen.compiler import TokenIndex

                self._index = TokenIndex(self._native)
            return self._index

    def _jump_tables(self):
        """(bytes -> smallest id of an ordinary token, the longest token's length,
        ``is_strict_prefix(data)``: whether a longer ordinary token starts with
        ``data``), built once, for :meth:`GrammarMatcher.find_jump_forward_tokens`."""
        with self._lock:
            if self._jump is None:
                import bisect

                lookup: dict[bytes, int] = {}
                for i, b in enumerate(self._native.token_bytes):
                    if b and b not in lookup:
                        lookup[b] = i
                ordered = sorted(lookup)

                def is_strict_prefix(data: bytes) -> bool:
                    k = bisect.bisect_right(ordered, data)
                    return k < len(ordered) and ordered[k].startswith(data)

                self._jump = (lookup, max(map(len, ordered), default=0), is_strict_prefix)
            return self._jump

    def _binder(self):
        """A :class:`leapgen.GrammarCompiler` that keeps nothing, for binding
        deserialized automata to this vocabulary (built once)."""
        index = self._token_index()
        with self._lock:
            if self._bind_compiler is None:
                from leapgen.compiler import GrammarCompiler

                self._bind_compiler = GrammarCompiler(self._native, cache_entries=0, token_index=index)
            return self._bind_compiler

    def __eq__(self, other) -> bool:
        if not isinstance(other, TokenizerInfo):
            return NotImplemented
        return self is other or (self._metadata() == other._metadata() and self._native == other._native)

    def __hash__(self) -> int:
        return hash(self._native)

    def __repr__(self) -> str:
        return (f"TokenizerInfo(vocab_type={self._vocab_type.name}, vocab_size={self.vocab_size}, "
                f"stop_token_ids={self.stop_token_ids})")


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode("ascii")


def _text_added_tokens(tokenizer) -> set[int]:
    """Ids of added tokens that are not special (they match their text, as in xgrammar)."""
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    try:
        added = backend.get_added_tokens_decoder()
    except AttributeError:
        return set()
    special = {i for i in getattr(tokenizer, "all_special_ids", ()) if isinstance(i, int)}
    return {i for i, tok in added.items() if not getattr(tok, "special", True) and i not in special}
