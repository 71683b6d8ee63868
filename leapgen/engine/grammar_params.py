"""What a request's :class:`SamplingParams` ask of the grammar layer.

One responsibility: read the grammar fields of ``SamplingParams`` (no
vocabulary, no compiler, no state). :func:`check_grammar` runs the front-end
alone, to reject a malformed grammar early; :func:`compile_call` and
:func:`peer_compile_call` name the compiler verb, arguments and options of a
request's grammar, for leapgen's :class:`~leapgen.compiler.GrammarCompiler`
and for a peer backend (:func:`leapgen.backends.get_backend`), which has no
JSON indent, whitespace pattern or custom separators. The
:class:`~leapgen.engine.grammar_manager.GrammarManager` runs the calls.
"""

from __future__ import annotations

from typing import Any

from leapgen.engine.sampling_params import DEFAULT_JSON_SEPARATORS, SamplingParams
from leapgen.errors import GrammarError
from leapgen.grammar.json import load_schema

#: The schema of ``json_object``: any JSON object (read with ``strict_mode=False``: any members).
JSON_OBJECT_SCHEMA = {"type": "object"}


def check_grammar(params: SamplingParams) -> None:
    """Parse the grammar of ``params`` without a vocabulary (the front-end
    only: fast, no model needed), to reject a malformed grammar early.

    Raises
    ------
    leapgen.errors.GrammarError
        If the regex or schema is malformed or unsupported. Passing does
        not guarantee the compile succeeds (automaton limits, an empty
        language are found later).
    """
    if params.choice is not None:
        if not all(isinstance(c, str) for c in params.choice):
            raise GrammarError("choice must be a list of str")
    elif params.json_schema is not None:
        from leapgen.grammar.json import json_schema_to_ir

        json_schema_to_ir(
            load_schema(params.json_schema),
            any_whitespace=params.json_any_whitespace,
            indent=params.json_indent,
            separators=params.json_separators,
            any_order=params.json_any_order,
        )
    elif params.regex is not None:
        from leapgen.grammar.regex import parse_regex

        parse_regex(params.regex)
    elif params.ebnf is not None:
        from leapgen.grammar.ebnf import parse_ebnf

        parse_ebnf(params.ebnf)
    elif params.lark is not None:
        from leapgen.grammar.lark import parse_lark

        parse_lark(params.lark)
    elif params.structural_tag is not None:  # its format tree; its contents are read at compile
        from leapgen.grammar.structural import parse_structural_tag

        parse_structural_tag(params.structural_tag)


def compile_call(params: SamplingParams) -> tuple[str, tuple, dict]:
    """The :class:`~leapgen.compiler.GrammarCompiler` method, arguments and
    options of ``params``' grammar.

    Raises
    ------
    leapgen.errors.SchemaError
        A schema given as text that is not JSON (pointer ``""``) or nests too deeply.
    ValueError
        ``params`` has no grammar.
    """
    if params.json_schema is not None or params.json_object:
        options = dict(any_whitespace=params.json_any_whitespace, indent=params.json_indent,
                       separators=params.json_separators, strict_mode=params.json_strict and not params.json_object,
                       any_order=params.json_any_order)
        if params.json_whitespace_pattern is not None:
            options["whitespace_pattern"] = params.json_whitespace_pattern
        return "compile_json_schema", (schema_of(params),), options
    if params.structural_tag is not None:
        return "compile_structural_tag", (params.structural_tag,), dict(
            any_whitespace=params.json_any_whitespace, separators=params.json_separators,
            strict_mode=params.json_strict)
    return _text_grammar_call(params)


def peer_compile_call(params: SamplingParams, backend: str) -> tuple[str, tuple, dict]:
    """:func:`compile_call` for the peer backend named ``backend`` (its compile verbs).

    Raises
    ------
    leapgen.errors.GrammarError
        A JSON layout the peer backend does not have (indent, a whitespace
        pattern, separators other than compact or the default; a structural
        tag's JSON other than the default layout with strict objects).
    ValueError
        ``params`` has no grammar.
    """
    if params.json_schema is not None or params.json_object:
        if params.json_indent is not None:
            raise GrammarError(f"the {backend} backend has no indented JSON layout")
        if params.json_whitespace_pattern is not None:
            raise GrammarError(f"the {backend} backend has no JSON whitespace_pattern")
        compact = tuple(params.json_separators) == (",", ":")
        if not compact and tuple(params.json_separators) != DEFAULT_JSON_SEPARATORS:
            raise GrammarError(f"the {backend} backend has no custom JSON separators")
        # any_whitespace=False is the compact layout in every peer; the default one needs flexible whitespace.
        options = dict(any_whitespace=params.json_any_whitespace or not compact,
                       strict_mode=params.json_strict and not params.json_object)
        if params.json_any_order:  # xgrammar passes it on; the other peers' backends refuse it by name
            options["any_order"] = True
        return "compile_json_schema", (schema_of(params),), options
    if params.structural_tag is not None:
        if tuple(params.json_separators) != DEFAULT_JSON_SEPARATORS or not params.json_strict:
            raise GrammarError(f"the {backend} backend compiles a structural tag's JSON with "
                               "flexible whitespace and strict objects only")
        return "compile_structural_tag", (params.structural_tag,), {}
    return _text_grammar_call(params)


def schema_of(params: SamplingParams) -> Any:
    """The JSON Schema of a ``json_schema`` or ``json_object`` request: a schema given as JSON text parsed
    (dicts and bools pass through); a SchemaError with a JSON pointer for text that is not JSON or nests too
    deeply (:func:`leapgen.grammar.json.load_schema`)."""
    return JSON_OBJECT_SCHEMA if params.json_object else load_schema(params.json_schema)


def _text_grammar_call(params: SamplingParams) -> tuple[str, tuple, dict]:
    """The call of a regex, EBNF, Lark or choice grammar (the same verbs in leapgen and the peers);
    ``SamplingParams`` holds at most one grammar, so the order of the tests does not matter."""
    if params.regex is not None:
        return "compile_regex", (params.regex,), {}
    if params.ebnf is not None:
        return "compile_grammar", (params.ebnf,), {}
    if params.lark is not None:
        return "compile_lark", (params.lark,), {}
    if params.choice is not None:
        return "compile_choice", (list(params.choice),), {}
    raise ValueError("these SamplingParams have no grammar")
