"""fusec's decomposition table: composites reach the importer as pointwise ops, reductions, views and matmuls."""

import pytest
import torch
import torch.nn.functional as Fn
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

from fusec.frontend.aten_ops import DESIGNED_EXTERNS, TABLE
from fusec.frontend.decompositions import EXTERN, fusec_decompositions

aten = torch.ops.aten


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def aten_graphs(fn, *inputs, dynamic=False):
    """The forward and backward aten graphs AOTAutograd makes with fusec's table."""
    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep, decompositions=fusec_decompositions())
    torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True)(*inputs).sum().backward()
    return graphs


def ops_of(gm) -> set[str]:
    return {str(n.target) for n in gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload)}


def natively_imported(op: str) -> bool:
    namespace, name, overload = op.split(".")
    key = f"{name}.{overload}"
    return (namespace == "aten" and (key in TABLE or name in TABLE or name in DESIGNED_EXTERNS)) or f"{namespace}.{key}" in TABLE


def model(x, w, b, target):
    h = Fn.layer_norm(Fn.linear(x, w, b), (w.shape[0],))
    h = Fn.gelu(h) + Fn.silu(h) + Fn.gelu(h, approximate="tanh")
    h = h + Fn.rms_norm(h, (w.shape[0],)) + torch.var_mean(h, 1, keepdim=True)[0] + h.std(0)
    return Fn.nll_loss(Fn.log_softmax(h, -1), target) + h.softmax(0).mean() + Fn.embedding(target, w).sum()


@pytest.mark.parametrize("dynamic", [False, True])
def test_forward_and_backward_use_only_what_the_importer_maps(dynamic):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, generator=g, requires_grad=True)
    w = torch.randn(8, 5, generator=g, requires_grad=True)
    b = torch.randn(8, generator=g, requires_grad=True)
    target = torch.randint(0, 8, (6,), generator=g)
    graphs = aten_graphs(model, x, w, b, target, dynamic=dynamic)
    assert len(graphs) == 2
    used = set().union(*map(ops_of, graphs))
    # embedding's backward is a scatter-add: a torch call by design; nll_loss's scatter is a where
    assert "aten.embedding_dense_backward.default" in used and "aten.index_put.default" not in used
    leftovers = {op for op in used if not natively_imported(op)}
    assert not leftovers
    assert not any(op.startswith("prims.") and "convert_element_type" not in op for op in used)
    for composite in ["native_layer_norm", "_softmax", "_log_softmax", "gelu", "silu", "var_mean", "var", "_fused_rms_norm",
                      "native_layer_norm_backward", "_log_softmax_backward_data", "_softmax_backward_data", "gelu_backward",
                      "silu_backward", "addmm", "embedding"]:
        assert not any(op.startswith(f"aten.{composite}.") for op in used), composite


def test_library_ops_are_never_decomposed():
    table = fusec_decompositions()
    for name in EXTERN:
        packet = getattr(aten, name, None)
        if packet is not None:
            assert not any(getattr(packet, o) in table for o in packet.overloads()), name


