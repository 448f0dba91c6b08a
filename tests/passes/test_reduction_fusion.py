"""reduction-fusion: graph IR -> form-kernels -> vertical-fusion -> reduction-fusion; counts, remarks, equivalence."""

import pytest

from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.passes.expect_fused import ExpectFused, ExpectFusedError
from fusec.passes.form_kernels import FormKernels
from fusec.passes.reduction_fusion import ReductionFusion
from fusec.passes.vertical_fusion import VerticalFusion
from fusec.testing import apply_passes, graph_text, kernels, parse, print_ir, run_passes_checked, tensor_type


def fuse(text: str, sizes=(1, 5, 17), **options):
    """Run the three passes (checked by ``run_passes_checked``); return (module, reduction-fusion remarks)."""
    module, notes = run_passes_checked(text, FormKernels(), VerticalFusion(), ReductionFusion(**options), sizes=sizes)
    return module, [r for r in notes if r.pass_name == "reduction-fusion"]


def ops_named(kernel: F.KernelOp, cls) -> int:
    return sum(isinstance(op, cls) for op in kernel.block.ops)


def softmax(rows: str, cols: int = 32) -> str:
    t, k = tensor_type(f"{rows}, {cols}"), tensor_type(f"{rows}, 1")
    return graph_text(f"%x : {t}", t, f"""
    %m = fusec.reduce "max" %x dims [1] keepdim : {t} -> {k}
    %d = fusec.pointwise "sub" %x, %m : ({t}, {k}) -> {t}
    %e = fusec.pointwise "exp" %d : ({t}) -> {t}
    %s = fusec.reduce "sum" %e dims [1] keepdim : {t} -> {k}
    %y = fusec.pointwise "div" %e, %s : ({t}, {k}) -> {t}
    fusec.output %y : {t}""", symbolic=rows == "s0")


@pytest.mark.parametrize("rows", ["s0", "6"])
def test_softmax_is_one_kernel_reading_x_once(rows):
    module, notes = fuse(softmax(rows))
    (k,) = kernels(module)
    assert k.sym_name.data == "fusec_red_max_sub_exp_sum_div_4"
    assert ops_named(k, F.LoadOp) == 1 and ops_named(k, F.ReduceROp) == 2
    (store,) = [op for op in k.block.ops if isinstance(op, F.StoreOp)]
    assert str(store.index.data) == "r + 32*x"  # the epilogue stores per (x, r)
    assert not notes


def test_rmsnorm_is_one_kernel():
    t, k, v, c = tensor_type("s0, 64"), tensor_type("s0, 1"), tensor_type("64"), tensor_type("")
    module, _ = fuse(graph_text(f"%x : {t}, %w : {v}", t, f"""
    %sq = fusec.pointwise "mul" %x, %x : ({t}, {t}) -> {t}
    %s = fusec.reduce "sum" %sq dims [1] keepdim : {t} -> {k}
    %n = fusec.constant 64.0 : {c}
    %ms = fusec.pointwise "div" %s, %n : ({k}, {c}) -> {k}
    %eps = fusec.constant 0.001 : {c}
    %a = fusec.pointwise "add" %ms, %eps : ({k}, {c}) -> {k}
    %r = fusec.pointwise "rsqrt" %a : ({k}) -> {k}
    %y = fusec.pointwise "mul" %x, %r : ({t}, {k}) -> {t}
    %z = fusec.pointwise "mul" %y, %w : ({t}, {v}) -> {t}
    fusec.output %z : {t}"""))
    (kernel,) = kernels(module)
    assert ops_named(kernel, F.LoadOp) == 2  # x and w


