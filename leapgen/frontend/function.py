"""A program: ``@function`` turns ``func(s, ...)`` into one, with SGLang's ``run``,
``run_batch`` and ``bind`` (``SglFunction`` in ``sglang/lang/ir.py``)."""

from __future__ import annotations

import inspect

from leapgen.frontend.interpreter import run_program, run_program_batch
from leapgen.frontend.ir import SamplingArgs


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
