"""Size facts (fusec/frontend/size_facts.py): Dynamo's equality guards between sizes, written into the graph as
rewrites, so that tensors a graph break gave separate symbols (a loss's labels and logits) still fuse."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import sympy
import torch
import torch.nn.functional as Fn

from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.frontend.size_facts import equality_facts
from fusec.testing import parse

pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py

s0, s1, s2, s3, s4 = (sympy.Symbol(f"s{i}", integer=True, positive=True) for i in range(5))  # as Dynamo makes them
s5 = sympy.Symbol("s5", integer=True)  # an int argument, not a size: it may be 0 or negative


def _env(*guards: sympy.Basic) -> SimpleNamespace:
    return SimpleNamespace(guards=[SimpleNamespace(expr=g) for g in guards])


def S(name: str) -> sympy.Expr:
    return shapes.size_symbol(name)


def test_equality_guards_become_rewrites_into_bound_symbols():
    facts = equality_facts(_env(
        sympy.Eq(s0 * s1, s2 * s3),  # two products: the one whose symbols sort first is kept
        sympy.Eq(s1, sympy.floor(s2 * s3 / s0)),  # decided by the first fact once rewritten: left out
        sympy.Ne(s0, s2),  # not an equality
        sympy.Eq(s4, s0 + s1),  # s4 stays (a symbol is never rewritten), s0 + s1 -> s4
        sympy.Eq(s0 * s2, 12),  # a constant is the ShapeEnv's to specialize
        sympy.Eq(768 * s5 + 768 * s1, 768 * s1),  # fixes s5 (transformers' logits_to_keep=0): s5 -> 0
    ), bound={"s0", "s1", "s2", "s3", "s4"})
    assert facts == [(S("s2") * S("s3"), S("s0") * S("s1")), (S("s0") + S("s1"), S("s4")), (S("s5"), 0)]
    # A form over symbols no input gives is never the one sizes are written in.
    assert equality_facts(_env(sympy.Eq(s0 * s1, s2 * s3)), bound={"s2", "s3"}) == [(S("s0") * S("s1"), S("s2") * S("s3"))]
    assert equality_facts(_env(sympy.Eq(s0 * s1, s2 * s3)), bound={"s0", "s3"}) == []
    assert equality_facts(None, bound=set()) == []


def _shifted_loss(logits, labels):
    """A causal LM's loss as transformers writes it: labels padded by one, shifted, both sides flattened."""
    labels = Fn.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
    return Fn.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)


def test_a_loss_over_labels_with_their_own_sizes_is_kernels_alone_under_dynamic_shapes(tmp_path):
    """logits [b, t, v] and labels [b', t'] with their own symbols (as after a graph break): the guard b*t == b'*t'
    becomes the fact ``s..*s.. = s..*s..`` and the forward and backward graphs run no torch call at all, as static
    shapes do; values and gradients are eager's at two sizes, with one compiled artifact."""
    g = torch.Generator().manual_seed(0)
    compiled = torch.compile(_shifted_loss, backend="fusec", dynamic=True, options={"dump_dir": str(tmp_path)})
    # Rows agree, dims differ: Dynamo gives the labels symbols of their own (equal dims would share them).
    for logits_rows, label_rows in (((2, 6), (3, 4)), ((4, 3), (2, 6))):
        logits = torch.randn(*logits_rows, 11, generator=g)
        labels = torch.randint(0, 11, label_rows, generator=g)
        labels[0, 1] = -100
        got_leaf, want_leaf = logits.clone().requires_grad_(), logits.clone().requires_grad_()
        got, want = compiled(got_leaf, labels), _shifted_loss(want_leaf, labels)
        torch.testing.assert_close(got, want)
        got.backward()
        want.backward()
        torch.testing.assert_close(got_leaf.grad, want_leaf.grad)
    graphs = sorted(tmp_path.iterdir())
    assert len(graphs) == 2, graphs  # a forward and a backward: the second size compiled nothing
    for graph_dir in graphs:
        final = sorted(graph_dir.glob("[0-9][0-9]-*.mlir"))[-1].read_text()
        (graph,) = [op for op in parse(final).walk() if isinstance(op, F.GraphOp)]
        assert len(graph.size_facts) == 1, final.splitlines()[1]
        assert not [op for op in graph.walk() if isinstance(op, F.ExternOp)], f"{graph_dir.name}: {final}"
