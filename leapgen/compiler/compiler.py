"""GrammarCompiler: grammar source -> CompiledGrammar, per vocabulary, cached."""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Sequence

from leapgen.automata import DEFAULT_MAX_STATES, Dfa, compile_dfa
from leapgen.automata.counted import CountedDfa, Uncountable
from leapgen.automata.dfa import compile_counted_dfa
from leapgen.automata.limits import time_limit
from leapgen.automata.pda import DEFAULT_MAX_STACK_DEPTH, Pda
from leapgen.automata.trie import trie_dfa
from leapgen.compiler.compiled import DEFAULT_MASK_CACHE_BYTES, STRUCTURAL_TAG_KIND, CompiledGrammar, RegularGrammar
from leapgen.compiler.compiled_budget import BudgetedGrammar
from leapgen.compiler.compiled_cfg import EAGER_FRAMES, ContextFreeGrammar
from leapgen.compiler.compiled_counted import CountedGrammar
from leapgen.compiler.disk_cache import DiskCache
from leapgen.compiler.service import CompileCache
from leapgen.compiler.token_index import TokenIndex
from leapgen.errors import CompileLimitError, GrammarError, SchemaError
from leapgen.grammar import ir
from leapgen.grammar.cfg import simplify_grammar
from leapgen.grammar.json.document import too_deep
from leapgen.grammar.json.layout import WS_BYTES
from leapgen.grammar.regex import parse_regex
from leapgen.vocab import TokenizerInfo

DEFAULT_CACHE_ENTRIES = 256


def canonical_schema(schema: Any) -> Any:
    """A canonical form of a JSON Schema for cache keys.

    Object keys are sorted, except the members of ``properties`` objects, whose
    order decides the order properties are generated in (so two schemas that
    list properties in different orders are different grammars).
    """
    if isinstance(schema, dict):
        out = {}
        for k in sorted(schema):
            v = schema[k]
            if k == "properties" and isinstance(v, dict):
                out[k] = [[pk, canonical_schema(pv)] for pk, pv in v.items()]
            else:
                out[k] = canonical_schema(v)
        return out
    if isinstance(schema, list):
        return [canonical_schema(v) for v in schema]
    return schema


def _locate_rule_error(exc: GrammarError, ebnf_text: str) -> GrammarError | None:
    """``exc`` (raised without a place by a later pass: left recursion, a rule
    that can never finish) again, at the ``line:column`` where the rule it
    names is defined; None when it has a place or names no defined rule."""
    if exc.where is not None or type(exc) is not GrammarError or not isinstance(ebnf_text, str):
        return None
    named = re.search(r"rule '([^']+)'", str(exc))
    if named is None:
        return None
    at = re.search(r"^[ \t]*(" + re.escape(named.group(1)) + r")[ \t]*::=", ebnf_text, re.MULTILINE)
    if at is None:
        return None
    pos = at.start(1)
    line = ebnf_text.count("\n", 0, pos) + 1
    col = pos - (ebnf_text.rfind("\n", 0, pos) + 1) + 1
    return GrammarError(str(exc), where=f"line {line}:{col}")


def _whitespace_language(pattern: str) -> ir.Node:
    """The IR of a JSON ``whitespace_pattern``, checked to match JSON
    whitespace only (RFC 8259: space, tab, newline, carriage return).

    Raises
    ------
    RegexError
        Malformed pattern.
    GrammarError
        The pattern matches a string with another character.
    """
    if not isinstance(pattern, str):
        raise GrammarError(f"whitespace_pattern must be a str, got {type(pattern).__name__}")
    node = parse_regex(pattern)
    if not compile_dfa(ir.diff(node, ir.star(WS_BYTES))).is_empty:
        raise GrammarError(f"whitespace_pattern {pattern!r} matches text that is not JSON whitespace "
                           "(only space, tab, newline and carriage return may appear between JSON tokens)")
    return node


#: What :meth:`GrammarCompiler.warm_up` compiles: each JSON type, formats (one length-bounded: an
#: intersection), a pattern, an enum, a nested object.
_WARM_UP_SCHEMA = {"type": "object", "properties": {
    "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
    "z": {"type": "null"}, "d": {"type": "string", "format": "date-time"}, "e": {"enum": ["a", "b"]},
    "m": {"type": "string", "format": "email", "maxLength": 40}, "p": {"type": "string", "pattern": "^[A-Z]-[0-9]{3}$"},
    "a": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}},
    "required": ["s", "i"]}


