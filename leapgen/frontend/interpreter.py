"""Running a program: the state ``s`` it appends to, and batches of programs.

SGLang's semantics (``sglang/lang/interpreter.py``): the state holds the
text so far; a role expression appends the chat template's prefix, its
content and the suffix (the first role, when it is not ``system``, is
preceded by the template's default system prompt, if any); ``gen`` sends the
whole text to the backend and appends the completion, stored under its name;
``select`` appends the chosen choice. Every ``gen`` also stops at the
template's end-of-turn string.

One difference: SGLang runs each program's expressions on a worker thread
and records an error in ``state.error()``; here ``s += ...`` runs at once in
the program's thread, and an error (a bad grammar, a refused setting) is
raised from ``run``. ``run_batch`` runs programs on a thread pool, as SGLang
does, so the backend sees their generations together.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from leapgen.frontend.choices import check_choices
from leapgen.frontend.global_config import global_config
from leapgen.frontend.ir import (REGEX_INT, REGEX_STR, ConstantText, Expr, ExprList, Gen, RoleBegin, RoleEnd,
                                 SamplingArgs, Select, _as_expr)


class StreamExecutor:
    """The text, messages and variables of one running program (mutated by :meth:`execute`)."""

    def __init__(self, backend, arguments: dict, defaults: SamplingArgs):
        self.backend = backend
        self.arguments = arguments
        self.defaults = defaults
        self.chat_template = backend.get_chat_template()
        self.text_ = ""
        self.messages_: list[dict] = []
        self.variables: dict = {}
        self.meta_info: dict = {}
        self.cur_role: str | None = None
        self.cur_role_begin_pos: int | None = None

    def execute(self, expr) -> None:
        expr = _as_expr(expr)
        if isinstance(expr, ExprList):
            for e in expr.exprs:
                self.execute(e)
        elif isinstance(expr, ConstantText):
            self.text_ += str(expr.value)
        elif isinstance(expr, Gen):
            self._gen(expr)
        elif isinstance(expr, Select):
            self._select(expr)
        elif isinstance(expr, RoleBegin):
            self._role_begin(expr.role)
        elif isinstance(expr, RoleEnd):
            self._role_end(expr.role)
        else:
            raise TypeError(f"cannot run a {type(expr).__name__}")

    def resolve(self, args: SamplingArgs) -> SamplingArgs:
        """The program's defaults overridden by one ``gen``'s settings, ``dtype`` turned into its
        regex, the template's end-of-turn strings added to ``stop``."""
        out = self.defaults.overridden_by(args)
        stop = out.stop_list()
        if out.dtype is not None:
            if out.dtype in (int, "int"):
                out.regex = REGEX_INT
                stop += [" ", "\n"]
            elif out.dtype in (str, "str"):
                out.regex = REGEX_STR
            else:
                raise ValueError(f"unsupported dtype {out.dtype!r} (int or str)")
            out.dtype = None
        out.stop = stop + [s for s in self.chat_template.stop_str if s not in stop]
        return out

    def _gen(self, expr: Gen) -> None:
        text, meta = self.backend.generate(self, self.resolve(expr.args))
        self.text_ += text
        self.variables[expr.name] = text
        self.meta_info[expr.name] = meta

    def _select(self, expr: Select) -> None:
        decision = self.backend.select(self, check_choices(expr.choices), expr.temperature, expr.choices_method)
        if expr.name is not None:
            self.variables[expr.name] = decision.decision
            self.meta_info[expr.name] = decision.meta_info
        self.text_ += decision.decision

    def _role_begin(self, role: str) -> None:
        if self.cur_role is not None:
            raise ValueError(f"role {role!r} begins inside role {self.cur_role!r}: nested roles are not allowed")
        if not self.messages_ and role != "system" and self.chat_template.default_system_prompt:
            self._role_begin("system")
            self.text_ += self.chat_template.default_system_prompt
            self._role_end("system")
        self.cur_role = role
        self.text_ += self.chat_template.get_prefix_and_suffix(role)[0]
        self.cur_role_begin_pos = len(self.text_)

    def _role_end(self, role: str) -> None:
        if self.cur_role != role:
            raise ValueError(f"role {role!r} ends but {self.cur_role!r} is open")
        content = self.text_[self.cur_role_begin_pos:].lstrip()
        self.cur_role = None
        self.text_ += self.chat_template.get_prefix_and_suffix(role)[1]
        self.messages_.append({"role": role, "content": content})


class ProgramState:
    """What a program sees as ``s`` and what ``run`` returns.

    ``s += expr`` runs ``expr``; ``s["name"]`` is a ``gen``'s or ``select``'s
    text; ``s.text()`` the whole text, roles' markup included;
    ``s.messages()`` the conversation (OpenAI format).
    """

    def __init__(self, executor: StreamExecutor):
        self.stream_executor = executor

    def __iadd__(self, other):
        if other is None:
            raise ValueError("tried to append None to the state")
        self.stream_executor.execute(other)
        return self

    def text(self) -> str:
        return self.stream_executor.text_

    def messages(self) -> list[dict]:
        return list(self.stream_executor.messages_)

    def get_var(self, name: str):
        return self.stream_executor.variables[name]

    def set_var(self, name: str, value) -> None:
        self.stream_executor.variables[name] = value

    def get_meta_info(self, name: str):
        return self.stream_executor.meta_info.get(name)

    def __getitem__(self, name: str):
        return self.get_var(name)

    def __setitem__(self, name: str, value) -> None:
        self.set_var(name, value)

    def __contains__(self, name: str) -> bool:
        return name in self.stream_executor.variables

    def sync(self) -> None:
        """Nothing to wait for: expressions run when appended."""

    def error(self):
        """None: errors are raised by ``run`` (see the module docstring)."""
        return None

    def _role(self, role: str, expr: Expr | None):
        if expr is not None:
            self += ExprList([RoleBegin(role), _as_expr(expr), RoleEnd(role)])
            return None

        @contextmanager
        def scope():
            self.stream_executor.execute(RoleBegin(role))
            yield
            self.stream_executor.execute(RoleEnd(role))

        return scope()

    def system(self, expr=None):
        return self._role("system", expr)

    def user(self, expr=None):
        return self._role("user", expr)

    def assistant(self, expr=None):
        return self._role("assistant", expr)

    def __repr__(self) -> str:
        return f"ProgramState({self.text()!r})"


def _backend(backend):
    backend = backend or global_config.default_backend
    if backend is None:
        from leapgen.frontend.backend import Engine

        backend = global_config.default_backend = Engine()  # the embedded engine, created on first use
    return backend


def run_program(program, backend, args: tuple, kwargs: dict, defaults: SamplingArgs) -> ProgramState:
    """Run ``program`` once; returns its state."""
    kwargs = {**kwargs, **program.bind_arguments}
    state = ProgramState(StreamExecutor(_backend(backend), kwargs, defaults))
    program.func(state, *args, **kwargs)
    return state


def run_program_batch(program, backend, batch: list[dict], defaults: SamplingArgs, num_threads,
                      progress_bar: bool) -> list[ProgramState]:
    """Run ``program`` once per argument dict, on a thread pool; states in order."""
    backend = _backend(backend)
    if num_threads == "auto":
        num_threads = 64
    num_threads = max(1, min(int(num_threads), len(batch)))
    if num_threads == 1:
        return [run_program(program, backend, (), kw, defaults) for kw in batch]
    with ThreadPoolExecutor(num_threads, thread_name_prefix="leapgen-frontend") as pool:
        futures = [pool.submit(run_program, program, backend, (), kw, defaults) for kw in batch]
        return [f.result() for f in futures]
