"""A kernel signature's types as text, read without numba: the ahead-of-time kernels' notation.

One responsibility. ``leapgen/automata/kernel_signatures.txt`` lists, per kernel, the argument and
return types numba compiled it for, one line each::

    leapgen.compiler.compact_rows:narrow_byte(int32[::1], int64, int64) -> int64

The notation is numba's array-slice spelling (``int32[::1]`` a C-contiguous vector, ``uint8[:, ::1]`` a
C-contiguous matrix, ``int32[:]`` any layout), ``readonly`` before an array its kernel never writes,
scalar names as numpy spells them (``bool`` for numba's ``boolean``), ``none``, and tuples in parentheses.
:func:`parse_type` reads it into plain tuples (no numba), which :mod:`leapgen.automata.aot` turns into
argument checks and :mod:`leapgen.automata.aot_build` into numba types; :func:`format_type` (needs
numba) writes a numba type in it.
"""

from __future__ import annotations

import re
from typing import Union

SCALARS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
           "float64", "none")
"""The scalar type names of the notation."""

Type = Union[str, tuple]
"""A parsed type: a scalar name, ``("array", dtype, ndim, layout, readonly)`` with layout ``"C"`` or
``"A"``, or ``("tuple", (item, ...))``."""

_TOKEN = re.compile(r"\s*(readonly\b|[A-Za-z_][A-Za-z_0-9]*|::1|->|[()\[\],:]|\S)")


class SignatureSyntaxError(ValueError):
    """A line of the signature notation that does not parse (the message names the offset)."""


def _tokens(text: str) -> list[tuple[str, int]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # trailing whitespace
            break
        out.append((m.group(1), m.start(1)))
        pos = m.end()
    return out


class _Reader:
    def __init__(self, text: str):
        self.text, self.tokens, self.i = text, _tokens(text), 0

    def peek(self) -> str:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        if self.i >= len(self.tokens):
            raise SignatureSyntaxError(f"{self.text!r}: ended early (offset {len(self.text)})")
        tok, at = self.tokens[self.i]
        if expected is not None and tok != expected:
            raise SignatureSyntaxError(f"{self.text!r}: expected {expected!r} at offset {at}, found {tok!r}")
        self.i += 1
        return tok

    def offset(self) -> int:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else len(self.text)

    def error(self, what: str, at: int | None = None) -> SignatureSyntaxError:
        return SignatureSyntaxError(f"{self.text!r}: {what} at offset {self.offset() if at is None else at}")

    def type(self) -> Type:
        if self.peek() == "(":
            return ("tuple", self.items(")"))
        start = self.offset()
        readonly = self.peek() == "readonly"
        if readonly:
            self.take()
        at = self.offset()
        name = self.take()
        if name not in SCALARS:
            raise self.error(f"unknown type {name!r}", at)
        if self.peek() != "[":
            if readonly:
                raise self.error("'readonly' before a scalar", start)
            return name
        bracket = self.offset()
        self.take("[")
        dims = []
        while True:
            if self.peek() == "::1":
                self.take()
                dims.append("::1")
            else:
                self.take(":")
                dims.append(":")
            if self.peek() == "]":
                self.take()
                break
            self.take(",")
        if dims == [":"] * (len(dims) - 1) + ["::1"]:
            layout = "C"
        elif "::1" not in dims:
            layout = "A"
        else:
            raise self.error("only C-contiguous ('::1' last) or any-layout arrays", bracket)
        return ("array", name, len(dims), layout, readonly)

    def items(self, close: str) -> tuple:
        self.take("(")
        out = []
        while self.peek() != close:
            out.append(self.type())
            if self.peek() == ",":
                self.take()
            elif self.peek() != close:
                raise self.error(f"expected ',' or {close!r}")
        self.take(close)
        return tuple(out)


def parse_type(text: str) -> Type:
    """Read one type of the notation.

    Parameters
    ----------
    text : str
        e.g. ``"readonly uint8[:, ::1]"`` or ``"(int64, int32[::1])"``.

    Returns
    -------
    Type
        See :data:`Type`.

    Raises
    ------
    SignatureSyntaxError
        If ``text`` is not one type of the notation (the message gives the offset).
    """
    reader = _Reader(text)
    out = reader.type()
    if reader.peek():
        raise reader.error("text after the type")
    return out


def parse_signature(line: str) -> tuple[str, tuple, Type]:
    """Read one line of ``kernel_signatures.txt``: ``module:qualname(args) -> return``.

    Returns
    -------
    tuple
        ``(kernel, args, return)``: the kernel's ``"module:qualname"``, its argument types (a tuple of
        :data:`Type`) and its return type.

    Raises
    ------
    SignatureSyntaxError
        If the line does not parse (the message gives the offset).
    """
    paren = line.find("(")
    if paren <= 0 or ":" not in line[:paren]:
        raise SignatureSyntaxError(f"{line!r}: expected 'module:qualname(' at offset 0")
    kernel = line[:paren].strip()
    reader = _Reader(line[paren:])
    args = reader.items(")")
    reader.take("->")
    ret = reader.type()
    if reader.peek():
        raise reader.error("text after the return type")
    return kernel, args, ret


def format_type(numba_type) -> str:
    """Write a numba type in the notation (imports nothing; the caller has numba).

    Parameters
    ----------
    numba_type : numba.core.types.Type
        A scalar, array, tuple, ``none``, literal (written as its value's type) or omitted argument
        (written as its default's type: a Python int is ``int64``, a float ``float64``, a bool
        ``bool``).

    Returns
    -------
    str

    Raises
    ------
    TypeError
        For a type the notation cannot write (records, lists, dicts, F-contiguous arrays, ...).
    """
    from numba.core import types

    t = numba_type
    if isinstance(t, types.Literal):
        t = t.literal_type
    if isinstance(t, types.Omitted):
        default = t.value
        name = {bool: "bool", int: "int64", float: "float64", type(None): "none"}.get(type(default))
        if name is None:
            raise TypeError(f"an omitted argument defaulting to {default!r} has no type in the notation")
        return name
    if isinstance(t, types.Array):
        if t.layout not in ("C", "A") or t.ndim < 1:
            raise TypeError(f"{t}: only C-contiguous or any-layout arrays of one or more dimensions")
        dims = [":"] * t.ndim
        if t.layout == "C":
            dims[-1] = "::1"
        return f"{'readonly ' if not t.mutable else ''}{format_type(t.dtype)}[{', '.join(dims)}]"
    if isinstance(t, types.BaseTuple):
        items = [format_type(item) for item in t]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(t, types.NoneType):
        return "none"
    if isinstance(t, types.Boolean):
        return "bool"
    name = str(t)
    if name not in SCALARS:
        raise TypeError(f"{t}: no type of that kind in the notation")
    return name


_NARROW_INTEGERS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"}


def takes_all_of(general: tuple, specific: tuple) -> bool:
    """Whether a kernel compiled for the argument types ``general`` computes the same for every argument
    list of the types ``specific`` (both parsed by :func:`parse_signature`): equal types, or a read-only
    array type where ``specific`` has the same array writable, or ``int64`` where ``specific`` has a
    narrower integer (or ``uint32`` and narrower unsigned). Pure."""
    if len(general) != len(specific):
        return False
    for g, s in zip(general, specific):
        if g == s:
            continue
        if isinstance(g, tuple) and isinstance(s, tuple) and g[0] == s[0] == "array":
            if g[:4] != s[:4] or not g[4]:
                return False
        elif not (g == "int64" and s in _NARROW_INTEGERS):
            return False
    return True
