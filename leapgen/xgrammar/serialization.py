"""The JSON data format of :mod:`leapgen.xgrammar`'s ``serialize_json``.

Grammar IR, DFAs and pushdown automata as JSON documents, never pickle:

- IR (:mod:`leapgen.grammar.ir`) is a table of nodes in post-order, each an
  array ``[kind, fields...]`` whose node fields are indices of earlier
  entries (shared subterms are written once, so a DAG stays its size);
- a DFA is its transition table (int32, little-endian) and accepting flags,
  zlib-compressed and base64-encoded;
- a pushdown automaton is its rule names, one DFA per rule and the rules'
  options (temperature, budgets).

Every document carries ``"__VERSION__"`` (:data:`SERIALIZATION_VERSION`);
reading one of another version raises
:class:`~leapgen.errors.DeserializeVersionError`, malformed data
:class:`~leapgen.errors.DeserializeFormatError`, text that is not JSON
:class:`~leapgen.errors.InvalidJSONError`. Readers check every field (types,
ranges, references) before building anything.
"""

from __future__ import annotations

import base64
import json
import zlib
import numpy as np

from leapgen.automata import Dfa
from leapgen.automata.pda import Pda
from leapgen.errors import DeserializeFormatError, DeserializeVersionError, GrammarError, InvalidJSONError
from leapgen.grammar import ir

#: The version written into, and required of, every document.
SERIALIZATION_VERSION = "leapgen-1"

_MAX_INT = 0x7FFFFFFF