def test_layer_norm_and_gelu_are_one_kernel():
    t, k, v, c = tensor_type("s0, 16"), tensor_type("s0, 1"), tensor_type("16"), tensor_type("")
    module, _ = fuse(graph_text(f"%x : {t}, %w : {v}, %b : {v}", t, f"""
    %s = fusec.reduce "sum" %x dims [1] keepdim : {t} -> {k}
    %n = fusec.constant 16.0 : {c}
    %mean = fusec.pointwise "div" %s, %n : ({k}, {c}) -> {k}
    %xc = fusec.pointwise "sub" %x, %mean : ({t}, {k}) -> {t}
    %sq = fusec.pointwise "mul" %xc, %xc : ({t}, {t}) -> {t}
    %ss = fusec.reduce "sum" %sq dims [1] keepdim : {t} -> {k}
    %var = fusec.pointwise "div" %ss, %n : ({k}, {c}) -> {k}
    %eps = fusec.constant 0.001 : {c}
    %ve = fusec.pointwise "add" %var, %eps : ({k}, {c}) -> {k}
    %rstd = fusec.pointwise "rsqrt" %ve : ({k}) -> {k}
    %xn = fusec.pointwise "mul" %xc, %rstd : ({t}, {k}) -> {t}
    %xw = fusec.pointwise "mul" %xn, %w : ({t}, {v}) -> {t}
    %y = fusec.pointwise "add" %xw, %b : ({t}, {v}) -> {t}
    %half = fusec.constant 0.5 : {c}
    %isq = fusec.constant 0.7071067811865476 : {c}
    %one = fusec.constant 1.0 : {c}
    %g1 = fusec.pointwise "mul" %y, %isq : ({t}, {c}) -> {t}
    %g2 = fusec.pointwise "erf" %g1 : ({t}) -> {t}
    %g3 = fusec.pointwise "add" %g2, %one : ({t}, {c}) -> {t}
    %g4 = fusec.pointwise "mul" %y, %half : ({t}, {c}) -> {t}
    %g = fusec.pointwise "mul" %g4, %g3 : ({t}, {t}) -> {t}
    fusec.output %g : {t}"""))
    (kernel,) = kernels(module)
    assert ops_named(kernel, F.LoadOp) == 3 and ops_named(kernel, F.ReduceROp) == 2
    assert len(kernel.outputs) == 1  # mean, rstd and the centred x stay in registers


def test_var_mean_siblings_share_one_read():
    t, r, c = tensor_type("s0, 32"), tensor_type("s0"), tensor_type("")
    module, _ = fuse(graph_text(f"%x : {t}", f"{r}, {r}", f"""
    %s = fusec.reduce "sum" %x dims [1] : {t} -> {r}
    %sq = fusec.pointwise "mul" %x, %x : ({t}, {t}) -> {t}
    %ss = fusec.reduce "sum" %sq dims [1] : {t} -> {r}
    %n = fusec.constant 32.0 : {c}
    %mean = fusec.pointwise "div" %s, %n : ({r}, {c}) -> {r}
    %m2 = fusec.pointwise "div" %ss, %n : ({r}, {c}) -> {r}
    %mm = fusec.pointwise "mul" %mean, %mean : ({r}, {r}) -> {r}
    %var = fusec.pointwise "sub" %m2, %mm : ({r}, {r}) -> {r}
    fusec.output %var, %mean : {r}, {r}"""))
    (k,) = kernels(module)
    assert ops_named(k, F.LoadOp) == 1 and len(k.outputs) == 2
    module, _ = fuse(graph_text(f"%x : {t}", f"{r}, {r}", f"""
    %s = fusec.reduce "sum" %x dims [1] : {t} -> {r}
    %m = fusec.reduce "max" %x dims [1] : {t} -> {r}
    fusec.output %s, %m : {r}, {r}"""), siblings=False)
    assert len(kernels(module)) == 2


def test_cross_entropy_per_row_is_one_kernel():
    t, k, i = tensor_type("s0, 10"), tensor_type("s0, 1"), tensor_type("s0, 1", "i64")
    module, _ = fuse(graph_text(f"%x : {t}, %t : {i}", k, f"""
    %m = fusec.reduce "max" %x dims [1] keepdim : {t} -> {k}
    %d = fusec.pointwise "sub" %x, %m : ({t}, {k}) -> {t}
    %e = fusec.pointwise "exp" %d : ({t}) -> {t}
    %s = fusec.reduce "sum" %e dims [1] keepdim : {t} -> {k}
    %l = fusec.pointwise "log" %s : ({k}) -> {k}
    %lse = fusec.pointwise "add" %l, %m : ({k}, {k}) -> {k}
    %g = fusec.gather %x[%t] dim 1 : {t}, {i} -> {k}
    %loss = fusec.pointwise "sub" %lse, %g : ({k}, {k}) -> {k}
    fusec.output %loss : {k}"""))
    (kernel,) = kernels(module)
    gathered = [op for op in kernel.block.ops if isinstance(op, F.LoadOp) and op.offset is not None]
    assert len(gathered) == 1 and str(gathered[0].index.data) == "10*x"  # the target's logit, once per row


