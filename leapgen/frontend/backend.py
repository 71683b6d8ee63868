"""Frontend backends: the interface, and the embedded engine (the default).

A backend turns a program's text and a ``gen``'s settings into a completion
(``generate``) and picks a ``select`` choice (``select``); it names every
setting it cannot honour instead of dropping it.
"""

from __future__ import annotations

import threading

from leapgen.errors import GrammarError
from leapgen.frontend.chat_template import ChatTemplate, chat_template_from_tokenizer
from leapgen.frontend.choices import ChoicesDecision, ChoicesSamplingMethod, ConstrainedDecoding, choices_regex
from leapgen.frontend.ir import SamplingArgs


class BaseBackend:
    """What the interpreter calls."""

    def get_chat_template(self) -> ChatTemplate:
        raise NotImplementedError

    def generate(self, s, args: SamplingArgs) -> tuple[str, dict]:
        """The completion of ``s.text_`` under ``args``, and its ``meta_info``."""
        raise NotImplementedError

    def select(self, s, choices: list[str], temperature: float, method: ChoicesSamplingMethod) -> ChoicesDecision:
        raise NotImplementedError


#: SGLang sampling fields the embedded engine does not have, with the value that means "off".
_UNSUPPORTED = {"min_new_tokens": 0, "n": 1, "min_p": 0.0, "frequency_penalty": 0.0, "presence_penalty": 0.0,
                "ignore_eos": False, "return_logprob": None, "logprob_start_len": None, "top_logprobs_num": None,
                "return_text_in_logprobs": None}


def _check_supported(args: SamplingArgs, where: str) -> None:
    for name, off in _UNSUPPORTED.items():
        value = getattr(args, name)
        if value is not None and value != off and not (off is None and value is False):
            raise ValueError(f"{name}={value!r} is not supported by {where}")
    if args.stop_regex:
        raise ValueError(f"stop_regex is not supported by {where}")


class Engine(BaseBackend):
    """The embedded engine (:class:`leapgen.engine.LLM`) as a frontend backend.

    Parameters
    ----------
    model : str, default "default"
        Passed to :class:`~leapgen.engine.LLM` when ``llm`` is not given.
    llm : leapgen.engine.LLM, optional
        An engine to share.
    **llm_kwargs
        Other :class:`~leapgen.engine.LLM` options.

    Notes
    -----
    Thread-safe: every call takes one lock to add its request or run one
    engine step, and a step advances every running request, so the programs
    of ``run_batch`` decode in one continuous batch. ``select`` scores choices
    with the model itself (teacher forcing, as SGLang's server does), under
    the same lock. The prompt is the program's text tokenized as raw text
    (its role markup included): the chat template comes from the model's own
    Jinja template (see :func:`chat_template_from_tokenizer`).
    """

    def __init__(self, model: str = "default", *, llm=None, **llm_kwargs):
        if llm is None:
            from leapgen.engine import LLM

            llm = LLM(model, **llm_kwargs)
        self.llm = llm
        self.chat_template = chat_template_from_tokenizer(llm.tokenizer)
        self._lock = threading.Lock()

    def get_chat_template(self) -> ChatTemplate:
        return self.chat_template

    def _params(self, args: SamplingArgs, **override):
        from leapgen.engine import SamplingParams

        _check_supported(args, "the embedded engine backend")
        stop_ids = None
        if args.stop_token_ids:
            stop_ids = tuple(sorted(set(self.llm.stop_token_ids) | {int(t) for t in args.stop_token_ids}))
        fields = dict(max_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                      top_k=args.top_k, stop=tuple(args.stop_list()), stop_token_ids=stop_ids,
                      regex=args.regex, json_schema=args.json_schema)
        fields.update(override)
        return SamplingParams(**fields)

    def _run(self, prompt: str, params):
        with self._lock:
            req = self.llm.add_request(prompt, params, chat=False)
        while True:
            with self._lock:
                if req.is_finished:
                    return self.llm.get_output(req)
                self.llm.step()

    def generate(self, s, args: SamplingArgs) -> tuple[str, dict]:
        if args.max_new_tokens == 0:
            return "", {"prompt_tokens": None, "completion_tokens": 0, "finish_reason": {"type": "length"}}
        out = self._run(s.text_, self._params(args))
        if out.finish_reason == "error":
            import leapgen.errors

            cls = getattr(leapgen.errors, out.error_type or "", None)
            grammar = isinstance(cls, type) and issubclass(cls, GrammarError)
            raise (GrammarError if grammar else RuntimeError)(out.error)
        kind = "length" if out.finish_reason == "length" else "abort" if out.finish_reason == "abort" else "stop"
        meta = {"prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                "completion_tokens_wo_jump_forward": out.completion_tokens - out.jump_forward_tokens,
                "jump_forward_tokens": out.jump_forward_tokens, "finish_reason": {"type": kind}}
        return out.text, meta

    def select(self, s, choices: list[str], temperature: float, method: ChoicesSamplingMethod) -> ChoicesDecision:
        if isinstance(method, ConstrainedDecoding):
            tok = self.llm.tokenizer
            longest = max(len(tok.encode(c, add_special_tokens=False)) for c in choices)
            params = self._params(SamplingArgs(), max_tokens=longest + 8, temperature=0.0, stop=(),
                                  regex=choices_regex(choices), json_schema=None)
            out = self._run(s.text_, params)
            if out.text not in choices:
                raise RuntimeError(f"constrained select ended with {out.text!r} ({out.finish_reason}), "
                                   "not one of the choices")
            return ChoicesDecision(out.text, {"finish_reason": out.finish_reason})
        if temperature > 1e-5:
            raise ValueError("select scores its choices and needs temperature 0 (as SGLang's)")
        inputs = [self._scored_tokens(s.text_, c) for c in choices]
        normalized = [sum(t[0] for t in toks) / len(toks) if toks else float("-inf") for toks in inputs]
        unconditional = None
        if method.requires_unconditional_logprobs:
            unconditional = [self._unconditional(toks) for toks in inputs]
        return method(choices=choices, normalized_prompt_logprobs=normalized, input_token_logprobs=inputs,
                      output_token_logprobs=[[] for _ in choices], unconditional_token_logprobs=unconditional)

    def _scored_tokens(self, prompt: str, choice: str) -> list[tuple]:
        """``(logprob, token_id, text)`` of the tokens of ``prompt + choice`` from the first one that
        differs from ``prompt``'s own tokenization (a merged boundary token is scored too)."""
        from leapgen.engine.prompt import build_prompt_ids
        from leapgen.engine.scoring import token_logprobs

        tok = self.llm.tokenizer
        base = build_prompt_ids(tok, prompt, chat=False)
        full = build_prompt_ids(tok, prompt + choice, chat=False)
        k = 0
        while k < min(len(base), len(full)) and base[k] == full[k]:
            k += 1
        k = max(k, 1)
        with self._lock:
            lps = token_logprobs(self.llm.loaded.model, full)
        return [(lps[j - 1], full[j], tok.decode([full[j]])) for j in range(k, len(full))]

    def _unconditional(self, toks: list[tuple]) -> list[tuple]:
        from leapgen.engine.scoring import token_logprobs

        ids = [t[1] for t in toks]
        with self._lock:
            lps = token_logprobs(self.llm.loaded.model, ids)
        return [(None if j == 0 else lps[j - 1], ids[j], toks[j][2]) for j in range(len(ids))]