def test_addmm_keeps_the_matmul_in_the_input_dtype():
    g = torch.Generator().manual_seed(0)
    bias, x, w = (torch.randn(*s, generator=g).half() for s in [(3,), (4, 6), (6, 3)])
    mm_dtypes = []

    def keep(gm, _):
        for n in gm.graph.nodes:
            if n.target is aten.mm.default:
                mm_dtypes.append(n.meta["val"].dtype)
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=keep, decompositions=fusec_decompositions())
    out = torch.compile(lambda b, x, w: torch.addmm(b, x, w, beta=2.0), backend=backend)(bias, x, w)
    assert mm_dtypes == [torch.float16]
    torch.testing.assert_close(out.float(), torch.addmm(bias.float(), x.float(), w.float(), beta=2.0), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("correction, keepdim, dims", [(1, False, None), (0, True, [1]), (2, False, [0, 1])])
def test_variance_decomposition_matches_torch(correction, keepdim, dims):
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    decomposition = fusec_decompositions()[aten.var_mean.correction]
    var, mean = decomposition(x, dims, correction=correction, keepdim=keepdim)
    want_var, want_mean = torch.var_mean(x, dims, correction=correction, keepdim=keepdim)
    torch.testing.assert_close(var, want_var)
    torch.testing.assert_close(mean, want_mean)


def test_square_and_reciprocal_powers_become_mul_and_reciprocal():
    x = (torch.randn(4, 6) + 3).requires_grad_()
    forward, _ = aten_graphs(lambda x: x.pow(2) + x.pow(-1) + x.pow(3) + x.pow(0.5), x)
    assert {"aten.mul.Tensor", "aten.reciprocal.default"} <= ops_of(forward)
    pows = [n for n in forward.graph.nodes if n.target == torch.ops.aten.pow.Tensor_Scalar]
    # Cubes are multiplied out too (torch's own pow kernel computes x*x*x); 0.5 is left to pow.
    assert sorted(n.args[1] for n in pows) == [0.5]
    # Positive integer powers of integers multiply too (they wrap as torch's integer pow does);
    # an integer to a float power stays a pow (its result is a float).
    integers, _ = aten_graphs(lambda x: x + torch.arange(6).pow(2) + torch.arange(6).pow(2.5), x)
    assert "aten.mul.Tensor" in ops_of(integers)
    assert [n.args[1] for n in integers.graph.nodes if n.target == torch.ops.aten.pow.Tensor_Scalar] == [2.5]


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("case", ["value", "src", "dim0", "int", "two_per_line"])
def test_scatter_of_one_position_per_line_is_a_where(case, dynamic):
    """scatter with one index per line (nll_loss's backward) decomposes to a where over arange; other scatters
    stay torch calls.  Values against eager either way."""
    g = torch.Generator().manual_seed(1)
    base = torch.randn(5, 9, generator=g)
    index = torch.randint(0, 9, (5, 1), generator=g)
    fn = {
        "value": lambda b, i: b.scatter(1, i, -1.5),
        "src": lambda b, i: b.scatter(1, i, b[:, :1] * 2),
        "dim0": lambda b, i: b.t().scatter(0, i.t(), 3.0),
        "int": lambda b, i: (b > 0).long().scatter(-1, i, 7),
        "two_per_line": lambda b, i: b.scatter(1, torch.cat([i, (i + 1) % 9], 1), 0.5),
    }[case]
    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=keep, decompositions=fusec_decompositions())
    torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True)(base, index)
    used = set().union(*map(ops_of, graphs))
    assert ("aten.scatter.value" in used or "aten.scatter.src" in used) == (case == "two_per_line")
    torch.testing.assert_close(torch.compile(fn, backend="fusec", dynamic=dynamic)(base, index), fn(base, index))


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize(("shape", "pad", "value"), [
    ((4, 6), (0, 1), -100),  # a causal LM's labels, padded before the shift
    ((4, 6), (2, -1), 1.5),
    ((3, 4, 5), (1, 2, -1, 3), 0.0),
    ((2, 3), (-1, -1, 1, 0), 7),
    ((5,), (0, 0), 2.0),
], ids=["labels", "cut-right", "two-dims", "cut-both", "none"])
def test_constant_padding_is_slices_and_a_cat(shape, pad, value, dynamic):
    """constant_pad_nd with static pads decomposes to slices and a cat with constant blocks, which the importer maps
    natively (no torch call left); the values and a gradient through it are eager's."""
    g = torch.Generator().manual_seed(2)
    is_float = isinstance(value, float)
    x = torch.randn(shape, generator=g) if is_float else torch.randint(-9, 9, shape, generator=g)

    # The pads written in the code, as a model writes them (a closure's ints would be SymInts under dynamic=True,
    # which the decomposition leaves to torch: their signs are not known).
    fn = eval(f"lambda x: Fn.pad(x, {pad}, value={value}) * 2", {"Fn": Fn})
    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=keep, decompositions=fusec_decompositions())
    torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True)(x)
    used = set().union(*map(ops_of, graphs))
    assert "aten.constant_pad_nd.default" not in used and all(natively_imported(op) for op in used if "sym_size" not in op), used
    torch.testing.assert_close(torch.compile(fn, backend="fusec", dynamic=dynamic)(x), fn(x))
    if is_float:
        leaf = x.clone().requires_grad_()
        weight = torch.randn(fn(x).shape, generator=g)
        (torch.compile(fn, backend="fusec", dynamic=dynamic)(leaf) * weight).sum().backward()
        want = x.clone().requires_grad_()
        (fn(want) * weight).sum().backward()
        torch.testing.assert_close(leaf.grad, want.grad)