def test_first_and_middle_dim_reductions_take_their_epilogues():
    a, sa = tensor_type("s0, 8"), tensor_type("1, 8")
    b, sb = tensor_type("4, s0, 6"), tensor_type("4, 1, 6")
    module, _ = fuse(graph_text(f"%x : {a}, %y : {b}", f"{a}, {b}", f"""
    %s = fusec.reduce "sum" %x dims [0] keepdim : {a} -> {sa}
    %d = fusec.pointwise "div" %x, %s : ({a}, {sa}) -> {a}
    %m = fusec.reduce "max" %y dims [1] keepdim : {b} -> {sb}
    %e = fusec.pointwise "sub" %y, %m : ({b}, {sb}) -> {b}
    fusec.output %d, %e : {a}, {b}"""))
    first, middle = kernels(module)
    assert [str(d) for d in first.domain_exprs] == ["8", "s0"]
    assert "fusec.store %4, %1[8*r + x]" in print_ir(first)  # the epilogue's x became x + 8*r
    assert [str(d) for d in middle.domain_exprs] == ["24", "s0"] and len(middle.outputs) == 1


def test_outer_sum_of_a_reduction_is_declined():
    t, r, col, row = tensor_type("s0, s0"), tensor_type("s0"), tensor_type("s0, 1"), tensor_type("1, s0")
    module, notes = fuse(graph_text(f"%x : {t}", t, f"""
    %s = fusec.reduce "sum" %x dims [1] : {t} -> {r}
    %a = fusec.reshape %s : {r} -> {col}
    %b = fusec.reshape %s : {r} -> {row}
    %o = fusec.pointwise "add" %a, %b : ({col}, {row}) -> {t}
    fusec.output %o : {t}"""))
    assert len(kernels(module)) == 2
    (note,) = notes
    assert note.code == "index-mismatch"
    assert "reads [floordiv(x, s0), mod(x, s0)]" in note.message and "stores at [x]" in note.message


def test_per_row_epilogues_merge_and_other_domains_stay():
    t, r = tensor_type("s0, 8"), tensor_type("s0")
    module, notes = fuse(graph_text(f"%x : {t}", f"{r}, {r}, {tensor_type('8')}", f"""
    %s = fusec.reduce "sum" %x dims [1] : {t} -> {r}
    %e = fusec.pointwise "exp" %s : ({r}) -> {r}
    %d = fusec.reduce "max" %x dims [0] : {t} -> {tensor_type("8")}
    %u = fusec.pointwise "add" %s, %s : ({r}, {r}) -> {r}
    fusec.output %e, %u, %d : {r}, {r}, {tensor_type("8")}"""))
    column, row = sorted(kernels(module), key=lambda k: str(k.domain_exprs[0]))
    assert len(row.outputs) == 2 and [str(d) for d in column.domain_exprs] == ["8", "s0"]
    assert not notes  # the column max is no candidate: different rows, and no data flows between them


def test_dependence_through_an_extern_is_declined():
    t, r = tensor_type("s0, 8"), tensor_type("s0")
    module, notes = fuse(graph_text(f"%x : {t}", r, f"""
    %s = fusec.reduce "sum" %x dims [1] : {t} -> {r}
    %c:1 = fusec.extern "aten.cumsum.default"(%s, 0) : ({r}) -> ({r})
    %u = fusec.pointwise "add" %s, %c : ({r}, {r}) -> {r}
    fusec.output %u : {r}"""))
    assert len(kernels(module)) == 2
    assert sorted(n.code for n in notes) == ["dependence-cycle", "extern-consumer"]


