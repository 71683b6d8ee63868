"""Turn a user prompt into prompt token ids (chat template or raw)."""

from __future__ import annotations

from typing import Any


def build_prompt_ids(tokenizer: Any, prompt: str, *, chat: bool = True) -> list[int]:
    """Tokenize a prompt.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
    prompt : str
        The user's message (``chat=True``) or the raw text to continue.
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
        If ``prompt`` is not a str or tokenizes to no token.
    """
    if not isinstance(prompt, str):
        raise ValueError(f"a prompt must be a str, got {type(prompt).__name__}")
    if chat and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer.encode(text, add_special_tokens=False)
    else:
        ids = tokenizer.encode(prompt, add_special_tokens=True)
    if not ids:
        raise ValueError("the prompt is empty (no token to condition on)")
    return list(ids)


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
