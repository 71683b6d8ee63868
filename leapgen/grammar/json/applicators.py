"""Applicators of the JSON Schema front-end: ``$ref``, ``allOf``, ``anyOf``,
``oneOf`` and the normalisation that rewrites the logic keywords.

:class:`Applicators` is a mixin of the running compiler
(:class:`leapgen.grammar.json.schema._Compiler`); it relies on the compiler's
``refs`` (:class:`.refs.RefIndex`), ``compile``, ``warn``, ``keep``,
``cfg``, ``rules``, ``layout`` and caches.

* ``$ref`` without siblings, in CFG mode: a rule per target (the grammar layer
  inlines those that do not recurse); with siblings: merged with its target.
* ``allOf``: the branches merged into one schema (:mod:`.merge`).
* ``anyOf``: the union of the branches, each merged with the sibling keywords.
* ``oneOf``: ``anyOf``, exact when the branches are provably disjoint
  (:mod:`.disjoint`) or when each branch can be conjoined with the
  complements of the branches it may overlap; else a warning
  (:meth:`Applicators.normalize`).
"""

from __future__ import annotations

from leapgen.errors import SchemaError

from .. import ir
from ..ir import Node
from .disjoint import disjoint, kinds
from .logic import negate, rewrite
from .merge import VALIDATION_KEYWORDS, close_child, conj
from .refs import join_pointer as _ptr

ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "$schema", "$id", "$anchor",
    "$dynamicAnchor", "$vocabulary", "deprecated", "readOnly", "writeOnly", "contentEncoding",
    "contentMediaType", "contentSchema", "$defs", "definitions", "discriminator", "nullable",
})
"""Keywords that never affect validation (``nullable``/``discriminator`` are
OpenAPI annotations)."""


MAX_EXCLUSIVE_BRANCHES = 6
"""Most ``oneOf`` branches that may overlap one another made exclusive by negation (a branch
conjoined with at most this many minus one complements)."""