def load_document(text: str | bytes, kind: str) -> dict:
    """Parse ``text`` and check its version and ``"type"``.

    Raises
    ------
    InvalidJSONError, DeserializeVersionError, DeserializeFormatError
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise DeserializeFormatError(f"expected JSON text, got {type(text).__name__}")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InvalidJSONError(f"the serialized {kind} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise DeserializeFormatError(f"a serialized {kind} is a JSON object, got {type(doc).__name__}")
    version = doc.get("__VERSION__")
    if version != SERIALIZATION_VERSION:
        raise DeserializeVersionError(f"the serialized {kind} has version {version!r}; this leapgen reads "
                                      f"{SERIALIZATION_VERSION!r} only (serialize it again)")
    if doc.get("type") != kind:
        raise DeserializeFormatError(f"expected a serialized {kind}, got type {doc.get('type')!r}")
    return doc


def field(doc: dict, name: str, types, what: str):
    """``doc[name]``, checked to be of ``types``."""
    if name not in doc:
        raise DeserializeFormatError(f"the serialized {what} has no {name!r}")
    value = doc[name]
    if not isinstance(value, types) or (isinstance(value, bool) and types is int):
        raise DeserializeFormatError(f"{what}: {name!r} has the wrong type ({type(value).__name__})")
    return value


def int_list(value, what: str, *, lo: int = 0, hi: int = _MAX_INT) -> list[int]:
    """``value`` checked to be a list of ints in ``[lo, hi]``."""
    if not isinstance(value, list) or not all(type(v) is int and lo <= v <= hi for v in value):
        raise DeserializeFormatError(f"{what} must be a list of integers in [{lo}, {hi}]")
    return value


# -- arrays -------------------------------------------------------------------------------------

def encode_array(a: np.ndarray, dtype: str) -> str:
    """``a`` as little-endian ``dtype`` bytes, zlib-compressed, base64 text."""
    return base64.b64encode(zlib.compress(np.ascontiguousarray(a, dtype).tobytes(), 1)).decode("ascii")


def decode_array(text, dtype: str, count: int, what: str) -> np.ndarray:
    """The inverse of :func:`encode_array`, checked to hold ``count`` items."""
    if not isinstance(text, str):
        raise DeserializeFormatError(f"{what} must be base64 text")
    try:
        raw = zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True))
    except (ValueError, zlib.error) as e:
        raise DeserializeFormatError(f"{what} is not base64 zlib data: {e}") from None
    arr = np.frombuffer(raw, dtype)
    if arr.size != count:
        raise DeserializeFormatError(f"{what} holds {arr.size} values, expected {count}")
    return arr.astype(dtype.lstrip("<"), copy=True)


# -- DFAs and pushdown automata -------------------------------------------------------------------

def dfa_to_json(dfa: Dfa) -> dict:
    """A DFA as a JSON object (see the module docstring)."""
    n, cols = dfa.trans.shape
    return {"n_states": int(n), "n_cols": int(cols), "start": int(dfa.start),
            "trans": encode_array(dfa.trans, "<i4"), "accepting": encode_array(dfa.accepting, "u1")}


def dfa_from_json(obj, what: str = "DFA") -> Dfa:
    """The inverse of :func:`dfa_to_json` (every transition checked in range)."""
    if not isinstance(obj, dict):
        raise DeserializeFormatError(f"a serialized {what} is a JSON object")
    n = field(obj, "n_states", int, what)
    cols = field(obj, "n_cols", int, what)
    start = field(obj, "start", int, what)
    if not (0 < n <= _MAX_INT and 256 <= cols <= _MAX_INT and 0 <= start < n):
        raise DeserializeFormatError(f"{what}: bad sizes (n_states={n}, n_cols={cols}, start={start})")
    trans = decode_array(obj.get("trans"), "<i4", n * cols, f"{what} transitions").reshape(n, cols)
    if trans.size and (int(trans.min()) < -1 or int(trans.max()) >= n):
        raise DeserializeFormatError(f"{what}: a transition leads outside its {n} states")
    accepting = decode_array(obj.get("accepting"), "u1", n, f"{what} accepting flags")
    if accepting.size and int(accepting.max()) > 1:
        raise DeserializeFormatError(f"{what}: accepting flags must be 0 or 1")
    trans.setflags(write=False)
    return Dfa(trans, accepting.astype(bool), start)


def options_to_json(options: dict) -> dict:
    """Rule options (:class:`~leapgen.grammar.ir.RuleOptions`) by rule name, as JSON."""
    return {name: {k: getattr(o, k) for k in ("temperature", "max_tokens", "max_chars") if getattr(o, k) is not None}
            for name, o in options.items()}


def options_from_json(obj, names) -> dict:
    """The inverse of :func:`options_to_json`, each value checked as the EBNF parser checks it."""
    if not isinstance(obj, dict):
        raise DeserializeFormatError("rule options must be a JSON object")
    out = {}
    for name, o in obj.items():
        if name not in names or not isinstance(o, dict) or not set(o) <= {"temperature", "max_tokens", "max_chars"}:
            raise DeserializeFormatError(f"bad options of rule {name!r}")
        t, mt, mc = o.get("temperature"), o.get("max_tokens"), o.get("max_chars")
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < float("inf")):
            raise DeserializeFormatError(f"rule {name!r}: temperature must be a finite non-negative number")
        if mt is not None and (type(mt) is not int or not 1 <= mt <= 1_000_000):
            raise DeserializeFormatError(f"rule {name!r}: max_tokens must be an int in [1, 1000000]")
        if mc is not None and (type(mc) is not int or not 0 <= mc <= _MAX_INT):
            raise DeserializeFormatError(f"rule {name!r}: max_chars must be an int in [0, {_MAX_INT}]")
        out[name] = ir.RuleOptions(None if t is None else float(t), mt, mc)
    return out


_KEYED = ("cannot serialize a grammar with keyed JSON objects (any_order=True, or a finite set of extra "
          "keys): their keys are matcher state, which serialization does not write yet")


def pda_to_json(pda: Pda) -> dict:
    """A pushdown automaton as a JSON object: its rule names, rule DFAs and rule options.

    Raises
    ------
    GrammarError
        The automaton has key guards (keyed JSON objects), which are not serializable yet.
    """
    if pda.guards:
        raise GrammarError(_KEYED)
    options = {n: o for n, o in zip(pda.names, pda.options) if o is not None}
    return {"names": list(pda.names), "max_stack_depth": int(pda.max_stack_depth),
            "dfas": [dfa_to_json(d) for d in pda.dfas], "options": options_to_json(options)}


def pda_from_json(obj) -> Pda:
    """The inverse of :func:`pda_to_json` (the automaton is checked as a compile checks it)."""
    if not isinstance(obj, dict):
        raise DeserializeFormatError("a serialized pushdown automaton is a JSON object")
    names = field(obj, "names", list, "pushdown automaton")
    if not names or not all(isinstance(x, str) for x in names):
        raise DeserializeFormatError("pushdown automaton: 'names' must be a non-empty list of str")
    depth = field(obj, "max_stack_depth", int, "pushdown automaton")
    dfas = field(obj, "dfas", list, "pushdown automaton")
    rules = [dfa_from_json(d, f"DFA of rule {names[i]!r}" if i < len(names) else "DFA")
             for i, d in enumerate(dfas)]
    options = options_from_json(obj.get("options", {}), set(names))
    try:
        return Pda.from_rule_dfas(names, rules, max_stack_depth=max(1, depth), options=options)
    except GrammarError as e:
        raise DeserializeFormatError(f"the serialized pushdown automaton is not valid: {e}") from None


# -- grammar IR ------------------------------------------------------------------------------------

def _encode_node(node: ir.Node, index: dict[int, int]) -> list:
    t = type(node)
    ref = lambda n: index[id(n)]  # noqa: E731
    if t is ir.Bytes:
        return ["bytes", base64.b64encode(node.data).decode("ascii")]
    if t is ir.ByteSet:
        return ["byteset", [list(r) for r in node.ranges]]
    if t is ir.CharSet:
        return ["charset", [list(r) for r in node.ranges]]
    if t in (ir.Seq, ir.Alt, ir.Intersect):
        return [t.__name__.lower(), [ref(i) for i in node.items]]
    if t is ir.Repeat:
        return ["repeat", ref(node.item), node.lo, node.hi]
    if t is ir.Join:
        return ["join", ref(node.item), ref(node.sep)]
    if t is ir.Subsets:
        return ["subsets", [ref(i) for i in node.items], ref(node.sep)]
    if t is ir.Diff:
        return ["diff", ref(node.left), ref(node.right)]
    if t is ir.Quotient:
        return ["quotient", ref(node.left), base64.b64encode(node.suffix).decode("ascii")]
    if t is ir.Embed:
        return ["embed", ref(node.item)]
    if t is ir.RuleRef:
        return ["ref", node.name]
    raise TypeError(f"cannot serialize IR node {t.__name__}")


def nodes_to_json(roots: list[ir.Node]) -> tuple[list, list[int]]:
    """The node table of several IR terms and each root's index (iterative post-order)."""
    index: dict[int, int] = {}
    table: list = []
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in index:
                continue
            if not expanded:
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(ir.children(node)) if id(c) not in index)
                continue
            index[id(node)] = len(table)
            table.append(_encode_node(node, index))
    return table, [index[id(r)] for r in roots]


