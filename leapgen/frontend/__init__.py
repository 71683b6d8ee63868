"""SGLang's frontend language on leapgen: ``import leapgen.frontend as sgl``.

Programs written for SGLang's frontend (``sglang/lang``) run with only the
import line changed::

    import json
    import leapgen.frontend as sgl

    @sgl.function
    def extract(s, text):
        s += sgl.user(text)
        s += sgl.assistant_begin()
        s += sgl.gen("person", json_schema=json.dumps({"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer"}}}))
        s += sgl.assistant_end()

    state = extract.run(text="Ada Lovelace, 36.")
    state["person"], state.text()

Backends: the embedded engine (:class:`Engine`, the default, created on first
use) or ``sgl.set_default_backend(sgl.RuntimeEndpoint("http://127.0.0.1:8000"))``
(SGLang's native ``/generate`` protocol).

What is here: ``function`` (``run``, ``run_batch``, ``bind``), ``gen``
(``max_tokens``, ``stop``, ``stop_token_ids``, ``temperature``, ``top_p``,
``top_k``, ``regex``, ``json_schema``, ``choices``; the other SGLang fields
are refused by name where the backend cannot honour them), ``gen_int``,
``gen_string``, ``select`` (with SGLang's choice methods, and leapgen's
``constrained_decoding``; see :mod:`leapgen.frontend.choices`), ``system`` /
``user`` / ``assistant`` and their ``_begin`` / ``_end`` forms, the state's
``s["name"]``, ``text()``, ``messages()`` and role context managers. Not
here: ``fork``, streaming, images and videos, ``separate_reasoning``,
tracing and ``cache``. Regexes are leapgen's (ECMAScript), not Python's.
"""

from __future__ import annotations

from leapgen.frontend.backend import BaseBackend, Engine
from leapgen.frontend.choices import (ChoicesDecision, ChoicesSamplingMethod, check_choices, constrained_decoding,
                                      greedy_token_selection, token_length_normalized,
                                      unconditional_likelihood_normalized)
from leapgen.frontend.global_config import global_config
from leapgen.frontend.interpreter import ProgramState
from leapgen.frontend.function import Function
from leapgen.frontend.ir import ExprList, Gen, RoleBegin, RoleEnd, Select, _as_expr, unset_args
from leapgen.frontend.runtime_endpoint import RuntimeEndpoint

__all__ = [
    "BaseBackend", "ChoicesDecision", "ChoicesSamplingMethod", "Engine", "ProgramState", "RuntimeEndpoint",
    "assistant", "assistant_begin", "assistant_end", "constrained_decoding", "function", "gen", "gen_int",
    "gen_string", "global_config", "greedy_token_selection", "select", "set_default_backend", "system",
    "system_begin", "system_end", "token_length_normalized", "unconditional_likelihood_normalized", "user",
    "user_begin", "user_end",
]


def function(func=None, num_api_spec_tokens=None):
    """Decorate ``func(s, ...)`` as a program (``@function`` or ``@function()``)."""
    if num_api_spec_tokens is not None:
        raise ValueError("num_api_spec_tokens (API speculative execution) is not supported")
    if func is not None:
        return Function(func)
    return Function


def set_default_backend(backend: BaseBackend) -> None:
    """The backend ``run`` and ``run_batch`` use when none is passed (mutates ``global_config``)."""
    global_config.default_backend = backend


def gen(name: str | None = None, max_tokens: int | None = None, min_tokens: int | None = None, n: int | None = None,
        stop=None, stop_token_ids=None, stop_regex=None, temperature: float | None = None, top_p: float | None = None,
        top_k: int | None = None, min_p: float | None = None, frequency_penalty: float | None = None,
        presence_penalty: float | None = None, ignore_eos: bool | None = None, return_logprob: bool | None = None,
        logprob_start_len: int | None = None, top_logprobs_num: int | None = None,
        return_text_in_logprobs: bool | None = None, dtype=None, choices=None, choices_method=None,
        regex: str | None = None, json_schema: str | None = None):
    """Generate into variable ``name``: SGLang's ``gen`` (unset settings take the program's
    defaults from ``run``). With ``choices`` it is a :func:`select`.

    Raises
    ------
    ValueError
        Both ``regex`` and ``json_schema``.
    """
    if choices:
        return Select(name, check_choices(choices), 0.0 if temperature is None else temperature,
                      token_length_normalized if choices_method is None else choices_method)
    if regex is not None and json_schema is not None:
        raise ValueError("gen takes at most one of regex and json_schema")
    if json_schema is not None and not isinstance(json_schema, str):
        import json

        json_schema = json.dumps(json_schema)
    return Gen(name, unset_args(
        max_new_tokens=max_tokens, min_new_tokens=min_tokens, n=n, stop=stop, stop_token_ids=stop_token_ids,
        stop_regex=stop_regex, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
        frequency_penalty=frequency_penalty, presence_penalty=presence_penalty, ignore_eos=ignore_eos,
        return_logprob=return_logprob, logprob_start_len=logprob_start_len, top_logprobs_num=top_logprobs_num,
        return_text_in_logprobs=return_text_in_logprobs, dtype=dtype, regex=regex, json_schema=json_schema))


def gen_int(name: str | None = None, max_tokens: int | None = None, **kwargs):
    """``gen`` of an integer (SGLang's regex for it; stops at a space or newline)."""
    return gen(name, max_tokens, dtype=int, **kwargs)


def gen_string(name: str | None = None, max_tokens: int | None = None, **kwargs):
    """``gen`` of a double-quoted string of word characters and blanks (SGLang's regex)."""
    return gen(name, max_tokens, dtype=str, **kwargs)


def select(name: str | None = None, choices=None, temperature: float = 0.0,
           choices_method: ChoicesSamplingMethod = token_length_normalized):
    """Append exactly one of ``choices`` and store it under ``name`` (see :mod:`leapgen.frontend.choices`)."""
    return Select(name, check_choices(choices), temperature, choices_method)


def _role(role: str, expr=None):
    if expr is None:
        return ExprList([RoleBegin(role), RoleEnd(role)])
    return ExprList([RoleBegin(role), _as_expr(expr), RoleEnd(role)])


def system(expr=None):
    return _role("system", expr)


def user(expr=None):
    return _role("user", expr)


def assistant(expr=None):
    return _role("assistant", expr)


def system_begin():
    return RoleBegin("system")


def system_end():
    return RoleEnd("system")


def user_begin():
    return RoleBegin("user")


def user_end():
    return RoleEnd("user")


def assistant_begin():
    return RoleBegin("assistant")


def assistant_end():
    return RoleEnd("assistant")