class Applicators:
    """``$ref``/``allOf``/``anyOf``/``oneOf`` handling (a mixin, see the module docstring)."""

    def _deref(self, schema, ptr: str, *, merging: bool = True):
        """Follow ``$ref`` chains and ``allOf``; normalise (see :meth:`normalize`).

        ``merging``: the result will be merged into a schema being compiled,
        so a target already being compiled is a recursion that cannot be
        merged. Returns (schema, pointer, ref targets visited).
        """
        seen = []
        schema = self.normalize(schema, ptr)
        while isinstance(schema, dict) and ("$ref" in schema or "allOf" in schema):
            if "$ref" in schema:
                target, tptr = self.refs.resolve(schema["$ref"], _ptr(ptr, "$ref"), ptr)
                if tptr in seen or (merging and tptr in self._ref_stack and not self.recursion_by_rules):
                    self._cycle(ptr, tptr)
                seen.append(tptr)
                rest = self._ref_siblings(schema)
                schema, ptr = (target, tptr) if not rest else (self._conj(rest, target, ptr, tptr), ptr)
            else:
                schema = self._merge_all_of(schema, ptr)
            schema = self.normalize(schema, ptr)
        return schema, ptr, seen

    def normalize(self, schema, ptr: str):
        """Draft-07 array ``items`` -> ``prefixItems``; ``not``, ``if``,
        dependencies -> ``allOf`` (:func:`.logic.rewrite`); ``oneOf`` ->
        ``anyOf`` (a warning unless its branches are provably disjoint).
        Memoized per schema object."""
        if not isinstance(schema, dict):
            return schema
        hit = self._normal.get(id(schema))
        if hit is not None:
            return hit[1]
        out = schema
        if isinstance(out.get("items"), list):
            out = dict(out)
            out["prefixItems"] = out.pop("items")
            if "additionalItems" in out:
                out["items"] = out.pop("additionalItems")
        out = rewrite(self, out, ptr)
        if "oneOf" in out:
            branches = out["oneOf"]
            if not isinstance(branches, list) or not branches:
                raise SchemaError("oneOf must be a non-empty array", pointer=_ptr(ptr, "oneOf"))
            rest = {k: v for k, v in out.items() if k != "oneOf" and k in VALIDATION_KEYWORDS}
            if not self.provably_disjoint(branches, ptr, rest):
                exact = self._exclusive(branches, ptr, rest) if self.exclusive_one_of else None
                self.used_exclusive |= exact is not None
                if exact is None:
                    self.warn(_ptr(ptr, "oneOf"), "branches may overlap, so oneOf is compiled as anyOf (a value "
                                                  "matching several is accepted)")
                else:
                    branches = exact
            out = {k: v for k, v in out.items() if k != "oneOf"}
            if "anyOf" in out:
                out["allOf"] = [*out.get("allOf", []), {"anyOf": branches}]
            else:
                out["anyOf"] = branches
        self._normal[id(schema)] = (schema, out)
        if out is not schema:
            self._keep.append(out)
        return out

    def _exclusive(self, branches: list, ptr: str, rest: dict | None = None) -> list | None:
        """``oneOf`` made exact: branch ``i`` conjoined with the complement of
        every other branch it may overlap (:func:`.logic.negate`; branches
        provably disjoint from it, :func:`.disjoint.disjoint`, need none),
        each merged into one schema now; None when a complement is not
        expressible, the merge fails, or a branch may overlap more than
        ``MAX_EXCLUSIVE_BRANCHES - 1`` others."""
        overlaps = self._overlaps(branches, ptr, rest)
        if any(len(o) >= MAX_EXCLUSIVE_BRANCHES for o in overlaps):
            return None
        try:
            negs = {j: negate(self, branches[j], _ptr(ptr, "oneOf", j)) for o in overlaps for j in o}
            out = []
            for i, b in enumerate(branches):
                bp = _ptr(ptr, "oneOf", i)
                merged = self.normalize(b, bp)
                for j in overlaps[i]:
                    if merged is not False:
                        merged = self._conj(merged, negs[j], bp) if merged is not True else negs[j]
                out.append(self.keep(merged) if isinstance(merged, dict) else merged)
            return out
        except (SchemaError, RecursionError):
            return None

    def _overlaps(self, branches: list, ptr: str, rest: dict | None) -> list:
        """Per branch, the other branches not provably disjoint from it (each conjoined with ``rest``)."""
        ks = []
        for i, b in enumerate(branches):
            bp = _ptr(ptr, "oneOf", i)
            try:
                ks.append(kinds(self, self.keep(self._conj(rest, b, bp)) if rest else b, bp))
            except SchemaError:
                ks.append(None)
        return [[j for j in range(len(branches)) if j != i and (ks[i] is None or ks[j] is None
                                                                 or not disjoint(ks[i], ks[j]))]
                for i in range(len(branches))]

    def provably_disjoint(self, branches: list, ptr: str, rest: dict | None = None) -> bool:
        """Whether no value can match two of ``branches`` (each conjoined with ``rest``)."""
        return not any(self._overlaps(branches, ptr, rest))

    def _cycle(self, ptr: str, target: str):
        if self.cfg:
            why = "a $ref with sibling keywords (or a chain of $ref) that recurses is not supported yet"
        elif self.layout.depth_dependent:
            why = "recursive schemas cannot be compiled with the indent layout (indentation grows with depth)"
        else:
            why = "recursive schemas need the CFG support (pass cfg=True)"
        raise SchemaError(f"recursive schema: $ref to {target or '#'} refers back to itself; {why}",
                          pointer=_ptr(ptr, "$ref"))

    def _conj(self, parent, child, ptr: str, child_ptr: str | None = None):
        """``parent`` and ``child`` (a ``$ref`` target at ``child_ptr``, or an
        applicator branch) as one schema."""
        parent, _, _ = self._deref(parent, ptr)
        child, _, _ = self._deref(child, ptr if child_ptr is None else child_ptr)
        return conj(parent, self._close_child(child, ptr), ptr, ANNOTATIONS)

    def _close_child(self, schema, ptr: str):
        out = close_child(schema, ptr)
        if out is not schema:
            self._keep.append(out)
        return out

    def _ref(self, schema: dict, ptr: str, depth: int) -> Node:
        target, tptr = self.refs.resolve(schema["$ref"], _ptr(ptr, "$ref"), ptr)
        rest = self._ref_siblings(schema)
        if self.cfg and not rest and not self._in_product:
            # every target is a rule; simplify_grammar inlines those that do not recurse
            name = "ref:" + (tptr or "#")
            if name not in self.rules:
                self._check_ref_chain(target, tptr)
                self.rules[name] = ir.NOTHING  # placeholder while the body is compiled
                self._ref_stack.append(tptr)
                try:
                    self.rules[name] = self.compile(target, tptr, depth)
                finally:
                    self._ref_stack.pop()
            return ir.RuleRef(name)
        if tptr in self._ref_stack and not self.recursion_by_rules:
            self._cycle(ptr, tptr)
        self._ref_stack.append(tptr)
        try:
            if not rest:
                return self.compile(target, tptr, depth)
            merged = self._conj(rest, target, ptr, tptr)
            self._keep.append(merged)
            return self.compile(merged, ptr, depth)
        finally:
            self._ref_stack.pop()

    def _ref_siblings(self, schema: dict) -> dict:
        """The keywords next to ``$ref`` that apply with it: its validation
        siblings (2020-12), or none when the root's ``$schema`` declares draft
        4, 6 or 7, where "all other properties in a $ref object MUST be
        ignored"."""
        if self.legacy_ref:
            return {}
        return {k: v for k, v in schema.items() if k != "$ref" and k in VALIDATION_KEYWORDS}

    def _check_ref_chain(self, target, tptr: str) -> None:
        """Reject a chain of bare ``$ref`` that comes back to where it started
        (a rule defined only as itself)."""
        chain = [tptr]
        while isinstance(target, dict) and "$ref" in target and all(
                k == "$ref" or k not in VALIDATION_KEYWORDS for k in target):
            target, nxt = self.refs.resolve(target["$ref"], _ptr(chain[-1], "$ref"), chain[-1])
            if nxt in chain:
                raise SchemaError(f"recursive schema: the $ref chain {' -> '.join(p or '#' for p in chain)} "
                                  "comes back to itself without any structure", pointer=_ptr(chain[-1], "$ref"))
            chain.append(nxt)

    def _merge_all_of(self, schema: dict, ptr: str, seen: list | None = None):
        """``schema`` with its ``allOf`` branches merged in (``seen`` collects
        the ``$ref`` targets merged)."""
        branches = schema["allOf"]
        if not isinstance(branches, list) or not branches:
            raise SchemaError("allOf must be a non-empty array", pointer=_ptr(ptr, "allOf"))
        out = {k: v for k, v in schema.items() if k != "allOf"}
        for i, b in enumerate(branches):
            bp = _ptr(ptr, "allOf", i)
            b, _, refs = self._deref(b, bp)
            if seen is not None:
                seen.extend(refs)
            out = conj(out, self._close_child(b, bp), bp, ANNOTATIONS)
        self._keep.append(out)
        return out

    def _all_of(self, schema: dict, ptr: str, depth: int) -> Node:
        """``allOf``: one real branch alone is compiled as itself (a ``$ref``
        stays a rule, so a recursion through it works); otherwise the merge,
        compiled with the merged ``$ref`` targets on the reference stack (a
        merge that recurses is refused, not unrolled forever)."""
        branches = schema["allOf"]
        if isinstance(branches, list):
            real = [(i, b) for i, b in enumerate(branches) if b is not True and b != {}]
            if len(real) == 1 and not any(k in VALIDATION_KEYWORDS for k in schema if k != "allOf"):
                i, b = real[0]
                return self.compile(b, _ptr(ptr, "allOf", i), depth)
        seen: list = []
        merged = self._merge_all_of(schema, ptr, seen)
        if self.recursion_by_rules:  # a recursion comes back to an original subschema: compile() makes it a rule
            return self.compile(merged, ptr, depth)
        fresh = [t for t in seen if t not in self._ref_stack]
        self._ref_stack.extend(fresh)
        try:
            return self.compile(merged, ptr, depth)
        finally:
            del self._ref_stack[len(self._ref_stack) - len(fresh):]

    def _any_of(self, schema: dict, ptr: str, depth: int) -> Node:
        if "oneOf" in schema:  # only from a merge that skipped normalize
            return self.compile(self.normalize(dict(schema), ptr), ptr, depth)
        branches = schema["anyOf"]
        if not isinstance(branches, list) or not branches:
            raise SchemaError("anyOf must be a non-empty array", pointer=_ptr(ptr, "anyOf"))
        rest = {k: v for k, v in schema.items() if k != "anyOf" and k in VALIDATION_KEYWORDS}
        nodes = []
        for i, b in enumerate(branches):
            bp = _ptr(ptr, "anyOf", i)
            if rest:
                b = self.keep(self._conj(rest, b, bp))
            nodes.append(self.compile(b, bp, depth))
        return ir.alt(*nodes)