def _ranges(value, limit: int, what: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(type(v) is int for v in r) and 0 <= r[0] <= r[1] <= limit
            for r in value):
        raise DeserializeFormatError(f"{what}: ranges must be [lo, hi] pairs within [0, {limit}]")
    return tuple((r[0], r[1]) for r in value)


def nodes_from_json(table) -> list[ir.Node]:
    """The IR nodes of a node table (each entry checked; references point backwards)."""
    if not isinstance(table, list):
        raise DeserializeFormatError("the IR node table must be a list")
    nodes: list[ir.Node] = []

    def ref(i) -> ir.Node:
        if type(i) is not int or not 0 <= i < len(nodes):
            raise DeserializeFormatError(f"IR node {len(nodes)} refers to {i!r}, not an earlier node")
        return nodes[i]

    def refs(v) -> tuple[ir.Node, ...]:
        if not isinstance(v, list):
            raise DeserializeFormatError(f"IR node {len(nodes)}: expected a list of node indices")
        return tuple(ref(i) for i in v)

    for entry in table:
        if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
            raise DeserializeFormatError(f"IR node {len(nodes)} is not [kind, ...]")
        kind, args = entry[0], entry[1:]
        shape = {"bytes": 1, "byteset": 1, "charset": 1, "seq": 1, "alt": 1, "intersect": 1, "repeat": 3,
                 "join": 2, "subsets": 2, "diff": 2, "quotient": 2, "embed": 1, "ref": 1}.get(kind)
        if shape is None or len(args) != shape:
            raise DeserializeFormatError(f"IR node {len(nodes)}: unknown kind {kind!r} or wrong field count")
        if kind == "bytes":
            try:
                node: ir.Node = ir.Bytes(base64.b64decode(str(args[0]).encode("ascii"), validate=True))
            except ValueError:
                raise DeserializeFormatError(f"IR node {len(nodes)}: bytes are not base64") from None
        elif kind == "byteset":
            node = ir.ByteSet(_ranges(args[0], 0xFF, f"IR node {len(nodes)}"))
        elif kind == "charset":
            node = ir.CharSet(_ranges(args[0], ir.MAX_UNICODE, f"IR node {len(nodes)}"))
        elif kind in ("seq", "alt", "intersect"):
            node = {"seq": ir.Seq, "alt": ir.Alt, "intersect": ir.Intersect}[kind](refs(args[0]))
        elif kind == "repeat":
            lo, hi = args[1], args[2]
            if type(lo) is not int or lo < 0 or (hi is not None and (type(hi) is not int or hi < lo)):
                raise DeserializeFormatError(f"IR node {len(nodes)}: bad repetition bounds {lo!r}, {hi!r}")
            node = ir.Repeat(ref(args[0]), lo, hi)
        elif kind == "join":
            node = ir.Join(ref(args[0]), ref(args[1]))
        elif kind == "subsets":
            node = ir.Subsets(refs(args[0]), ref(args[1]))
        elif kind == "diff":
            node = ir.Diff(ref(args[0]), ref(args[1]))
        elif kind == "quotient":
            try:
                node = ir.Quotient(ref(args[0]), base64.b64decode(str(args[1]).encode("ascii"), validate=True))
            except ValueError:
                raise DeserializeFormatError(f"IR node {len(nodes)}: a quotient's suffix is not base64") from None
        elif kind == "embed":
            node = ir.Embed(ref(args[0]))
        else:
            if not isinstance(args[0], str):
                raise DeserializeFormatError(f"IR node {len(nodes)}: a rule reference names a str")
            node = ir.RuleRef(args[0])
        nodes.append(node)
    return nodes


