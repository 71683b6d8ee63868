"""The expressions a program appends to its state (``s += ...``), and the
sampling settings of one ``gen``: SGLang's ``sglang/lang/ir.py`` nouns."""

from __future__ import annotations

import dataclasses
import inspect
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


class Function:
    """A program: a Python function whose first argument is the state ``s``
    (``@function``). SGLang's ``SglFunction``.

    Parameters
    ----------
    func : callable
        ``func(s, *args, **kwargs)``.

    Raises
    ------
    ValueError
        The first parameter is not named ``s``.
    """

    def __init__(self, func, bind_arguments: dict | None = None):
        spec = inspect.getfullargspec(func)
        if not spec.args or spec.args[0] != "s":
            raise ValueError('the first argument of a leapgen.frontend function must be "s"')
        self.func = func
        self.arg_names = spec.args[1:]
        self.arg_defaults = spec.defaults or ()
        self.bind_arguments = bind_arguments or {}
        functools_update(self, func)

    def bind(self, **kwargs) -> "Function":
        """A copy with some arguments fixed."""
        unknown = [k for k in kwargs if k not in self.arg_names]
        if unknown:
            raise TypeError(f"{self.func.__name__}() has no argument(s) {unknown}")
        return Function(self.func, {**self.bind_arguments, **kwargs})

    def run(self, *args, max_new_tokens: int = 128, n: int = 1, stop=None, stop_token_ids=None, stop_regex=None,
            temperature: float = 1.0, top_p: float = 1.0, top_k: int = -1, min_p: float = 0.0,
            frequency_penalty: float = 0.0, presence_penalty: float = 0.0, ignore_eos: bool = False,
            return_logprob=None, logprob_start_len=None, top_logprobs_num=None, return_text_in_logprobs=None,
            stream: bool = False, backend=None, **kwargs):
        """Run the program once; returns its :class:`~leapgen.frontend.interpreter.ProgramState`.

        The keyword arguments are SGLang's, with its defaults (note
        ``temperature=1.0``: sampling, as in SGLang); other keyword
        arguments are the program's own.

        Raises
        ------
        ValueError
            ``stream=True`` (not supported), or a sampling setting the backend
            cannot honour (named).
        """
        from leapgen.frontend.interpreter import run_program

        defaults = SamplingArgs(max_new_tokens=max_new_tokens, n=n, stop=stop or [], stop_token_ids=stop_token_ids or [],
                                stop_regex=stop_regex or [], temperature=temperature, top_p=top_p, top_k=top_k,
                                min_p=min_p, frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
                                ignore_eos=ignore_eos, return_logprob=return_logprob,
                                logprob_start_len=logprob_start_len, top_logprobs_num=top_logprobs_num,
                                return_text_in_logprobs=return_text_in_logprobs)
        if stream:
            raise ValueError("stream=True is not supported by leapgen.frontend (run it without streaming)")
        return run_program(self, backend, args, kwargs, defaults)

    def run_batch(self, batch_kwargs, *, max_new_tokens: int = 128, n: int = 1, stop=(), stop_token_ids=None,
                  stop_regex=None, temperature: float = 1.0, top_p: float = 1.0, top_k: int = -1, min_p: float = 0.0,
                  frequency_penalty: float = 0.0, presence_penalty: float = 0.0, ignore_eos: bool = False,
                  return_logprob=None, logprob_start_len=None, top_logprobs_num=None,
                  return_text_in_logprobs=None, backend=None, num_threads="auto", progress_bar: bool = False):
        """Run the program once per item of ``batch_kwargs`` (dicts of arguments, or lists of
        positional values), concurrently; returns the states in order. The backend batches
        the programs' generations (continuous batching on the embedded engine)."""
        from leapgen.frontend.interpreter import run_program_batch

        if not isinstance(batch_kwargs, (list, tuple)):
            raise TypeError("run_batch takes a list of argument dicts (or of argument lists)")
        if not batch_kwargs:
            return []
        required = len(self.arg_names) - len(self.arg_defaults)
        rows = []
        for v in batch_kwargs:
            if isinstance(v, dict):
                rows.append(v)
            elif isinstance(v, (list, tuple)) and required <= len(v) <= len(self.arg_names):
                rows.append(dict(zip(self.arg_names, v)))
            else:
                raise TypeError(f"run_batch item {v!r} does not match the function's signature {self.arg_names}")
        batch_kwargs = rows
        defaults = SamplingArgs(max_new_tokens=max_new_tokens, n=n, stop=stop or [], stop_token_ids=stop_token_ids or [],
                                stop_regex=stop_regex or [], temperature=temperature, top_p=top_p, top_k=top_k,
                                min_p=min_p, frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
                                ignore_eos=ignore_eos, return_logprob=return_logprob,
                                logprob_start_len=logprob_start_len, top_logprobs_num=top_logprobs_num,
                                return_text_in_logprobs=return_text_in_logprobs)
        return run_program_batch(self, backend, list(batch_kwargs), defaults, num_threads, progress_bar)

    def __call__(self, *args, **kwargs):
        return self.run(*args, **kwargs)


def functools_update(wrapper, func) -> None:
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(func, attr))
        except AttributeError:
            pass
