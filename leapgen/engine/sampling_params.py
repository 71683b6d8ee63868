"""Per-request generation settings: :class:`SamplingParams`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Separators of the default JSON layout (see :class:`SamplingParams`).
DEFAULT_JSON_SEPARATORS = (", ", ": ")
#: Most alternatives ``logprobs`` may ask for per token (OpenAI's ``top_logprobs`` bound).
MAX_TOP_LOGPROBS = 20


@dataclass(frozen=True)
class SamplingParams:
    """How to generate one completion.

    Parameters
    ----------
    max_tokens : int, default 256
        Most output tokens (>= 0); the completion ends with
        ``finish_reason="length"`` when reached. 0 (SGLang's
        ``max_new_tokens: 0``): the prompt is prefilled (its KV enters the
        prefix cache; with ``prompt_logprobs`` it is scored) and the request
        ends with no output; it takes no grammar and ``n == 1``.
    temperature : float, default 0.0
        Softmax temperature (>= 0); 0 means greedy (argmax).
    top_p : float, default 1.0
        Nucleus sampling: keep the smallest set of most likely tokens whose
        probability sums to >= top_p, ``0 < top_p <= 1``. Ignored when greedy.
    top_k : int, default -1
        Keep the top_k most likely tokens; -1 disables. Ignored when greedy.
    seed : int or None, default None
        Seed of the request's own ``torch.Generator``; ``None`` draws one.
    stop_token_ids : tuple of int or None, default None
        Tokens that end the completion, replacing the model's own EOS set.
    json_schema : dict or str or None, default None
        Constrain the output to JSON valid against this JSON Schema (a dict or
        its JSON text).
    regex : str or None, default None
        Constrain the output to match this regex (ECMAScript dialect, the whole
        output matches).
    ebnf : str or None, default None
        Constrain the output to this EBNF grammar (GBNF dialect, root rule
        ``root``).
    lark : str or None, default None
        Constrain the output to this Lark grammar (start rule ``start``), with
        the language of Lark's Earley parser (see :mod:`leapgen.grammar.lark`).
    json_object : bool, default False
        Constrain the output to a JSON object (any members; OpenAI's
        ``response_format={"type": "json_object"}``), in the JSON layout
        below: the schema ``{"type": "object"}`` read as the specification
        does (``json_strict`` does not apply).
    structural_tag : dict or str or None, default None
        Constrain the output to a structural tag (xgrammar's format, a dict or
        its JSON text; both the ``format`` form and the legacy
        ``structures``/``triggers`` form, e.g. a ``response_format`` of type
        ``"structural_tag"`` as it is): free text with tool calls, reasoning
        tags... (see :meth:`leapgen.GrammarCompiler.compile_structural_tag`).
        Its JSON Schema contents take the layout knobs below (by default the
        fixed ``", "`` / ``": "`` layout, whose keys jump-forward appends;
        ``json_indent`` is refused with it).
    choice : sequence of str or None, default None
        Constrain the output to exactly one of these strings (vLLM's
        ``choice``; compiled as a trie). At most one of ``json_schema``,
        ``regex``, ``ebnf``, ``lark``, ``json_object``, ``structural_tag`` and
        ``choice``.
    stop : tuple of str, default ()
        Stop strings: the completion ends (``finish_reason="stop"``) at the
        first one that appears in the output text, which is cut before it.
    jump_forward : bool, default True
        Append text the grammar forces without sampling it (see
        :mod:`leapgen.engine.jump_forward`).
    json_any_whitespace : bool, default False
        Let the model choose whitespace between JSON tokens.
    json_separators : tuple of (str, str), default (", ", ": ")
        Item and key separators the JSON grammar emits.
    json_indent : int or None, default None
        Pretty-print JSON with this indent (then ``json_separators`` is the
        item/key separators within lines, as in :func:`json.dumps`).
    json_strict : bool, default True
        An object schema without ``additionalProperties`` admits no other
        properties (OpenAI's strict mode); False: the specification's meaning.
    json_whitespace_pattern : str or None, default None
        A regex for each whitespace run between JSON tokens (vLLM's
        ``whitespace_pattern``; implies free whitespace, matching JSON
        whitespace only).
    n : int, default 1
        Samples of the prompt (vLLM's and OpenAI's ``n``): the prompt is
        prefilled once; sample ``i`` has its own matcher and generator,
        seeded ``seed + i`` when ``seed`` is given (as vLLM does).
    logprobs : int or None, default None
        Report each output token's log-probability and this many most likely
        alternatives (0-20); None reports none. See
        :mod:`leapgen.engine.logprobs` for what is reported.
    prompt_logprobs : int or None, default None
        Report the log-probability of each prompt token from
        ``prompt_logprobs_start`` on, given the tokens before it (teacher
        forcing, from the prefill pass), and this many most likely
        alternatives (0-20): vLLM's ``prompt_logprobs``, SGLang's
        ``input_token_logprobs``. None reports none.
    prompt_logprobs_start : int, default 0
        The first prompt position reported (SGLang's ``logprob_start_len``;
        it must be less than the prompt's length). Its entry is None: the
        prefill computes logits from that position on, which score the
        positions after it (position 0 has no context either way, as in
        vLLM). Only with ``prompt_logprobs``.
    max_reasoning_tokens : int or None, default None
        Most output tokens before ``reasoning_end`` appears (a reasoning
        model's thinking, its start marker included): once as many are out
        and the text holds no ``reasoning_end``, the engine appends
        ``reasoning_end`` itself (forced, through the grammar, like
        jump-forward text) and the answer follows. None: no bound.
    reasoning_end : str or None, default None
        The end marker of the thinking (``"</think>"``); needed by
        ``max_reasoning_tokens``. :meth:`leapgen.LLM.chat` sets both from its
        reasoning parser.
    json_any_order : bool, default False
        An object's properties in any order, each at most once (see
        :meth:`leapgen.compiler.GrammarCompiler.compile_json_schema`);
        False: schema order. The leapgen and xgrammar backends; the
        llguidance and outlines-core backends refuse it by name.

    Raises
    ------
    ValueError
        On any out-of-range or ill-typed value.

    Notes
    -----
    The default JSON layout is fixed, not free: ``any_whitespace=False`` with
    separators ``(", ", ": ")``. A fixed layout makes every key, quote, colon,
    comma and space the schema determines *forced* text, which jump-forward
    appends without sampling (the faster, the more structure the schema has);
    with free whitespace each of those points is a choice the model must make
    one token at a time. ``", "`` and ``": "`` (not the compact ``","``
    and ``":"``) are the spacing models most often saw in training, and the
    form ``json.dumps`` writes, so the model's own tokens stay the likely ones.
    """

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int | None = None
    stop_token_ids: tuple[int, ...] | None = None
    json_schema: dict | str | None = None
    regex: str | None = None
    ebnf: str | None = None
    lark: str | None = None
    json_object: bool = False
    structural_tag: dict | str | None = None
    stop: tuple[str, ...] = ()
    jump_forward: bool = True
    json_any_whitespace: bool = False
    json_separators: tuple[str, str] = DEFAULT_JSON_SEPARATORS
    json_indent: int | None = None
    json_strict: bool = True
    choice: tuple[str, ...] | None = None
    json_whitespace_pattern: str | None = None
    n: int = 1
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    prompt_logprobs_start: int = 0
    max_reasoning_tokens: int | None = None
    reasoning_end: str | None = None
    json_any_order: bool = False

    def __post_init__(self) -> None:
        _check_int("max_tokens", self.max_tokens, minimum=0)
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)):
            raise ValueError(f"temperature must be a number, got {self.temperature!r}")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be finite and >= 0, got {self.temperature}")
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)):
            raise ValueError(f"top_p must be a number, got {self.top_p!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        _check_int("top_k", self.top_k)
        if self.top_k != -1 and self.top_k < 1:
            raise ValueError(f"top_k must be -1 (disabled) or >= 1, got {self.top_k}")
        if self.seed is not None:
            _check_int("seed", self.seed, minimum=0)
            if self.seed >= 2 ** 64:
                raise ValueError(f"seed must be < 2**64, got {self.seed}")
        if self.stop_token_ids is not None:
            if isinstance(self.stop_token_ids, (str, bytes)) or not hasattr(self.stop_token_ids, "__iter__"):
                raise ValueError(f"stop_token_ids must be a sequence of ints, got {self.stop_token_ids!r}")
            ids = tuple(self.stop_token_ids)
            for i in ids:
                _check_int("stop_token_ids item", i, minimum=0)
            object.__setattr__(self, "stop_token_ids", ids)
        if self.json_schema is not None and not isinstance(self.json_schema, (dict, str, bool)):
            raise ValueError(f"json_schema must be a dict or a JSON string, got {type(self.json_schema).__name__}")
        if self.regex is not None and not isinstance(self.regex, str):
            raise ValueError(f"regex must be a str, got {type(self.regex).__name__}")
        for name in ("ebnf", "lark"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a str, got {type(getattr(self, name)).__name__}")
        if self.structural_tag is not None and not isinstance(self.structural_tag, (dict, str)):
            raise ValueError(f"structural_tag must be a dict or a JSON string, got {type(self.structural_tag).__name__}")
        for name in ("json_object", "json_strict", "json_any_order"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.choice is not None:
            if isinstance(self.choice, (str, bytes)) or not hasattr(self.choice, "__iter__"):
                raise ValueError(f"choice must be a sequence of str, got {self.choice!r}")
            choice = tuple(self.choice)
            if not choice or not all(isinstance(c, str) for c in choice):
                raise ValueError("choice must be a non-empty sequence of str")
            object.__setattr__(self, "choice", choice)
        if self.json_whitespace_pattern is not None and not isinstance(self.json_whitespace_pattern, str):
            raise ValueError(f"json_whitespace_pattern must be a str, got {self.json_whitespace_pattern!r}")
        _check_int("n", self.n, minimum=1)
        if self.logprobs is not None:
            _check_int("logprobs", self.logprobs, minimum=0)
            if self.logprobs > MAX_TOP_LOGPROBS:
                raise ValueError(f"logprobs must be <= {MAX_TOP_LOGPROBS}, got {self.logprobs}")
        if self.prompt_logprobs is not None:
            _check_int("prompt_logprobs", self.prompt_logprobs, minimum=0)
            if self.prompt_logprobs > MAX_TOP_LOGPROBS:
                raise ValueError(f"prompt_logprobs must be <= {MAX_TOP_LOGPROBS}, got {self.prompt_logprobs}")
        _check_int("prompt_logprobs_start", self.prompt_logprobs_start, minimum=0)
        if self.prompt_logprobs_start and self.prompt_logprobs is None:
            raise ValueError("prompt_logprobs_start applies with prompt_logprobs only")
        if self.max_reasoning_tokens is not None:
            _check_int("max_reasoning_tokens", self.max_reasoning_tokens, minimum=1)
            if not isinstance(self.reasoning_end, str) or not self.reasoning_end:
                raise ValueError("max_reasoning_tokens needs reasoning_end (the end marker of the thinking)")
        elif self.reasoning_end is not None and not isinstance(self.reasoning_end, str):
            raise ValueError(f"reasoning_end must be a str, got {self.reasoning_end!r}")
        given = [n for n in ("json_schema", "regex", "ebnf", "lark", "structural_tag", "choice")
                 if getattr(self, n) is not None]
        given += ["json_object"] if self.json_object else []
        if len(given) > 1:
            raise ValueError("give at most one grammar (json_schema, regex, ebnf, lark, json_object, structural_tag, "
                             f"choice), got {given}")
        if self.max_tokens == 0 and (given or self.n != 1):
            raise ValueError("max_tokens=0 (prompt prefill only) takes no grammar and n == 1")
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        if not isinstance(stop, (tuple, list)) or not all(isinstance(x, str) and x for x in stop):
            raise ValueError(f"stop must be a sequence of non-empty str, got {self.stop!r}")
        for x in stop:
            if any("\ud800" <= ch <= "\udfff" for ch in x):
                raise ValueError(f"stop string {x!r} holds a lone UTF-16 surrogate: generated text can never "
                                 "contain it")
        object.__setattr__(self, "stop", tuple(stop))
        if not isinstance(self.jump_forward, bool):
            raise ValueError(f"jump_forward must be a bool, got {self.jump_forward!r}")
        if not isinstance(self.json_any_whitespace, bool):
            raise ValueError(f"json_any_whitespace must be a bool, got {self.json_any_whitespace!r}")
        seps = self.json_separators
        if (
            not isinstance(seps, (tuple, list))
            or len(seps) != 2
            or not all(isinstance(s, str) for s in seps)
        ):
            raise ValueError(f"json_separators must be a pair of str, got {seps!r}")
        object.__setattr__(self, "json_separators", tuple(seps))
        if self.json_indent is not None:
            _check_int("json_indent", self.json_indent, minimum=0)
            if self.structural_tag is not None:
                raise ValueError("json_indent does not apply to a structural_tag (its tags hold one-line JSON)")

    @property
    def greedy(self) -> bool:
        """True when sampling is argmax (``temperature == 0``)."""
        return self.temperature == 0

    @property
    def constrained(self) -> bool:
        """True when a grammar (JSON Schema, regex, EBNF, Lark, JSON object, structural tag, choice)
        constrains the output."""
        return (self.json_schema is not None or self.regex is not None or self.ebnf is not None
                or self.lark is not None or self.json_object or self.structural_tag is not None
                or self.choice is not None)


def _check_int(name: str, value: Any, *, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