class GrammarCompiler:
    """Compiles regexes, JSON Schemas, EBNF and Lark grammars and structural tags for one vocabulary.

    Thread-safe. Compiled grammars are immutable and cached in an LRU bounded
    in entries and bytes, keyed by a canonical form of the grammar and its
    options; concurrent compiles of the same new grammar share one compile
    (single flight); a grammar that failed raises the same error again
    without recompiling; regular grammars (counted ones too) can also be kept on disk (see
    :mod:`leapgen.compiler.service` and :mod:`leapgen.compiler.disk_cache`).

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
        The model's vocabulary.
    cache_entries : int, default 256
        Most compiled grammars kept (LRU).
    max_states : int, default 100_000
        Limit on automaton states per grammar.
    mask_cache_bytes : int, default 256 MiB
        Bound on each compiled grammar's cache of per-state bitmask rows.
    max_stack_depth : int, default 4096
        Deepest nesting a context-free grammar's matcher follows; tokens that
        would nest deeper are masked off.
    cache_bytes : int or None, default None
        Bound on the cached grammars' summed ``memory_size_bytes()``, bitmask
        rows filled after a grammar entered the cache included; None: no
        bound beyond ``cache_entries``.
    cache_dir : str or os.PathLike, optional
        Folder of the disk cache (created if missing); keyed by the grammar,
        the vocabulary's fingerprint and the leapgen version.
    disk_cache_bytes : int or None, default None
        Bound on the disk cache folder's bytes (least recently used files
        removed); None: unbounded.
    max_grammar_bytes : int or None, default None
        Largest ``memory_size_bytes()`` of one compiled grammar: a bigger one
        raises CompileLimitError (and is remembered as failed); None: no limit.
    max_compile_seconds : float or None, default None
        Time limit of one compile, checked inside the automaton
        constructions; exceeding it raises CompileLimitError.
    compile_threads : int, default 1
        Threads of :meth:`compile_async`'s pool (created on first use).
        Compiles are pure Python and hold the GIL: more threads overlap
        compiles with waiting, not with each other.
    index_cache_dir : str or os.PathLike, optional
        Folder where the vocabulary's token index (trie, token slices) is kept across
        processes (:mod:`leapgen.compiler.index_cache`): a new process reads it instead of
        building it. The engine uses ``$LEAPGEN_CACHE/token_index``.
    warm_up : bool, default True
        Compile a small schema in both JSON layouts now (:meth:`warm_up`), so that the first
        compile does not load the automaton kernels; False leaves that to the first compile
        (a process that compiles one grammar pays it once either way).
    token_index : TokenIndex, optional
        The vocabulary's token index, shared with other compilers of the same
        vocabulary (built here when not given; building it walks every token).
    count_lengths : bool, default True
        JSON Schema strings with a long ``minLength``/``maxLength`` count their
        characters at run time (:class:`~leapgen.compiler.compiled_counted.CountedGrammar`,
        states ``(dfa state, count)``) where the schema is one regular language: a
        bound costs no automaton states, and a string's positions far from its
        bounds share one mask. False: lengths in the automaton only (a regular
        grammar's states are ints, its DFA serializable).

    Raises
    ------
    ValueError
        A negative ``cache_entries``, a non-positive ``max_compile_seconds`` or
        ``compile_threads``, or a ``token_index`` of another vocabulary.
    """

    def __init__(self, tokenizer_info: TokenizerInfo, *, cache_entries: int = DEFAULT_CACHE_ENTRIES,
                 max_states: int = DEFAULT_MAX_STATES, mask_cache_bytes: int = DEFAULT_MASK_CACHE_BYTES,
                 max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH, cache_bytes: int | None = None,
                 cache_dir: str | os.PathLike | None = None, max_compile_seconds: float | None = None,
                 compile_threads: int = 1, index_cache_dir: str | os.PathLike | None = None, warm_up: bool = True,
                 disk_cache_bytes: int | None = None, max_grammar_bytes: int | None = None,
                 token_index: TokenIndex | None = None, count_lengths: bool = True):
        if cache_entries < 0:
            raise ValueError("cache_entries must be >= 0")
        if max_compile_seconds is not None and not max_compile_seconds > 0:
            raise ValueError(f"max_compile_seconds must be positive, got {max_compile_seconds!r}")
        if compile_threads < 1:
            raise ValueError(f"compile_threads must be >= 1, got {compile_threads!r}")
        if token_index is not None and token_index.tokenizer_info is not tokenizer_info:
            raise ValueError("token_index was built for another TokenizerInfo")
        self.tokenizer_info = tokenizer_info
        self.token_index = TokenIndex(tokenizer_info, cache_dir=index_cache_dir) if token_index is None else token_index
        self.cache_entries = cache_entries
        self.max_states = max_states
        self.mask_cache_bytes = mask_cache_bytes
        self.max_stack_depth = max_stack_depth
        self.max_compile_seconds = max_compile_seconds
        self.compile_threads = compile_threads
        self.max_grammar_bytes = max_grammar_bytes
        self.count_lengths = bool(count_lengths)
        disk = None
        if cache_dir is not None:
            from leapgen.version import __version__

            disk = DiskCache(cache_dir, fingerprint=tokenizer_info.fingerprint, version=__version__,
                             max_bytes=disk_cache_bytes)
        self.cache = CompileCache(max_entries=cache_entries, max_bytes=cache_bytes, disk=disk, revive=self._revive)
        self._pool: ThreadPoolExecutor | None = None
        self._added: dict[str, list[int]] | None = None
        if warm_up:
            self.warm_up()

    def warm_up(self) -> None:
        """Compile a small JSON Schema once in each layout, outside the cache: the automaton kernels get
        loaded (numba) and the common character sets and sub-automata (strings, numbers) built now, in
        ~40 ms, not in the first request's compile (the same as :meth:`TokenIndex._warm_up` for the mask
        kernels). Mutates only the process-wide fragment caches. A compiler whose ``max_states`` is
        below what the schema needs skips it (a warm-up never fails a compiler's construction)."""
        from leapgen.grammar.json import json_schema_to_ir

        for whitespace in (False, True):
            try:
                self._build("json_schema", lambda: json_schema_to_ir(_WARM_UP_SCHEMA, any_whitespace=whitespace))
            except CompileLimitError:
                return

    # -- public compile entry points ------------------------------------------------------

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        """Compile an ECMAScript regex (matched in full) for this vocabulary.

        Parameters
        ----------
        pattern : str
            ECMA-262 syntax; see :mod:`leapgen.grammar.regex`.

        Returns
        -------
        CompiledGrammar

        Raises
        ------
        RegexError
            Malformed or unsupported construct (with its offset).
        GrammarError
            The regex matches nothing.
        CompileLimitError
            The automaton is too large.
        """
        if not isinstance(pattern, str):
            raise GrammarError(f"regex must be a str, got {type(pattern).__name__}")
        return self._cached(("regex", pattern), "regex", lambda: (parse_regex(pattern), ()))

    def compile_json_schema(self, schema: dict | bool | str, *, any_whitespace: bool = True,
                            indent: int | None = None, separators: tuple[str, str] | None = None,
                            strict_mode: bool = True, max_whitespace: int | None = None,
                            whitespace_pattern: str | None = None,
                            any_order: bool = False) -> CompiledGrammar:
        """Compile a JSON Schema for this vocabulary.

        Parameters
        ----------
        schema : dict, bool or str
            The schema, or its JSON text.
        any_whitespace : bool, default True
            Allow bounded insignificant whitespace wherever JSON allows it.
        indent : int or None
            With ``any_whitespace=False``: the exact layout of
            ``json.dumps(indent=indent)``.
        separators : (str, str) or None
            With ``any_whitespace=False``: item and key separators, default
            ``(",", ":")`` (``(",", ": ")`` with ``indent``).
        strict_mode : bool, default True
            True: an object without ``additionalProperties`` admits no other
            properties (as in xgrammar and OpenAI's strict mode). False: the
            JSON Schema specification's meaning (other properties allowed).
        max_whitespace : int or None
            Longest whitespace run with ``any_whitespace``; None for the
            default (see :mod:`leapgen.grammar.json.schema`).
        whitespace_pattern : str or None
            A regex (ECMAScript) for each whitespace run between JSON tokens
            instead of the bounded default (vLLM's and outlines'
            ``whitespace_pattern``); implies ``any_whitespace``. It must match
            JSON whitespace (space, tab, newline, carriage return) only.
        any_order : bool, default False
            An object's properties (declared and extra) in any order, each at
            most once, every required one present (llguidance #162, xgrammar
            PR #668); the keys written are matcher state, so nothing
            enumerates orders or subsets. False: schema order.

        Returns
        -------
        CompiledGrammar
            ``warnings`` lists any place the grammar is looser than the schema.

        Raises
        ------
        SchemaError
            Malformed schema or unsupported keyword, with its JSON pointer.
        RegexError
            Malformed ``whitespace_pattern`` (with its offset).
        GrammarError
            ``whitespace_pattern`` matches a string that is not JSON whitespace.
        CompileLimitError
            The automaton is too large.
        """
        from leapgen.grammar.json import json_schema_to_ir, load_schema

        schema = load_schema(schema)
        options = dict(any_whitespace=any_whitespace, indent=indent, separators=separators,
                       strict_mode=strict_mode, any_order=bool(any_order))
        if max_whitespace is not None:
            options["max_whitespace"] = max_whitespace
        if whitespace_pattern is not None:
            options["whitespace"] = _whitespace_language(whitespace_pattern)
        try:
            canonical = json.dumps(canonical_schema(schema), sort_keys=False)
        except RecursionError:
            raise too_deep(schema) from None
        except (TypeError, ValueError) as e:  # a set, bytes, an object...: not JSON data
            raise SchemaError(f"schema is not JSON data: {e}", pointer="") from None
        named = dict(options, whitespace=whitespace_pattern) if whitespace_pattern is not None else dict(options)
        if self.count_lengths:  # another grammar for the same schema: apart in a disk cache two compilers share
            named["count_lengths"] = True
        key = ("json_schema", canonical, tuple(sorted((k, repr(v)) for k, v in named.items())))
        plain = lambda: json_schema_to_ir(schema, **options)  # noqa: E731
        if not self.count_lengths:
            return self._cached(key, "json_schema", plain)
        # a counted region the automaton cannot follow (in a product, say): the lengths written out
        return self._cached(key, "json_schema", lambda: json_schema_to_ir(schema, **options, count_lengths=True),
                            fallback=plain)

    def compile_grammar(self, ebnf_text: str, *, root_rule_name: str = "root") -> CompiledGrammar:
        """Compile an EBNF grammar (GBNF dialect; see :mod:`leapgen.grammar.ebnf`).

        Rules that are not recursive are inlined; a grammar without recursion
        compiles to one DFA (the fast path), otherwise to a pushdown grammar.

        Parameters
        ----------
        ebnf_text : str
        root_rule_name : str, default "root"

        Returns
        -------
        CompiledGrammar

        Raises
        ------
        GrammarError
            Syntax error (with line:column), undefined rule, left recursion,
            a grammar that matches nothing.
        CompileLimitError
            An automaton is too large.
        """
        from leapgen.grammar.ebnf import parse_ebnf

        try:
            return self._cached(("ebnf", ebnf_text, root_rule_name), "ebnf",
                                lambda: (parse_ebnf(ebnf_text, root_rule_name=root_rule_name), ()))
        except GrammarError as exc:
            located = _locate_rule_error(exc, ebnf_text)
            if located is None:
                raise
            raise located from None

    def compile_lark(self, lark_text: str, *, start: str = "start") -> CompiledGrammar:
        """Compile a Lark grammar (what vLLM's ``grammar`` field and outlines take when it is
        not GBNF), with the language of Lark's Earley parser; see :mod:`leapgen.grammar.lark`.

        ``%import common.X`` reads the installed ``lark`` package's ``grammars/common.lark``.

        Parameters
        ----------
        lark_text : str
        start : str, default "start"
            The start rule (Lark's ``start`` option).

        Returns
        -------
        CompiledGrammar
            ``kind == "lark"``.

        Raises
        ------
        GrammarError
            Syntax error or unsupported construct (with line:column), undefined
            or duplicate name, a grammar that matches nothing.
        CompileLimitError
            An automaton is too large.
        """
        from leapgen.grammar.lark import parse_lark

        if not isinstance(lark_text, str):
            raise GrammarError(f"a Lark grammar must be a str, got {type(lark_text).__name__}")
        return self._cached(("lark", lark_text, start), "lark",
                            lambda: (parse_lark(lark_text, start=start), ()))

    def compile_structural_tag(self, tag: dict | str | bytes, *, any_whitespace: bool = True,
                               separators: tuple[str, str] | None = None,
                               strict_mode: bool = True) -> CompiledGrammar:
        """Compile a structural tag (xgrammar's format): free text interleaved with constrained tags.

        Parameters
        ----------
        tag : dict, str, bytes or leapgen.grammar.structural.StructuralTag
            The tag as xgrammar 0.2 accepts it, or its JSON text, in either form:
            ``{"type": "structural_tag", "format": FORMAT}``, or the legacy
            ``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}], "triggers": [...]}``
            (a ``triggered_tags`` of JSON-Schema tags; both compile to the same grammar). Not mutated.
        any_whitespace : bool, default True
            The layout of its ``json_schema`` contents: flexible whitespace, as
            xgrammar compiles them (``max_whitespace_cnt`` bounds a run, else
            20 characters). False: the fixed layout of ``separators`` (default
            ``(",", ":")``; ``(", ", ": ")`` is ``json.dumps``'s, which tool
            calls use), where each key is forced text that jump-forward appends.
        separators : (str, str) or None
            With ``any_whitespace=False``: item and key separators.
        strict_mode : bool, default True
            Objects admit no property their schema does not allow explicitly
            (xgrammar's reading); False: the specification's.

        Returns
        -------
        CompiledGrammar
            Cached by the tag's canonical form. ``token_literals`` lists the
            special or added tokens it matches as markers.

        Raises
        ------
        StructuralTagError
            A malformed tag, an unsupported format or field, a content its
            front-end refuses; ``where`` is the JSON pointer into the tag (then
            the schema pointer, regex offset or EBNF line:column inside it).
        CompileLimitError
            An automaton is too large.

        Notes
        -----
        FORMAT is one object with a ``"type"`` (xgrammar's fields and defaults):

        - ``{"type": "const_string", "value": "Answer: "}``
        - ``{"type": "json_schema", "json_schema": {...}}``: JSON with flexible
          whitespace (``max_whitespace_cnt`` bounds each run) and strict objects;
          ``{"type": "regex", "pattern": "[0-9]+"}``; ``{"type": "grammar",
          "grammar": "root ::= ..."}`` (EBNF; ``"syntax": "lark"``: Lark).
        - ``{"type": "any_text", "excludes": ["</answer>"], "max_chars": 200}``: any
          text holding none of ``excludes``, nor, inside a ``tag``, its end.
        - ``{"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}``;
          ``end`` may be a list; ``begin``/``end`` may be ``{"type": "token", "token": ...}``.
        - ``sequence`` / ``or`` (``elements``), ``optional`` / ``star`` / ``plus``
          (``content``), ``repeat`` (``min``, ``max``, -1 unbounded, ``content``).
        - ``triggered_tags``: free text until one of ``triggers`` appears, then
          a tag whose begin starts with it, then free text again::

              {"type": "triggered_tags", "triggers": ["<tool_call>"],
               "tags": [{"begin": "<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": ",
                         "content": {"type": "json_schema", "json_schema": {"type": "object", ...}},
                         "end": "}\\n</tool_call>"}],
               "at_least_one": false, "stop_after_first": false}

          ``at_least_one``: the output starts with a tag; ``stop_after_first``:
          it ends after the first tag; ``excludes``: strings the free text
          never holds. A trigger counts where the scan's longest partial match
          is exactly that trigger, as in xgrammar's scan (with triggers ``<``
          and ``y<a``, the ``<`` of ``y<x`` is text). A token may hold the end
          of a trigger and the start of its tag; masks are exact there.
        - ``tags_with_separator``: tags separated by ``separator`` and nothing
          else, e.g. ``[{...}, {...}]`` call lists.

        Reasoning then tools::

            {"type": "structural_tag", "format": {"type": "sequence", "elements": [
                {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
                {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [...]}]}}

        A begin, end, trigger, separator or constant string that holds the
        text of one special or added token (Qwen's ``<tool_call>``,
        ``</think>``) matches that token too, wherever the text may come, as
        well as the text spelled in ordinary tokens; other special tokens stay
        forbidden, and stop tokens keep their role. Jump-forward forces a tag's
        begin once its trigger is complete, its end (as text, which the engine
        retokenizes) and, with a fixed JSON layout, its keys.

        Deliberate differences from xgrammar 0.2 (everything else accepts the
        same strings):

        - fields a format does not have are errors (xgrammar ignores them), and
          so are an empty string in ``excludes`` (xgrammar's ``any_text`` then
          matches the empty text alone), ``any_text.max_tokens``,
          ``json_schema`` styles other than ``"json"``, ``any_order``,
          ``excludes`` of a ``json_schema`` and the token-level dispatch
          formats (``exclude_token``, ``any_tokens``, ``token_triggered_tags``,
          ``dispatch``, ``token_dispatch``), which this version does not
          compile; Lark contents use leapgen's Lark front-end (special tokens
          named in them are not resolved);
        - JSON whitespace runs are bounded (20 characters unless
          ``max_whitespace_cnt`` says otherwise; xgrammar: unbounded), and
          ``any_whitespace=False`` fixes the layout; regexes and EBNF follow
          leapgen's dialects (ECMAScript, GBNF);
        - added tokens that are not special (Qwen's ``<think>``) match only
          where the tag names their text (xgrammar treats them as ordinary text
          tokens everywhere); a ``token`` format names a special or added
          token, never an ordinary one;
        - a ``token`` format or marker naming a stop token is an error / text
          only (the stop token ends generation);
        - masks are exact over UTF-8 text: where any text may follow,
          xgrammar's mask is all ones (a token holding a stray continuation
          byte, a special token), leapgen's is not.
        """
        from leapgen.compiler.structural_tags import added_tokens, prepare_masks
        from leapgen.grammar.structural import parse_structural_tag, structural_tag_to_ir

        parsed = parse_structural_tag(tag)
        options = dict(any_whitespace=any_whitespace, separators=None if any_whitespace else separators,
                       strict_mode=strict_mode)
        key = ("structural_tag", json.dumps(canonical_schema(parsed.to_dict())),
               tuple(sorted((k, repr(v)) for k, v in options.items())))
        if self._added is None:
            self._added = added_tokens(self.tokenizer_info)

        def lower(rules: str):
            return lambda: structural_tag_to_ir(parsed, added_tokens=self._added, rules=rules, **options)

        # Tags whose contents overlap (two with one begin, free text in both) multiply into one DFA; past the
        # state limit, every tag's content becomes a rule and the pushdown layer carries the alternatives.
        return self.cache.get_or_compile(key, lambda: self._check_size(self._build(
            STRUCTURAL_TAG_KIND, lower("auto"), lower("all"),
            prepare=lambda compiled: prepare_masks(compiled, parsed, self.token_index))))


    def compile_builtin_json_grammar(self) -> CompiledGrammar:
        """Compile the builtin JSON grammar, as xgrammar's: a JSON object or
        array at the root (RFC 8259 values nested inside to any depth), with
        bounded whitespace (see :mod:`leapgen.grammar.builtin`). Any JSON
        value, scalars included: :meth:`compile_json_value_grammar`."""
        from leapgen.grammar.builtin import JSON_GBNF

        return self.compile_grammar(JSON_GBNF)

    def compile_json_value_grammar(self) -> CompiledGrammar:
        """Compile the grammar of any JSON value (RFC 8259: an object, an
        array, a string, a number, ``true``, ``false`` or ``null`` at the
        root), nested to any depth, with bounded whitespace."""
        from leapgen.grammar.builtin import JSON_VALUE_GBNF

        return self.compile_grammar(JSON_VALUE_GBNF)

    def compile_choice(self, choices: Sequence[str]) -> CompiledGrammar:
        """Compile "exactly one of these strings" (vLLM's ``choice``).

        The strings' trie is the DFA (built directly, then minimized; see
        :mod:`leapgen.automata.trie`), not an alternation through the
        general construction: 10,000 choices compile in tens of
        milliseconds.

        Parameters
        ----------
        choices : sequence of str
            At least one; the output is one of them, whole (duplicates are
            fine; ``""`` admits the empty output).

        Returns
        -------
        CompiledGrammar

        Raises
        ------
        GrammarError
            ``choices`` is empty, not a list of str, or a string holds a lone
            UTF-16 surrogate (``where`` names its index).
        CompileLimitError
            The trie needs more than ``max_states`` nodes, or the compiled
            grammar is larger than ``max_grammar_bytes``.
        """
        if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
            raise GrammarError(f"choice must be a list of str, got {type(choices).__name__}")
        if not choices:
            raise GrammarError("choice needs at least one string")
        encoded = []
        for i, text in enumerate(choices):
            if not isinstance(text, str):
                raise GrammarError(f"choice must be a list of str; item {i} is {type(text).__name__}",
                                   where=f"choice[{i}]")
            try:
                encoded.append(text.encode("utf-8"))
            except UnicodeEncodeError:
                raise GrammarError("a choice holds a lone UTF-16 surrogate: no output can contain it",
                                   where=f"choice[{i}]") from None
        key = ("choice", tuple(choices))
        return self.cache.get_or_compile(key, lambda: self._check_size(
            self._build_dfa("choice", lambda: trie_dfa(encoded, max_states=self.max_states))))

    def compile_ir(self, node: ir.Node | ir.Grammar, *, kind: str = "ir", warnings=()) -> CompiledGrammar:
        """Compile grammar IR (a regular node, or a grammar of rules) directly; not cached (``max_grammar_bytes``
        applies)."""
        return self._check_size(self._build(kind, lambda: (node, tuple(warnings))))

    def compile_async(self, kind: str, *args, **kwargs) -> Future:
        """Compile on the compiler's thread pool.

        Parameters
        ----------
        kind : str
            ``"regex"``, ``"json_schema"``, ``"grammar"`` (EBNF), ``"lark"``, ``"structural_tag"``,
            ``"builtin_json"``, ``"json_value"`` or ``"choice"``.
        *args, **kwargs
            Those of the matching ``compile_*`` method.

        Returns
        -------
        concurrent.futures.Future
            Resolves to the CompiledGrammar, or raises what the compile raised.

        Raises
        ------
        ValueError
            Unknown ``kind`` (at once, not through the future).
        """
        methods = {"regex": self.compile_regex, "json_schema": self.compile_json_schema,
                   "grammar": self.compile_grammar, "lark": self.compile_lark,
                   "builtin_json": self.compile_builtin_json_grammar, "structural_tag": self.compile_structural_tag,
                   "json_value": self.compile_json_value_grammar, "choice": self.compile_choice}
        if kind not in methods:
            raise ValueError(f"unknown grammar kind {kind!r}; expected one of {sorted(methods)}")
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.compile_threads, thread_name_prefix="leapgen-compile")
        return self._pool.submit(methods[kind], *args, **kwargs)

    def clear_cache(self) -> None:
        """Drop every cached compiled grammar and remembered failure (mutates the
        compiler; the disk cache stays)."""
        self.cache.clear()

    # -- cache ----------------------------------------------------------------------------

    def _cached(self, key: tuple, kind: str, front_end, fallback=None) -> CompiledGrammar:
        return self.cache.get_or_compile(key, lambda: self._check_size(self._build(kind, front_end, fallback)))

    def _revive(self, automaton: Dfa | CountedDfa, kind: str, warnings, key: tuple) -> CompiledGrammar:
        """A RegularGrammar (or CountedGrammar) from an automaton read from the disk cache or compiled by
        the compile worker (``key``: the cache key it was stored under)."""
        t0 = time.perf_counter()
        compiled = self.bind(automaton, kind=kind, warnings=warnings)
        if kind == STRUCTURAL_TAG_KIND:
            from leapgen.compiler.structural_tags import prepare_masks
            from leapgen.grammar.structural import parse_structural_tag

            prepare_masks(compiled, parse_structural_tag(key[1]), self.token_index)
        compiled.compile_ms = (time.perf_counter() - t0) * 1e3
        return self._check_size(compiled)

    def _check_size(self, compiled: CompiledGrammar) -> CompiledGrammar:
        """``compiled``; raises CompileLimitError if it is larger than ``max_grammar_bytes``."""
        if self.max_grammar_bytes is not None:
            size = compiled.memory_size_bytes()
            if size > self.max_grammar_bytes:
                raise CompileLimitError(
                    f"the compiled {compiled.kind.replace('_', ' ')} takes {size / 2**20:.1f} MiB "
                    f"({getattr(compiled, 'n_states', '?')} automaton states), more than the limit of "
                    f"{self.max_grammar_bytes / 2**20:.1f} MiB per grammar")
        return compiled

    def _build(self, kind: str, front_end, fallback=None, prepare=None) -> CompiledGrammar:
        """Compile under the time limit; ``fallback``, another front-end, is tried when the first
        one's automaton passes a limit or counts a region it cannot follow (the deadline stays the
        same); ``prepare(compiled)`` then fills caches (counted in ``compile_ms``)."""
        with time_limit(self.max_compile_seconds):
            try:
                try:
                    compiled = self._build_unlimited(kind, front_end)
                except (CompileLimitError, Uncountable):
                    if fallback is None:
                        raise
                    compiled = self._build_unlimited(kind, fallback)
                if prepare is not None:
                    t0 = time.perf_counter()
                    prepare(compiled)
                    compiled.compile_ms += (time.perf_counter() - t0) * 1e3
                return compiled
            except RecursionError:
                # The front-ends, IR passes and automaton constructions recurse over
                # the grammar's nesting; a grammar too deep for them is a limit, not a crash.
                raise CompileLimitError(f"the {kind.replace('_', ' ')} nests too deeply to compile") from None

    def _build_dfa(self, kind: str, make_dfa) -> CompiledGrammar:
        """A RegularGrammar over the DFA ``make_dfa()`` builds (under the time limit)."""
        with time_limit(self.max_compile_seconds):
            t0 = time.perf_counter()
            dfa = make_dfa()
            if dfa.is_empty:
                raise GrammarError(f"the {kind.replace('_', ' ')} matches no string at all")
            compiled = RegularGrammar(dfa, self.tokenizer_info, self.token_index, kind=kind,
                                      mask_cache_bytes=self.mask_cache_bytes)
            compiled.compile_ms = (time.perf_counter() - t0) * 1e3
            return compiled

    def _build_unlimited(self, kind: str, front_end) -> CompiledGrammar:
        t0 = time.perf_counter()
        node, warnings = front_end()
        if isinstance(node, ir.Grammar):
            node = simplify_grammar(node)
        if isinstance(node, ir.Grammar):
            automaton: Dfa | Pda | CountedDfa = Pda(node, max_states=self.max_states,
                                                   max_stack_depth=self.max_stack_depth)
        else:
            dfa, bounds = (compile_counted_dfa(node, max_states=self.max_states)
                           if kind == "json_schema" and self.count_lengths
                           else (compile_dfa(node, max_states=self.max_states), ()))
            if dfa.is_empty:
                raise GrammarError(f"the {kind.replace('_', ' ')} matches no string at all")
            automaton = CountedDfa(dfa, bounds) if bounds else dfa
        compiled = self.bind(automaton, kind=kind, warnings=warnings)
        compiled.compile_ms = (time.perf_counter() - t0) * 1e3
        return compiled

    def bind(self, automaton: Dfa | Pda | CountedDfa, *, kind: str, warnings=()) -> CompiledGrammar:
        """A compiled grammar for this vocabulary from an automaton already built
        (a minimized DFA, or the rules' automata of a context-free grammar);
        not cached. The second half of every compile, and how a serialized
        grammar is read back without compiling it again.

        Parameters
        ----------
        automaton : Dfa, Pda or CountedDfa
            A trimmed, minimized DFA (:func:`leapgen.automata.compile_dfa`), a
            :class:`~leapgen.automata.pda.Pda`, or a DFA with counted regions
            (:class:`~leapgen.automata.counted.CountedDfa`).
        kind : str
            What the grammar came from (``"regex"``, ``"json_schema"``, ``"ebnf"``, ...).
        warnings : iterable of str, default ()
            Where the grammar is looser than its source.

        Returns
        -------
        CompiledGrammar
            A :class:`RegularGrammar`, a :class:`ContextFreeGrammar`, a
            :class:`~leapgen.compiler.compiled_counted.CountedGrammar`, or a
            :class:`~leapgen.compiler.compiled_budget.BudgetedGrammar` when rules
            have token / character budgets; small context-free grammars get every frame's tokens sorted now (see
            :data:`~leapgen.compiler.compiled_cfg.EAGER_FRAMES`).
        """
        common = dict(kind=kind, warnings=tuple(warnings), mask_cache_bytes=self.mask_cache_bytes)
        if isinstance(automaton, Pda):
            kind_of = BudgetedGrammar if automaton.has_budget else ContextFreeGrammar
            compiled: CompiledGrammar = kind_of(automaton, self.tokenizer_info, self.token_index, **common)
            if int(automaton.has_bytes_flat.sum()) <= EAGER_FRAMES:
                compiled.sort_all_frames()
            return compiled
        if isinstance(automaton, CountedDfa):
            return CountedGrammar(automaton, self.tokenizer_info, self.token_index, **common)
        return RegularGrammar(automaton, self.tokenizer_info, self.token_index, **common)
