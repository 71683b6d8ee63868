"""Structural tags: xgrammar's format for free text interleaved with constrained tags.

A structural tag (the ``response_format: {"type": "structural_tag", ...}`` of
vLLM, SGLang and xgrammar) describes output that is free text in places and
a JSON Schema, a regex or a grammar in others, set off by begin and end
markers: tool calls (``<tool_call>{...}</tool_call>``), reasoning
(``<think>...</think>``), answers in tags. This package reads one, in either
of its two forms (:mod:`.reader`), into an immutable tree (:class:`StructuralTag`); errors name
the place as a JSON pointer into the tag. :mod:`.lower` turns
the tree into grammar IR.

Forms
-----
``{"type": "structural_tag", "format": FORMAT}``
    The format tree (xgrammar 0.2's ``StructuralTag``).
``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}, ...], "triggers": [...]}``
    The legacy form vLLM and SGLang still send: a ``triggered_tags`` whose
    tags hold JSON Schemas.

Formats (``"type"`` of each FORMAT object; fields as in xgrammar)
-------------------------------------------------------------------
``const_string`` (``value``), ``json_schema`` (``json_schema``, ``style``:
``"json"`` only, ``any_order``: false only, ``max_whitespace_cnt``,
``excludes``: empty only), ``grammar`` (``grammar``, ``syntax``: ``"ebnf"``
or ``"lark"``), ``regex`` (``pattern``), ``any_text`` (``excludes``, ``max_chars``;
``max_tokens`` is refused), ``token`` (``token``: an id or the text of a
special or added token), ``sequence`` / ``or`` (``elements``), ``optional`` /
``star`` / ``plus`` (``content``), ``repeat`` (``min``, ``max`` with -1
unbounded, ``content``), ``tag`` (``begin``: str or token, ``content``,
``end``: str, list of str or token), ``triggered_tags`` (``triggers``,
``tags``, ``at_least_one``, ``stop_after_first``, ``excludes``),
``tags_with_separator`` (``tags``, ``separator``, ``at_least_one``,
``stop_after_first``). xgrammar's token-level dispatch formats
(``exclude_token``, ``any_tokens``, ``token_triggered_tags``, ``dispatch``,
``token_dispatch``) and ``qwen_xml_parameter`` are refused with an error, as
is any field a format does not have (xgrammar ignores unknown fields).

Semantics (the language each format matches) are in
:mod:`leapgen.grammar.structural.lower` and in
:meth:`leapgen.GrammarCompiler.compile_structural_tag`.
"""

from .lower import free_text_stops, structural_tag_to_ir
from .reader import parse_structural_tag
from .tree import (AnyText, ConstString, EbnfGrammar, JsonSchema, Or, Regex, Repeat, Sequence, StructuralTag, Tag,
                   TagsWithSeparator, Token, TriggeredTags)

__all__ = [
    "AnyText", "ConstString", "EbnfGrammar", "JsonSchema", "Or", "Regex", "Repeat", "Sequence", "StructuralTag", "Tag",
    "TagsWithSeparator", "Token", "TriggeredTags", "free_text_stops", "parse_structural_tag", "structural_tag_to_ir",
]