def test_reduction_over_rows_after_a_row_reduction_stays_apart():
    t, k, c = tensor_type("s0, 10"), tensor_type("s0, 1"), tensor_type("")
    module, notes = fuse(graph_text(f"%x : {t}", c, f"""
    %m = fusec.reduce "max" %x dims [1] keepdim : {t} -> {k}
    %l = fusec.pointwise "exp" %m : ({k}) -> {k}
    %tot = fusec.reduce "sum" %l dims [0, 1] : {k} -> {c}
    fusec.output %tot : {c}"""))
    assert len(kernels(module)) == 2
    assert [(n.code, n.message) for n in notes] == [("domain-mismatch", "[s0, 10] vs [1, s0]")]


def test_limit_declines_with_the_numbers():
    module, notes = fuse(softmax("s0"), max_ops=5)
    assert len(kernels(module)) > 1
    limits = [n for n in notes if n.code == "limit"]
    assert limits and all(n.message.startswith("max-ops=5 exceeded") for n in limits)
    # the epilogue recomputes exp(x - max) (vertical-fusion), so it also depends on the max through the sum
    assert {n.code for n in notes} <= {"limit", "dependence-cycle"}


def test_expect_fused_reports_the_remarks():
    module = parse(softmax("s0"))
    apply_passes(module, FormKernels(), VerticalFusion(), ReductionFusion(), ExpectFused(max_kernels=1))
    module = parse(softmax("s0"))
    with remarks.collect(), pytest.raises(ExpectFusedError) as failure:
        apply_passes(module, FormKernels(), VerticalFusion(), ReductionFusion(max_ops=5), ExpectFused(max_kernels=1))
    message = str(failure.value)
    assert "expected at most 1 kernel launch, found 3" in message
    assert "remark: reduction-fusion: limit: max-ops=5 exceeded" in message


def test_a_scalar_epilogue_fuses_into_a_full_reduction():
    """mean(x) over all of x: the division of the one-element sum joins the reduction (issue 12.4)."""
    t, c, n = tensor_type("s0, 32"), tensor_type(""), tensor_type("", "i64")
    module, notes = fuse(graph_text(f"%x : {t}", c, f"""
    %s = fusec.reduce "sum" %x dims [0, 1] : {t} -> {c}
    %n = fusec.symbolic 32*s0 : {n}
    %m = fusec.pointwise "div" %s, %n : ({c}, {n}) -> {c}
    fusec.output %m : {c}"""))
    (k,) = kernels(module)
    assert k.sym_name.data.startswith("fusec_red_sum_div_") and ops_named(k, F.ReduceROp) == 1
    assert not notes


def test_a_per_element_epilogue_of_a_full_reduction_stays_parallel():
    """x - sum(x): joining would run every element in the reduction's one program; a remark says so."""
    t, c = tensor_type("s0, 32"), tensor_type("")
    module, notes = fuse(graph_text(f"%x : {t}", t, f"""
    %s = fusec.reduce "sum" %x dims [0, 1] : {t} -> {c}
    %y = fusec.pointwise "sub" %x, %s : ({t}, {c}) -> {t}
    fusec.output %y : {t}"""))
    assert len(kernels(module)) == 2
    assert [r.code for r in notes] == ["serial-epilogue"]
    assert "[32*s0] would run in the one program of" in notes[0].message


def test_a_scalar_read_by_a_longer_reduction_declines():
    """sum(x) read by a reduction over other rows: not K's domain, and a remark says so."""
    t, c, u, k1 = tensor_type("s0, 32"), tensor_type(""), tensor_type("s0, 16"), tensor_type("s0, 1")
    module, notes = fuse(graph_text(f"%x : {t}, %y : {u}", k1, f"""
    %s = fusec.reduce "sum" %x dims [0, 1] : {t} -> {c}
    %d = fusec.pointwise "mul" %y, %s : ({u}, {c}) -> {u}
    %r = fusec.reduce "sum" %d dims [1] keepdim : {u} -> {k1}
    fusec.output %r : {k1}"""))
    assert len(kernels(module)) == 2
    assert [r.code for r in notes] == ["domain-mismatch"]
