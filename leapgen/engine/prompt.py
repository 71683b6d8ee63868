"""Turn a user prompt into prompt token ids (chat template or raw), and check
that a request fits the model (:class:`PromptChecker`)."""

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


def check_prompt_fits(prompt_ids: Sequence[int], max_tokens: int, vocab_size: int, context: int | None,
                      limit_name: str = "") -> None:
    """Refuse prompt ids outside the vocabulary, and a prompt that does not
    leave ``max_tokens`` in the model's ``context`` (as vLLM refuses it; one
    prefill past the context would stall every other request for minutes).
    ``limit_name`` follows the context in the messages (`` (max_model_len)``).

    Raises
    ------
    ValueError
        Naming the limit.
    """
    if max(prompt_ids) >= vocab_size:
        raise ValueError(f"prompt token id {max(prompt_ids)} is not in the vocabulary (size {vocab_size})")
    if context is not None and len(prompt_ids) >= context:
        raise ValueError(f"the prompt has {len(prompt_ids)} tokens; the model's context is {context} tokens"
                         f"{limit_name}")
    if context is not None and len(prompt_ids) + max_tokens > context:
        raise ValueError(f"the prompt ({len(prompt_ids)} tokens) plus max_tokens ({max_tokens}) exceeds "
                         f"the model's context of {context} tokens{limit_name}")


def prompt_utf8_bytes(prompt: Any) -> int:
    """UTF-8 bytes of a prompt's text (a conversation's contents summed; a lone surrogate counts 3;
    what is not text counts 0)."""
    if isinstance(prompt, str):
        texts = [prompt]
    elif isinstance(prompt, list):
        texts = [m.get("content") for m in prompt if isinstance(m, dict)]
    else:
        texts = []
    return sum(len(t) if t.isascii() else len(t.encode("utf-8", "surrogatepass")) for t in texts if isinstance(t, str))


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


class PromptChecker:
    """Check a request against the model's bounds and tokenize its prompt.

    Thread-safe (it reads the tokenizer only), so a server runs it off the
    engine thread.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
    vocab_size : int
        Width of the model's logits (stop token ids must be below it).
    context : int or None
        The model's context length (None: unknown, unbounded).
    max_model_len : int or None
        The most tokens of a request (prompt plus ``max_tokens``); None: ``context``.

    Raises
    ------
    ValueError
        ``max_model_len`` below 2 or past ``context``.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, context: int | None, max_model_len: int | None = None):
        if max_model_len is not None:
            if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or max_model_len < 2:
                raise ValueError(f"max_model_len must be an int >= 2, got {max_model_len!r}")
            if context is not None and max_model_len > context:
                raise ValueError(f"max_model_len {max_model_len} exceeds the model's context of {context} tokens")
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.max_model_len = max_model_len if max_model_len is not None else context
        self._named = " (max_model_len)" if max_model_len is not None and max_model_len != context else ""
        self._max_token_bytes: int | None = None

    @property
    def max_token_bytes(self) -> int:
        """An upper bound on the UTF-8 bytes of one token's text: the longest token's text
        (``convert_tokens_to_string``, UTF-8) plus 3 for a leading space a tokenizer may strip there;
        computed once (about 0.5 s for 49k tokens)."""
        if self._max_token_bytes is None:
            tok = self.tokenizer
            longest = max((len(tok.convert_tokens_to_string([t]).encode("utf-8", "surrogatepass"))
                           for t in tok.get_vocab()), default=1)
            self._max_token_bytes = longest + 3
        return self._max_token_bytes

    def prepare(self, prompt: str | list[dict], params: Any, *, chat: bool = True) -> list[int]:
        """Check ``params`` and tokenize ``prompt``.

        A prompt whose UTF-8 text is obviously longer than ``max_model_len``
        tokens (over 4x the bytes that many of the vocabulary's longest
        tokens could spell: normalizers may shorten text a little) is refused
        before it is tokenized.

        Parameters
        ----------
        prompt : str or list of dict or list of int
            See :func:`build_prompt_ids` (token ids are checked against the
            vocabulary).
        params : SamplingParams
        chat : bool, default True

        Returns
        -------
        list of int
            The prompt token ids.

        Raises
        ------
        ValueError
            ``params`` is not a SamplingParams or its ``stop_token_ids`` are
            outside the vocabulary; the prompt is empty, ill-typed, not
            shorter than ``max_model_len``, or prompt plus ``max_tokens``
            exceeds it (as vLLM refuses it), or ``params.prompt_logprobs_start``
            is not within the prompt.
        """
        from leapgen.engine.sampling_params import SamplingParams

        if not isinstance(params, SamplingParams):
            raise ValueError(f"params must be SamplingParams, got {type(params).__name__}")
        if params.stop_token_ids is not None and any(t >= self.vocab_size for t in params.stop_token_ids):
            raise ValueError(f"stop_token_ids must be < the vocabulary size {self.vocab_size}")
        context = self.max_model_len
        if context is not None:
            size = prompt_utf8_bytes(prompt)
            if size > 4 * context * self.max_token_bytes:
                # Tokenizing megabytes holds a core for seconds only to refuse them.
                raise ValueError(f"the prompt is {size} bytes of text, far more than the {context} tokens the "
                                 f"model takes (max_model_len); it was refused before tokenization")
        prompt_ids = build_prompt_ids(self.tokenizer, prompt, chat=chat)
        check_prompt_fits(prompt_ids, params.max_tokens, self.vocab_size, context, self._named)
        if params.prompt_logprobs is not None and params.prompt_logprobs_start >= len(prompt_ids):
            raise ValueError(f"prompt_logprobs_start (SGLang's logprob_start_len) {params.prompt_logprobs_start} "
                             f"must be less than the prompt's length ({len(prompt_ids)} tokens)")
        return prompt_ids
