"""The JSON Schema front-end: a schema -> byte-level grammar IR (:mod:`leapgen.grammar.ir`).

Entry point: :func:`json_schema_to_ir` (:mod:`.schema`, whose docstring has the
table of supported keywords and the known gaps).

Passes, in order (each subschema is compiled with its JSON pointer)
--------------------------------------------------------------------
1. ``document``: parse the JSON text (errors at a JSON pointer, deep
   documents too); ``schema``: refuse lone surrogates; ``layout``: where
   whitespace goes (``any_whitespace`` / ``separators`` / ``indent``).
2. Normalise (``applicators``, memoized per subschema): draft-07 array ``items``
   -> ``prefixItems``; ``not``, ``if``/``then``/``else``, ``dependent*`` ->
   ``allOf``/``anyOf`` (``logic``); ``oneOf`` -> ``anyOf``, exact when the
   branches are provably disjoint (``disjoint``) or made exclusive by negation.
3. Dispatch (``schema._Compiler``): ``$ref`` (``refs`` resolves, ``applicators``
   compiles), ``allOf`` (merged into one schema: ``merge``), ``anyOf``,
   ``const``/``enum`` (``values``), else one builder per allowed type.
4. Type builders emit IR: ``scalars`` (numbers, integers, strings) over
   ``numbers``, ``strings``, ``formats``, ``lengths``, ``literal_sets``;
   ``containers`` (arrays) with ``unique``; ``objects``.
5. Rules (``rules``): which ``$ref`` targets and large subschemas stay rules;
   the rest is inlined by :mod:`leapgen.grammar.cfg`. With ``count_lengths``,
   long string lengths are counted regions (``lengths``), kept where every rule
   inlines into one regular node and written out before the rules are decided
   otherwise. Result: one
   :class:`~leapgen.grammar.ir.Node`, or an :class:`~leapgen.grammar.ir.Grammar`
   when recursion (or a large shared rule) is left, plus the warnings.

Keyword -> file
---------------
::

    type (and its inference from keywords)               schema
    enum, const                                          values
    $ref, $anchor, $id, $defs / definitions              refs (resolve), applicators (compile)
    allOf                                                merge (applicators calls it)
    anyOf, oneOf                                         applicators, disjoint (oneOf)
    not, if/then/else, dependentRequired,                logic
      dependentSchemas, dependencies
    minimum, maximum, exclusiveMinimum/Maximum,          scalars -> numbers
      multipleOf
    minLength, maxLength                                 scalars -> strings, lengths (> 256, counted)
    pattern                                              scalars -> strings (re-encoding)
    format                                               scalars -> formats
    prefixItems, items, additionalItems, minItems,       containers
      maxItems, contains, min/maxContains,
      unevaluatedItems
    uniqueItems                                          unique
    properties, required, additionalProperties,          objects
      patternProperties, propertyNames,
      min/maxProperties, unevaluatedProperties
    annotations (title, description, ...)                applicators (ANNOTATIONS): ignored
    $lg:* (internal keywords a merge or negation adds)   merge (defined), logic, scalars, values

Helpers: ``match`` (matching and emptiness of IR by derivatives, for decisions
made at compile time), ``values`` (JSON value checks), ``literal_sets`` (tries
of literal strings, digit ranges).
"""

from .document import load_schema
from .schema import json_schema_to_ir

__all__ = ["json_schema_to_ir", "load_schema"]
