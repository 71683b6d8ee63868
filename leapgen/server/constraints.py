"""A request's constraint -> the engine's grammar: :func:`grammar_params`.

One responsibility, in one place: whichever field a request spells its
constraint with (OpenAI's ``response_format``, vLLM's ``structured_outputs``
and older ``guided_*``, SGLang's ``sampling_params``, leapgen's ``regex`` /
``ebnf`` / ``json_schema``), it becomes one :class:`Constraint`, and this
module maps it onto :class:`~leapgen.engine.SamplingParams`' grammar fields.
At most one constraint per request (as vLLM: "You can only use one kind of
structured outputs constraint").

A ``structural_tag`` is xgrammar's (a dict in either form, or its JSON
text); its tags' content streams as text. Tool calls are structural tags too,
built by :mod:`leapgen.engine.chat` from ``tools``, never together with a
constraint. A ``grammar`` is GBNF when it contains ``::=``, else Lark (vLLM's rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The kinds a constraint can be.
KINDS = ("json_schema", "json_object", "regex", "grammar", "choice", "structural_tag")


class RequestRefused(ValueError):
    """A request the server answers with a 400 that names the field.

    Attributes
    ----------
    param : str or None
        The field, as a dotted path (``structured_outputs.grammar``).
    code : str or None
        OpenAI's error ``code`` (``"not_supported"``, ...).
    """

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.code = code


def not_supported(field: str, why: str | None = None) -> RequestRefused:
    """The refusal of a field leapgen does not implement (or not with this value)."""
    return RequestRefused(f"not supported: {field}" + (f" ({why})" if why else ""), param=field,
                          code="not_supported")


@dataclass(frozen=True)
class Constraint:
    """One constraint as a request gave it.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    value : Any
        The schema (dict, bool or JSON text), pattern, grammar text, list of
        choices, or structural tag; ``True`` for ``json_object``.
    field : str
        The request field that holds it (a 400 about it names this field).
    """

    kind: str
    value: Any
    field: str


@dataclass(frozen=True)
class JsonLayout:
    """How JSON constraints lay out whitespace (vLLM's knobs; defaults are
    the server's fixed layout, see :class:`~leapgen.engine.SamplingParams`).

    Attributes
    ----------
    disable_any_whitespace : bool
        No whitespace at all (separators ``","`` and ``":"``).
    whitespace_pattern : str or None
        A regex for each whitespace run (free whitespace).
    strict : bool or None
        False: an object schema without ``additionalProperties`` admits other
        members (the specification's reading); True/None: it does not.
    fields : tuple of str
        The request fields that set a non-default layout (named in errors).
    """

    disable_any_whitespace: bool = False
    whitespace_pattern: str | None = None
    strict: bool | None = None
    fields: tuple[str, ...] = ()


def single(constraints: list[Constraint]) -> Constraint | None:
    """The request's one constraint, or None.

    Raises
    ------
    RequestRefused
        More than one.
    """
    if len(constraints) > 1:
        names = " and ".join(c.field for c in constraints)
        raise RequestRefused(f"give at most one constraint (json, json_object, regex, choice, grammar, "
                             f"structural_tag); got {names}", param=constraints[1].field)
    return constraints[0] if constraints else None


def grammar_params(constraint: Constraint | None, layout: JsonLayout = JsonLayout()) -> dict[str, Any]:
    """The :class:`~leapgen.engine.SamplingParams` grammar fields of a constraint.

    Parameters
    ----------
    constraint : Constraint or None
    layout : JsonLayout
        Applies to ``json_schema`` and ``json_object`` only.

    Returns
    -------
    dict
        Keyword arguments (``json_schema=``, ``regex=``, ``ebnf=``, ``lark=``,
        ``choice=``, ``json_object=``, and the JSON layout ones); empty when
        unconstrained.

    Raises
    ------
    RequestRefused
        A malformed constraint (an empty ``choice``, a ``structural_tag``
        that is neither an object nor JSON text), or layout options given
        for a constraint that is not JSON.
    """
    if constraint is None or constraint.kind not in ("json_schema", "json_object"):
        if layout.fields:
            raise RequestRefused(f"{layout.fields[0]} applies to a JSON constraint (json, json_object) only",
                                 param=layout.fields[0])
    if constraint is None:
        return {}
    kind, value, field = constraint.kind, constraint.value, constraint.field
    if kind == "structural_tag":
        if not isinstance(value, (dict, str)):
            raise RequestRefused(f"{field} must be a structural tag object or its JSON text", param=field)
        return {"structural_tag": value}
    if kind == "regex":
        return {"regex": value}
    if kind == "grammar":  # GBNF when it defines a rule with ``::=``, else Lark (vLLM's rule)
        return {"ebnf": value} if "::=" in value else {"lark": value}
    if kind == "choice":
        if not value:
            raise RequestRefused(f"{field} needs at least one string", param=field)
        return {"choice": tuple(value)}
    out: dict[str, Any] = {"json_object": True} if kind == "json_object" else {"json_schema": value}
    if layout.disable_any_whitespace and layout.whitespace_pattern is not None:
        raise RequestRefused("give disable_any_whitespace or whitespace_pattern, not both", param=layout.fields[0])
    if layout.disable_any_whitespace:
        out["json_separators"] = (",", ":")
    elif layout.whitespace_pattern is not None:
        out["json_whitespace_pattern"] = layout.whitespace_pattern
    if layout.strict is False and kind == "json_schema":
        out["json_strict"] = False
    return out
