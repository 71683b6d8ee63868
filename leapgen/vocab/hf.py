"""Read a Hugging Face tokenizer into the arguments of ``TokenizerInfo``.

Duck-typed: neither ``transformers`` nor ``tokenizers`` is imported here. The
vocab type is read from the tokenizer's decoder (the pipeline that turns token
strings back into text), serialized with ``__getstate__`` (a small JSON).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from leapgen.errors import TokenizerError
from leapgen.vocab.vocab_type import DEFAULT_STOP_TOKEN_STRINGS, VocabType

__all__ = ["huggingface_vocab"]


def _component(obj: Any) -> dict:
    """The JSON of a tokenizers component (decoder, normalizer...); {} when absent."""
    if obj is None:
        return {}
    try:
        return json.loads(obj.__getstate__())
    except (AttributeError, TypeError, ValueError):
        return {}


def _walk(node: Any):
    """Every dict inside a component's JSON (Sequence members included)."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _vocab_type(backend: Any) -> tuple[VocabType, bool]:
    """(vocab type, add_prefix_space) of a ``tokenizers.Tokenizer``."""
    decoder = list(_walk(_component(backend.decoder)))
    pre = list(_walk(_component(backend.pre_tokenizer)))
    norm = list(_walk(_component(backend.normalizer)))
    types = {d.get("type") for d in decoder}
    if "ByteLevel" in types or (not decoder and any(d.get("type") == "ByteLevel" for d in pre)):
        prefix = any(d.get("type") == "ByteLevel" and d.get("add_prefix_space") for d in pre)
        return VocabType.BYTE_LEVEL, prefix
    metaspace = any(d.get("type") == "Replace" and d.get("pattern", {}).get("String") == "\u2581"
                    for d in decoder)
    if ("ByteFallback" in types or "Metaspace" in types or metaspace
            or getattr(backend.model, "byte_fallback", False)):
        prefix = any(d.get("type") == "Prepend" and d.get("prepend") == "\u2581" for d in norm) or any(
            d.get("type") == "Metaspace"
            and (d.get("prepend_scheme") in ("always", "first") or d.get("add_prefix_space"))
            for d in pre)
        return VocabType.BYTE_FALLBACK, prefix
    raise TokenizerError(
        f"cannot tell how this tokenizer's tokens map to bytes (model {type(backend.model).__name__}, "
        f"decoder {sorted(t for t in types if t) or 'none'}); supported: ByteLevel, ByteFallback, "
        "Metaspace decoders. Build TokenizerInfo(encoded_vocab, vocab_type) yourself instead")


def huggingface_vocab(tokenizer: Any, *, vocab_size: int | None = None,
                      stop_token_ids: Iterable[int] | None = None) -> dict[str, Any]:
    """Keyword arguments of ``TokenizerInfo(...)`` for a Hugging Face tokenizer.

    Parameters
    ----------
    tokenizer : transformers fast tokenizer or tokenizers.Tokenizer
        Read, not mutated.
    vocab_size : int, optional
        The model's logits width; default: the tokenizer's size.
    stop_token_ids : iterable of int, optional
        Default: EOS, then the special tokens named in ``DEFAULT_STOP_TOKEN_STRINGS``.

    Returns
    -------
    dict
        ``encoded_vocab`` (list of str or None, by id), ``vocab_type``,
        ``vocab_size``, ``stop_token_ids``, ``special_token_ids``, ``add_prefix_space``.

    Raises
    ------
    TokenizerError
        Not a fast HF tokenizer, or a decoder that does not map tokens to bytes.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None and all(hasattr(tokenizer, a) for a in ("model", "decoder", "get_added_tokens_decoder")):
        backend = tokenizer
    if backend is None:
        raise TokenizerError(
            f"expected a transformers fast tokenizer or a tokenizers.Tokenizer, got {type(tokenizer).__name__} "
            "(a slow/SentencePiece/tiktoken tokenizer has no tokenizer.json pipeline); use "
            "TokenizerInfo.from_tiktoken, or TokenizerInfo(encoded_vocab, vocab_type)")
    vtype, add_prefix_space = _vocab_type(backend)

    token_to_id = backend.get_vocab(with_added_tokens=True)
    n = max(token_to_id.values(), default=-1) + 1
    vocab: list[str | None] = [None] * n
    for tok, i in token_to_id.items():
        vocab[i] = tok
    special = set(backend.get_added_tokens_decoder())
    special.update(i for i in getattr(tokenizer, "all_special_ids", ()) if isinstance(i, int) and 0 <= i < n)

    if stop_token_ids is None:
        limit = n if vocab_size is None else min(n, vocab_size)
        eos = getattr(tokenizer, "eos_token_id", None)
        stop = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        stop += [token_to_id[s] for s in DEFAULT_STOP_TOKEN_STRINGS
                 if s in token_to_id and token_to_id[s] in special]
        stop_token_ids = list(dict.fromkeys(i for i in stop if isinstance(i, int) and 0 <= i < limit))
    return dict(encoded_vocab=vocab, vocab_type=vtype, vocab_size=n if vocab_size is None else vocab_size,
                stop_token_ids=stop_token_ids, special_token_ids=special,
                add_prefix_space=add_prefix_space)
