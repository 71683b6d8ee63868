"""Turn a user prompt into prompt token ids (chat template or raw)."""

from __future__ import annotations

import re
from typing import Any, Sequence

_LONE_SURROGATE = re.compile("[\\ud800-\\udfff]")


def build_prompt_ids(tokenizer: Any, prompt: str | list[dict] | list[int], *, chat: bool = True) -> list[int]:
    """Tokenize a prompt.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
    prompt : str or list of dict or list of int
        The user's message (``chat=True``) or the raw text to continue; or a
        whole conversation, ``[{"role": ..., "content": ...}, ...]``
        (``chat=True`` only); or the prompt's token ids, used as they are
        (SGLang's ``input_ids``, a completion's token prompt; ``chat`` does
        not apply).
    chat : bool, default True
        Wrap ``prompt`` as one user message in the tokenizer's chat template,
        with the assistant turn opened (``add_generation_prompt=True``). Falls
        back to raw text when the tokenizer has no chat template.

    Returns
    -------
    list of int
        Non-empty list of token ids.

    Raises
    ------
    ValueError
        If ``prompt`` is not a str (or a message list with ``chat=True``), or
        tokenizes to no token.
    """
    messages = None
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        if min(prompt) < 0:
            raise ValueError(f"prompt token ids must be >= 0, got {min(prompt)}")
        return list(prompt)
    if isinstance(prompt, list) and chat:
        if not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in prompt) or not prompt:
            raise ValueError("a conversation must be a non-empty list of {'role', 'content': str} dicts")
        messages = prompt
    elif not isinstance(prompt, str):
        raise ValueError(f"a prompt must be a str, got {type(prompt).__name__}")
    for i, text in enumerate([m["content"] for m in messages] if messages is not None else [prompt]):
        check_surrogates(text, f"messages[{i}].content" if messages is not None else "the prompt")
    if chat and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            messages or [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        return encode_prompt_text(tokenizer, text, templated=True)
    if messages is not None:
        text = "".join(f"{m.get('role', 'user')}: {m['content']}\n" for m in messages)
        return encode_prompt_text(tokenizer, text, templated=False)
    return encode_prompt_text(tokenizer, prompt, templated=False)


def encode_prompt_text(tokenizer: Any, text: str, *, templated: bool) -> list[int]:
    """Tokenize a prompt's text: a chat template's output (``templated``:
    its special tokens are in the text) or raw text (the tokenizer's own
    special tokens added, a BOS for most).

    Raises
    ------
    ValueError
        A lone UTF-16 surrogate in ``text``, or no token at all.
    """
    check_surrogates(text, "the prompt")
    ids = tokenizer.encode(text, add_special_tokens=not templated)
    if not ids:
        raise ValueError("the prompt is empty (no token to condition on)")
    return list(ids)


def check_surrogates(text: str, place: str) -> None:
    """Refuse a lone UTF-16 surrogate in ``text`` (``place``: where it is, for the message).

    Raises
    ------
    ValueError
        Naming ``place`` and the character offset.
    """
    lone = _LONE_SURROGATE.search(text)
    if lone is not None:
        raise ValueError(f"{place} holds a lone UTF-16 surrogate U+{ord(lone.group()):04X} at character "
                         f"{lone.start()}: it has no UTF-8 form and cannot be tokenized")


def check_prompt_fits(prompt_ids: Sequence[int], max_tokens: int, vocab_size: int, context: int | None) -> None:
    """Refuse prompt ids outside the vocabulary, and a prompt that does not
    leave ``max_tokens`` in the model's ``context`` (as vLLM refuses it; one
    prefill past the context would stall every other request for minutes).

    Raises
    ------
    ValueError
        Naming the limit.
    """
    if max(prompt_ids) >= vocab_size:
        raise ValueError(f"prompt token id {max(prompt_ids)} is not in the vocabulary (size {vocab_size})")
    if context is not None and len(prompt_ids) >= context:
        raise ValueError(f"the prompt has {len(prompt_ids)} tokens; the model's context is {context} tokens")
    if context is not None and len(prompt_ids) + max_tokens > context:
        raise ValueError(f"the prompt ({len(prompt_ids)} tokens) plus max_tokens ({max_tokens}) exceeds "
                         f"the model's context of {context} tokens")


def default_stop_token_ids(tokenizer: Any, model: Any) -> frozenset:
    """The model's end-of-sequence tokens: ``generation_config.eos_token_id``
    (an int or a list) together with ``tokenizer.eos_token_id``."""
    ids: set[int] = set()
    gen = getattr(model, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    if isinstance(eos, int):
        ids.add(eos)
    elif eos is not None:
        ids.update(int(i) for i in eos)
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    return frozenset(ids)
