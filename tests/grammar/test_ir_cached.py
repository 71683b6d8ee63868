"""The analyses cached on IR nodes (``ir.ref_names``, ``ir.tree_size``) against plain
recursive definitions written here, over random IR that shares subterms."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from leapgen.grammar import ir


def naive_refs(node) -> set:
    if isinstance(node, ir.RuleRef):
        return {node.name}
    out: set = set()
    for attr in ("items", "item", "sep", "left"):
        value = getattr(node, attr, None)
        for child in (value if isinstance(value, tuple) else (value,) if value is not None else ()):
            out |= naive_refs(child)
    if isinstance(node, ir.Diff):
        out |= naive_refs(node.right)
    return out


def naive_size(node) -> int:
    if isinstance(node, ir.Bytes):
        return max(len(node.data), 1)
    if isinstance(node, (ir.ByteSet, ir.CharSet)):
        return 2
    if isinstance(node, ir.RuleRef):
        return 1
    if isinstance(node, (ir.Seq, ir.Alt, ir.Intersect)):
        return 1 + sum(naive_size(i) for i in node.items)
    if isinstance(node, ir.Repeat):
        return 1 + naive_size(node.item) * max(node.hi if node.hi is not None else node.lo + 1, 1)
    if isinstance(node, ir.Subsets):
        return 1 + sum(naive_size(i) for i in node.items) + naive_size(node.sep) * (len(node.items) - 1)
    if isinstance(node, ir.Join):
        return 1 + naive_size(node.item) + naive_size(node.sep)
    if isinstance(node, ir.Diff):
        return 1 + naive_size(node.left) + naive_size(node.right)
    if isinstance(node, ir.Embed):
        return 1 + naive_size(node.item)
    return 2  # Quotient


leaves = st.one_of(
    st.binary(max_size=3).map(ir.Bytes),
    st.just(ir.ByteSet(((48, 57),))),
    st.just(ir.CharSet(((0x80, 0x10FFFF),))),
    st.sampled_from("abc").map(ir.RuleRef),
)


def _compose(children):
    pair = st.tuples(children, children)
    return st.one_of(
        st.lists(children, max_size=3).map(lambda xs: ir.Seq(tuple(xs))),
        st.lists(children, max_size=3).map(lambda xs: ir.Alt(tuple(xs))),
        st.tuples(children, st.integers(0, 3), st.one_of(st.none(), st.integers(3, 5))).map(
            lambda t: ir.Repeat(t[0], t[1], t[2])),
        pair.map(lambda p: ir.Join(*p)),
        st.tuples(st.lists(children, min_size=1, max_size=3), children).map(lambda t: ir.Subsets(tuple(t[0]), t[1])),
        pair.map(lambda p: ir.Diff(*p)),
        leaves.map(lambda c: ir.Quotient(c, b"x")),  # built apart: what they hold is not counted, so
        leaves.map(ir.Embed),  # only over leaves (over big subterms they would hide most of the tree)
        pair.map(lambda p: ir.Seq((p[0], p[1], p[0]))),  # a shared subterm
    )


@settings(max_examples=300, deadline=None)
@given(st.recursive(leaves, _compose, max_leaves=25))
def test_cached_analyses_match_naive_recursion(node):
    assert ir.ref_names(node) == naive_refs(node)
    assert ir.tree_size(node) == min(naive_size(node), ir.SIZE_CAP)
    assert ir.contains_ruleref(node) == bool(naive_refs(node))
    # asked again (now cached on the subterms), and of a subterm first then the whole
    assert ir.tree_size(node) == min(naive_size(node), ir.SIZE_CAP)


def test_deep_ir_does_not_recurse():
    node = ir.RuleRef("x")
    for _ in range(20_000):  # deeper than the recursion limit
        node = ir.Repeat(ir.Seq((ir.Bytes(b"a"), node)), 0, 1)
    assert ir.ref_names(node) == {"x"}
    assert ir.tree_size(node) == 1 + 3 * 20_000
    doubling = ir.Bytes(b"a")
    for _ in range(40):  # two copies a level: past the cap
        doubling = ir.Repeat(ir.Seq((doubling, ir.RuleRef("y"))), 0, 2)
    assert ir.tree_size(doubling) == ir.SIZE_CAP
