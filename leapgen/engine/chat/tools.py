"""A request's ``tools`` and ``tool_choice`` (OpenAI's shapes), read and checked.

One responsibility: turn the JSON a caller gives into :class:`Tool` and
:class:`ToolChoice`, or raise :class:`ToolsError` naming the field
(``tools[1].function.parameters``) and, for a schema, the JSON pointer inside
it. Each tool's ``parameters`` goes through the JSON Schema front-end here,
before any compile, so a bad schema is refused at once and names its tool.

- ``tools``: ``[{"type": "function", "function": {"name", "description",
  "parameters", "strict"}}]``; names as OpenAI allows them
  (``[a-zA-Z0-9_-]{1,64}``), distinct. Omitted ``parameters``: no arguments
  (``{}``), as OpenAI reads it.
- ``strict: true`` or absent: the arguments match ``parameters`` exactly;
  ``strict: false``: they are any JSON object (``parameters`` still goes to
  the prompt and is still checked).
- ``tool_choice``: ``"none"``, ``"auto"``, ``"required"``, or ``{"type":
  "function", "function": {"name": ...}}``; absent: ``"auto"`` with tools,
  ``"none"`` without (OpenAI's defaults).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

#: OpenAI's rule for function names.
NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
#: The arguments of a function without ``parameters``: an empty object.
NO_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}
#: The arguments under ``strict: false``: any JSON object.
ANY_OBJECT = {"type": "object", "additionalProperties": True}
_FUNCTION_FIELDS = {"name", "description", "parameters", "strict"}


class ToolsError(ValueError):
    """Bad ``tools`` or ``tool_choice``.

    Attributes
    ----------
    param : str
        The field, as a dotted path with indices (``tools[0].function.parameters``).
    """

    def __init__(self, message: str, *, param: str):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Tool:
    """One function the model may call.

    Attributes
    ----------
    name : str
    parameters : dict
        The JSON Schema of its arguments (:data:`NO_PARAMETERS` when omitted).
    description : str or None
    strict : bool or None
        False: the arguments are any JSON object.
    """

    name: str
    parameters: Any
    description: str | None = None
    strict: bool | None = None

    def arguments_format(self) -> dict:
        """The structural-tag format of its arguments (a ``json_schema``)."""
        return {"type": "json_schema", "json_schema": ANY_OBJECT if self.strict is False else self.parameters}

    def to_openai(self) -> dict:
        """OpenAI's tool object (what chat templates are given)."""
        function: dict = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        function["parameters"] = self.parameters
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolChoice:
    """How the tools constrain the output.

    Attributes
    ----------
    mode : str
        ``"none"`` (no tool in the grammar), ``"auto"`` (text or calls),
        ``"required"`` (at least one call) or ``"named"`` (one call of
        ``name``).
    name : str or None
        The function of ``"named"``.
    """

    mode: str
    name: str | None = None

    @property
    def calls_tools(self) -> bool:
        """Whether the grammar holds tool calls (any mode but ``"none"``)."""
        return self.mode != "none"


