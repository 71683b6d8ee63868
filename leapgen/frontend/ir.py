"""The expressions a program appends to its state (``s += ...``), and the
sampling settings of one ``gen``: SGLang's ``sglang/lang/ir.py`` nouns."""

from __future__ import annotations

import dataclasses
from typing import Any

#: SGLang's regexes for ``gen_int`` / ``gen_string`` (``sglang/lang/ir.py``), which also stop at " " and "\n".
REGEX_INT = r"[-+]?[0-9]+[ \n]*"
REGEX_STR = r"\"[\w\d\s]*\""


@dataclasses.dataclass
class SamplingArgs:
    """One generation's settings, SGLang's ``SglSamplingParams`` fields and defaults (those of
    ``function.run``). ``None`` in a ``gen`` means "the program's default"."""

    max_new_tokens: int = 128
    min_new_tokens: int = 0
    n: int = 1
    stop: Any = ()
    stop_token_ids: Any = ()
    stop_regex: Any = ()
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    ignore_eos: bool = False
    return_logprob: bool | None = None
    logprob_start_len: int | None = None
    top_logprobs_num: int | None = None
    return_text_in_logprobs: bool | None = None
    json_schema: str | None = None
    dtype: Any = None
    regex: str | None = None

    def overridden_by(self, other: "SamplingArgs") -> "SamplingArgs":
        """These defaults with every field ``other`` sets (not None) taken from ``other``."""
        out = dataclasses.replace(self)
        for f in dataclasses.fields(self):
            value = getattr(other, f.name)
            if value is not None:
                setattr(out, f.name, value)
        return out

    def stop_list(self) -> list[str]:
        stop = self.stop
        if stop is None:
            return []
        return [stop] if isinstance(stop, str) else list(stop)

    def to_srt_kwargs(self) -> dict:
        """The ``sampling_params`` of SGLang's ``/generate`` (``SglSamplingParams.to_srt_kwargs``)."""
        return {"max_new_tokens": self.max_new_tokens, "min_new_tokens": self.min_new_tokens, "n": self.n,
                "stop": self.stop, "stop_token_ids": self.stop_token_ids, "stop_regex": self.stop_regex,
                "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k, "min_p": self.min_p,
                "frequency_penalty": self.frequency_penalty, "presence_penalty": self.presence_penalty,
                "ignore_eos": self.ignore_eos, "regex": self.regex, "json_schema": self.json_schema}


def unset_args(**values) -> SamplingArgs:
    """A SamplingArgs with every field None except ``values`` (a ``gen``'s overrides)."""
    out = SamplingArgs(**{f.name: None for f in dataclasses.fields(SamplingArgs)})
    for k, v in values.items():
        setattr(out, k, v)
    return out


class Expr:
    """Something a program appends to its state; ``a + b`` concatenates."""

    def __add__(self, other):
        return ExprList(_items(self) + _items(_as_expr(other)))

    def __radd__(self, other):
        return ExprList(_items(_as_expr(other)) + _items(self))


def _as_expr(x) -> "Expr":
    if isinstance(x, str):
        return ConstantText(x)
    if not isinstance(x, Expr):
        raise TypeError(f"cannot append a {type(x).__name__} to a program state (a str or a leapgen.frontend "
                        "expression is needed)")
    return x


def _items(x: "Expr") -> list:
    return list(x.exprs) if isinstance(x, ExprList) else [x]


@dataclasses.dataclass(eq=False)
class ExprList(Expr):
    exprs: list


@dataclasses.dataclass(eq=False)
class ConstantText(Expr):
    value: str


@dataclasses.dataclass(eq=False)
class RoleBegin(Expr):
    role: str


@dataclasses.dataclass(eq=False)
class RoleEnd(Expr):
    role: str


@dataclasses.dataclass(eq=False)
class Gen(Expr):
    name: str | None
    args: SamplingArgs


@dataclasses.dataclass(eq=False)
class Select(Expr):
    name: str | None
    choices: list
    temperature: float
    choices_method: Any