def ir_to_json(grammar: ir.Node | ir.Grammar) -> dict:
    """A regular term or a grammar of rules as a JSON object.

    Raises
    ------
    GrammarError
        The grammar has keyed JSON objects, which are not serializable yet.
    """
    if isinstance(grammar, ir.Grammar):
        if grammar.keyed:
            raise GrammarError(_KEYED)
        names = list(grammar.rules)
        table, ids = nodes_to_json([grammar.rules[n] for n in names])
        return {"nodes": table, "rules": dict(zip(names, ids)), "root_rule": grammar.root,
                "keep": sorted(grammar.keep), "options": options_to_json(grammar.options)}
    table, (root,) = nodes_to_json([grammar])
    return {"nodes": table, "root": root}


def ir_from_json(obj) -> ir.Node | ir.Grammar:
    """The inverse of :func:`ir_to_json`; rule references must name rules."""
    if not isinstance(obj, dict):
        raise DeserializeFormatError("serialized grammar IR is a JSON object")
    nodes = nodes_from_json(obj.get("nodes"))
    if "rules" not in obj:
        root = obj.get("root")
        if type(root) is not int or not 0 <= root < len(nodes):
            raise DeserializeFormatError("serialized grammar IR: 'root' is not a node index")
        if any(isinstance(n, ir.RuleRef) for n in nodes):
            raise DeserializeFormatError("serialized grammar IR: a rule reference in a grammar without rules")
        return nodes[root]
    rules = field(obj, "rules", dict, "grammar IR")
    root_rule = field(obj, "root_rule", str, "grammar IR")
    keep = field(obj, "keep", list, "grammar IR")
    out = {}
    for name, i in rules.items():
        if type(i) is not int or not 0 <= i < len(nodes):
            raise DeserializeFormatError(f"serialized grammar IR: rule {name!r} is not a node index")
        out[name] = nodes[i]
    if root_rule not in out:
        raise DeserializeFormatError(f"serialized grammar IR: no root rule {root_rule!r}")
    missing = {n.name for n in nodes if isinstance(n, ir.RuleRef)} - out.keys()
    if missing:
        raise DeserializeFormatError(f"serialized grammar IR: undefined rules {sorted(missing)}")
    if not all(isinstance(k, str) and k in out for k in keep):
        raise DeserializeFormatError("serialized grammar IR: 'keep' must name rules")
    return ir.Grammar(out, root_rule, frozenset(keep),
                      options=options_from_json(obj.get("options", {}), out.keys()))


def to_text(doc: dict, kind: str) -> str:
    """``doc`` with its version and type, as compact JSON text."""
    return json.dumps({"__VERSION__": SERIALIZATION_VERSION, "type": kind, **doc}, separators=(",", ":"),
                      ensure_ascii=True)