def read_tools(tools: Sequence[Any] | None) -> tuple[Tool, ...]:
    """Read and check OpenAI ``tools`` (not mutated).

    Returns
    -------
    tuple of Tool
        Empty for None or ``[]``.

    Raises
    ------
    ToolsError
        A tool that is not a function tool, a missing, ill-formed or repeated
        name, an unknown field, or ``parameters`` that is not a JSON Schema
        leapgen compiles (the message holds the JSON pointer inside it).
    """
    if tools is None:
        return ()
    if not isinstance(tools, (list, tuple)):
        raise ToolsError(f"tools must be a list, got {type(tools).__name__}", param="tools")
    out: list[Tool] = []
    seen: set[str] = set()
    for i, item in enumerate(tools):
        at = f"tools[{i}]"
        if not isinstance(item, dict):
            raise ToolsError(f"{at} must be an object", param=at)
        if item.get("type") != "function":
            raise ToolsError(f"{at}.type must be \"function\" (the only tool type served), got "
                             f"{item.get('type')!r}", param=f"{at}.type")
        extra = sorted(set(item) - {"type", "function"})
        if extra:
            raise ToolsError(f"{at} has no field {extra[0]!r}", param=f"{at}.{extra[0]}")
        function = item.get("function")
        if not isinstance(function, dict):
            raise ToolsError(f"{at}.function must be an object", param=f"{at}.function")
        extra = sorted(set(function) - _FUNCTION_FIELDS)
        if extra:
            raise ToolsError(f"{at}.function has no field {extra[0]!r}", param=f"{at}.function.{extra[0]}")
        name = function.get("name")
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise ToolsError(f"{at}.function.name must be 1-64 characters of a-z, A-Z, 0-9, _ and -, got {name!r}",
                             param=f"{at}.function.name")
        if name in seen:
            raise ToolsError(f"{at}.function.name {name!r} names two tools", param=f"{at}.function.name")
        seen.add(name)
        description, strict = function.get("description"), function.get("strict")
        if description is not None and not isinstance(description, str):
            raise ToolsError(f"{at}.function.description must be a string", param=f"{at}.function.description")
        if strict is not None and not isinstance(strict, bool):
            raise ToolsError(f"{at}.function.strict must be a boolean", param=f"{at}.function.strict")
        parameters = function.get("parameters")
        if parameters is None:
            parameters = NO_PARAMETERS
        elif not isinstance(parameters, dict):
            raise ToolsError(f"{at}.function.parameters must be a JSON Schema object, got {type(parameters).__name__}",
                             param=f"{at}.function.parameters")
        else:
            _check_schema(parameters, f"{at}.function.parameters")
        out.append(Tool(name, parameters, description, strict))
    return tuple(out)


def read_tool_choice(choice: Any, tools: Sequence[Tool]) -> ToolChoice:
    """Read ``tool_choice`` against the request's tools.

    Raises
    ------
    ToolsError
        A value of another shape, ``"required"`` or a named function without
        tools, a name no tool has.
    """
    if choice is None:
        return ToolChoice("auto" if tools else "none")
    if choice in ("none", "auto", "required"):
        if choice == "required" and not tools:
            raise ToolsError("tool_choice \"required\" needs tools", param="tool_choice")
        return ToolChoice("none" if not tools else choice)
    if isinstance(choice, dict) and choice.get("type") == "function" and set(choice) == {"type", "function"}:
        function = choice["function"]
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(function, dict) or set(function) != {"name"} or not isinstance(name, str):
            raise ToolsError("tool_choice.function must be {\"name\": <a tool's name>}", param="tool_choice.function")
        if name not in {t.name for t in tools}:
            known = ", ".join(t.name for t in tools) or "none"
            raise ToolsError(f"tool_choice names the function {name!r}, which no tool defines (tools: {known})",
                             param="tool_choice.function.name")
        return ToolChoice("named", name)
    raise ToolsError(f"tool_choice must be \"none\", \"auto\", \"required\" or {{\"type\": \"function\", "
                     f"\"function\": {{\"name\": ...}}}}, got {json.dumps(choice, default=str)[:200]}",
                     param="tool_choice")


def _check_schema(schema: dict, param: str) -> None:
    """Run the JSON Schema front-end on ``schema`` (cached by its text).

    Raises
    ------
    ToolsError
        Naming ``param`` and the JSON pointer of the fault.
    """
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ToolsError(f"{param} is not JSON: {exc}", param=param) from None
    message = _schema_fault(text)
    if message is not None:
        raise ToolsError(f"{param}: {message}", param=param)


@functools.lru_cache(maxsize=512)
def _schema_fault(text: str) -> str | None:
    """The front-end's error on a schema's JSON text, or None."""
    from leapgen.errors import GrammarError
    from leapgen.grammar.json import json_schema_to_ir

    try:
        json_schema_to_ir(json.loads(text), any_whitespace=False, separators=(", ", ": "))
    except GrammarError as exc:
        return str(exc)
    except RecursionError:
        return "the schema nests too deeply"
    return None
