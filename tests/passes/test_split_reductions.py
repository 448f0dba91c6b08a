"""split-reductions: few long rows -> partial reductions + a combining kernel; same results, one Triton run."""

import pytest
import torch

from fusec.base import remarks
from fusec.base.shapes import parse_expr, print_expr
from fusec.dialects import fusec as F
from fusec.passes.form_kernels import FormKernels
from fusec.passes.reduction_fusion import ReductionFusion
from fusec.passes.split_reductions import SplitReductions, size_range
from fusec.passes.vertical_fusion import VerticalFusion
from fusec.registry import PASSES
from fusec.runtime import compile_module, interpreter
from fusec.testing import (
    apply_passes,
    assert_same_results,
    graph_text,
    kernels,
    parse,
    print_ir,
    random_inputs,
    tensor_type,
    variance_graph,
)

TOL = dict(atol=1e-4, rtol=1e-4)  # the split sums in another order


def fused(text: str):
    """The graph after the fusion passes: what split-reductions sees in the default pipeline."""
    module = parse(text)
    apply_passes(module, FormKernels(), VerticalFusion(), ReductionFusion())
    return module


def split(text: str, sizes: list[dict[str, int]], inputs=None, tol=TOL, **options):
    """Split the fused graph (S = 128 unless ``splits`` says otherwise); the printed result parses back
    and gives the fused graph's results on random inputs for each binding in ``sizes`` (or on ``inputs``).
    Returns (module, remarks)."""
    options.setdefault("splits", 128)
    before = fused(text)
    after = parse(print_ir(before))
    with remarks.collect() as log:
        apply_passes(after, SplitReductions(**options))
    after = parse(print_ir(after))
    for i, env in enumerate(sizes):
        args = inputs(env) if inputs else random_inputs(before, env, seed=10 + i)
        assert_same_results(interpreter.run(before, args), interpreter.run(after, args), **tol)
    return after, [r for r in log.remarks if r.pass_name == "split-reductions"]


def domains(module) -> list[list[str]]:
    return [[print_expr(d) for d in k.domain_exprs] for k in kernels(module)]


def reduce_graph(kind: str, shape: str, prologue: str = "", dtype: str = "f32", symbols: str = "") -> str:
    """``kind`` over the last dim of %a (after an optional pointwise prologue ``fn`` of %a)."""
    rows, _, cols = shape.rpartition(", ")
    t = tensor_type(shape, dtype)
    out_dtype = "i64" if kind in ("argmax", "argmin") else "i1" if kind in ("any", "all") else dtype
    v = tensor_type(rows, out_dtype)
    dim = len(shape.split(", ")) - 1
    body = ""
    src = "%a"
    if prologue:
        body += f'    %p = fusec.pointwise "{prologue}" %a : ({t}) -> {t}\n'
        src = "%p"
    body += f'    %s = fusec.reduce "{kind}" {src} dims [{dim}] : {t} -> {v}\n    fusec.output %s : {v}'
    sym = f" symbols({symbols})" if symbols else ""
    return f"builtin.module {{\n  fusec.graph @g(%a : {t}) -> ({v}){sym} {{\n{body}\n  }}\n}}"


# ---------------------------------------------------------------- what is split, and the results


@pytest.mark.parametrize("n", [5000, 4099])
def test_full_sum_is_two_kernels(n):
    module, notes = split(reduce_graph("sum", f"{n}"), [{}])
    assert domains(module) == [["128", str(-(-n // 128))], ["1", "128"]]
    a, b = kernels(module)
    assert a.sym_name.data == b.sym_name.data + "_split"
    assert b.inputs[0] is a.outputs[0] and a.outputs[0].type == F.TensorType([128, 1], F.F32)  # split-major
    (note,) = notes  # the boundary it made, explained
    assert (note.code, note.subjects) == ("split", (f"@{a.sym_name.data}", f"@{b.sym_name.data}"))
    assert note.message == f"[1, {n}] -> [128, {-(-n // 128)}] partial rows, then [1, 128] combined"


def test_divisible_row_needs_no_mask():
    module, _ = split(reduce_graph("sum", "2, 8192"), [{}])
    a, _ = kernels(module)
    assert all(op.mask is None for op in a.block.ops if isinstance(op, F.LoadOp))
    assert not any(isinstance(op, F.SymbolicOp) for op in a.block.ops)


def test_mean_keeps_its_epilogue_after_the_combine():
    t, v, c = tensor_type("3, 4099"), tensor_type("3"), tensor_type("")
    module, _ = split(graph_text(f"%a : {t}", v, f"""
    %s = fusec.reduce "sum" %a dims [1] : {t} -> {v}
    %n = fusec.constant 4099.0 : {c}
    %m = fusec.pointwise "div" %s, %n : ({v}, {c}) -> {v}
    fusec.output %m : {v}""", symbolic=False), [{}])
    a, b = kernels(module)
    assert not any(isinstance(op, F.PointwiseOp) and op.fn.data == "div" for op in a.block.ops)
    assert any(isinstance(op, F.PointwiseOp) and op.fn.data == "div" for op in b.block.ops)


def test_fp16_partials_are_fp32():
    module, _ = split(reduce_graph("sum", "2, 5000", dtype="f16"), [{}], tol=dict(atol=2e-2, rtol=2e-3))
    a, b = kernels(module)
    assert a.outputs[0].type.element_type == F.F32 and b.outputs[0].type.element_type == F.F16


def signed_rows(env):
    """Rows of one sign, so that a padded 0 would win a max or min, or turn an all false; the last two
    rows' only extreme sits in their last, partial chunk."""
    gen = torch.Generator().manual_seed(3)
    x = torch.rand(4, 5000, generator=gen) + 0.5
    x[1], x[3] = -x[1], -x[3]
    x[2, 4998], x[3, 4999] = 9.0, 0.7
    return [x]


@pytest.mark.parametrize("kind,prologue", [("max", "neg"), ("min", "abs"), ("max", "abs"), ("min", "neg"),
                                           ("prod", "sigmoid"), ("any", "relu"), ("all", "relu"), ("sum", "exp")])
def test_every_combinable_reduction_matches(kind, prologue):
    module, notes = split(reduce_graph(kind, "4, 5000", prologue), [{}], inputs=signed_rows)
    assert len(kernels(module)) == 2 and [n.code for n in notes] == ["split"]
    (combine,) = [op for op in kernels(module)[1].block.ops if isinstance(op, F.ReduceROp)]
    assert combine.kind.data == kind


def test_integer_max_pads_with_the_lowest_integer():
    module, _ = split(reduce_graph("max", "2, 5000", "neg", dtype="i32"), [{}])
    a, _ = kernels(module)
    assert any(isinstance(op, F.ConstantOp) and op.value.data == -2**31 for op in a.block.ops)


@pytest.mark.parametrize("rows", ["1", "s1"])
def test_symbolic_row_proved_long_by_its_bound(rows):
    shape = "s0" if rows == "1" else "s1, s0"
    symbols = "s0 in [4096, inf]" + ("" if rows == "1" else ", s1 in [1, 8]")
    sizes = [{"s0": n, "s1": m} for n, m in [(4099, 3), (5000, 1), (8192, 8), (4096, 5)]]
    module, notes = split(reduce_graph("sum", shape, "exp", symbols=symbols), sizes)
    notes = [n for n in notes if n.code != "split"]
    assert domains(module)[0][1] == "floordiv(s0 + 127, 128)"
    assert not notes


def test_two_reductions_per_x_loads_and_an_epilogue():
    """var = E[x^2] - E[x]^2 (siblings), scaled per row before (prologue) and shifted per row after (epilogue)."""
    t, v, k = tensor_type("2, s0"), tensor_type("2"), tensor_type("2, 1")
    text = graph_text(f"%a : {t}, %w : {k}, %b : {v}", v, f"""
    %x = fusec.pointwise "mul" %a, %w : ({t}, {k}) -> {t}
    %s = fusec.reduce "sum" %x dims [1] : {t} -> {v}
    %sq = fusec.pointwise "mul" %x, %x : ({t}, {t}) -> {t}
    %ss = fusec.reduce "sum" %sq dims [1] : {t} -> {v}
    %m2 = fusec.pointwise "mul" %s, %s : ({v}, {v}) -> {v}
    %d = fusec.pointwise "sub" %ss, %m2 : ({v}, {v}) -> {v}
    %y = fusec.pointwise "add" %d, %b : ({v}, {v}) -> {v}
    fusec.output %y : {v}""").replace("s0 in [1, inf]", "s0 in [4096, 65536]")
    module, _ = split(text, [{"s0": 4099}, {"s0": 6000}], tol=dict(atol=1e-2, rtol=1e-4))
    a, b = kernels(module)
    assert len(a.outputs) == 2 and len(b.inputs) == 3  # two partial buffers and the epilogue's bias


def test_options_choose_split_count_and_thresholds():
    module, _ = split(reduce_graph("sum", "2, 5000"), [{}], splits=8)
    assert domains(module) == [["16", "625"], ["2", "8"]]
    module, notes = split(reduce_graph("sum", "2, 5000"), [{}], min_rnumel=8192)
    assert len(kernels(module)) == 1 and not notes
    module, notes = split(reduce_graph("sum", "2, 5000"), [{}], max_xnumel=1)
    assert len(kernels(module)) == 1 and not notes


def test_split_count_must_be_a_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        SplitReductions(splits=100)


def test_registered():
    assert PASSES["split-reductions"]() is SplitReductions


# ---------------------------------------------------------------- declined


def declined(text: str, sizes=({},), **options) -> str:
    module, notes = split(text, list(sizes), **options)
    assert len(kernels(module)) == 1
    (note,) = notes
    assert note.code == "split-declined"
    return note.message


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions_are_declined(kind):
    assert declined(reduce_graph(kind, "2, 8192")).startswith(f"{kind}: @")


def logsumexp(rows: str = "2", cols: str = "8192", symbols: str = "") -> str:
    t, k = tensor_type(f"{rows}, {cols}"), tensor_type(f"{rows}, 1")
    text = graph_text(f"%x : {t}", k, f"""
    %m = fusec.reduce "max" %x dims [1] keepdim : {t} -> {k}
    %d = fusec.pointwise "sub" %x, %m : ({t}, {k}) -> {t}
    %e = fusec.pointwise "exp" %d : ({t}) -> {t}
    %s = fusec.reduce "sum" %e dims [1] keepdim : {t} -> {k}
    %l = fusec.pointwise "log" %s : ({k}) -> {k}
    %y = fusec.pointwise "add" %l, %m : ({k}, {k}) -> {k}
    fusec.output %y : {k}""", symbolic=bool(symbols))
    return text.replace("s0 in [1, inf]", symbols) if symbols else text


def test_softmax_like_phases_are_declined_without_split_phases():
    assert declined(logsumexp(), split_phases=False).startswith("dependent reductions: ")


@pytest.mark.parametrize("cols,symbols,sizes", [("8192", "", [{}]), ("5001", "", [{}]),
                                                ("s0", "s0 in [4096, inf]", [{"s0": 4099}, {"s0": 6000}])])
def test_dependent_phases_become_a_kernel_each_and_split(cols, symbols, sizes):
    # logsumexp: the max (phase 1), handed to phase 2 as a per-row buffer; each phase split in two; the
    # result as the interpreter computes the unsplit kernel (split() checks), masked last chunks included.
    module, notes = split(logsumexp(cols=cols, symbols=symbols), sizes)
    a1, b1, a2, b2 = kernels(module)
    assert [k.sym_name.data for k in (a1, b1, a2)] == [b2.sym_name.data + s for s in ("_phase1_split", "_phase1", "_split")]
    assert b1.outputs[0].type == F.TensorType([2], F.F32) and b1.outputs[0] in a2.inputs  # the max, per row
    assert [n.code for n in notes] == ["split-phases", "split", "split"]
    assert notes[0].data["phases"] == 2


@pytest.mark.parametrize("shape,dim,symbols,sizes", [
    ("4096, 64", 0, "", [{}]),  # channels-last batch norm: column sums
    ("4999, 64", 0, "", [{}]),  # the last chunk short, and 7 of 128 chunks empty
    ("2, 8192", 1, "", [{}]),  # rows
    ("2, 5001", 1, "", [{}]),
    ("2, s0", 1, "s0 in [4096, inf]", [{"s0": 4099}, {"s0": 6000}]),
])
def test_a_variance_after_its_mean_splits_as_chunk_moments_in_two_kernels(shape, dim, symbols, sizes):
    # Chunk sums and centered squares in A, Chan's combination in B: the interpreter's results of the unsplit
    # kernel (split() checks), masked and empty last chunks included.
    module, notes = split(variance_graph(shape, dim, symbols), sizes)
    a, b = kernels(module)
    assert a.sym_name.data == b.sym_name.data + "_split" and len(a.outputs) == 2 and a.outputs[1] in b.inputs
    assert a.is_outer_reduction == (dim == 0)
    assert [n.code for n in notes] == ["split-moments", "split"]


def test_chunk_moments_keep_a_variance_far_from_zero_mean_exact():
    # Values around 1e4 with unit spread in fp32: sum(v^2) - n*mean^2 would lose every digit (1e8 * 4096 in
    # fp32); chunk-local centering keeps the variance within fp32 rounding of the float64 answer.
    gen = torch.Generator().manual_seed(3)
    x = (1e4 + torch.randn(4999, 64, generator=gen, dtype=torch.float64)).float()
    module, _ = split(variance_graph("4999, 64", 0, n="4999.0"), [{}], inputs=lambda env: [x])
    mean, var = interpreter.run(module, [x])
    expected = x.double().var(0, correction=0, keepdim=True)
    torch.testing.assert_close(var.double(), expected, rtol=1e-4, atol=0)
    torch.testing.assert_close(mean.double(), x.double().mean(0, keepdim=True), rtol=1e-6, atol=0)


def test_a_variance_splits_phase_by_phase_without_moments():
    module, notes = split(variance_graph("4096, 64", 0), [{}], splits=8, moments=False)
    assert len(kernels(module)) == 4 and all(k.is_outer_reduction for k in kernels(module)[::2])
    assert [n.code for n in notes] == ["split-phases", "split", "split"]


def test_squares_around_a_value_from_another_row_are_not_moments():
    # sum((x - max)^2) is still a sum of squares around a per-row value: moments apply (Chan's identity holds for
    # any m); sum((x - m) * x) is not, and splits phase by phase.
    t, k = tensor_type("2, 8192"), tensor_type("2, 1")
    module, notes = split(graph_text(f"%x : {t}", k, f"""
    %s = fusec.reduce "max" %x dims [1] keepdim : {t} -> {k}
    %d = fusec.pointwise "sub" %x, %s : ({t}, {k}) -> {t}
    %q = fusec.pointwise "mul" %d, %x : ({t}, {t}) -> {t}
    %v = fusec.reduce "sum" %q dims [1] keepdim : {t} -> {k}
    fusec.output %v : {k}""", symbolic=False), [{}])
    assert [n.code for n in notes] == ["split-phases", "split", "split"]
    module, notes = split(graph_text(f"%x : {t}", k, f"""
    %s = fusec.reduce "max" %x dims [1] keepdim : {t} -> {k}
    %d = fusec.pointwise "sub" %x, %s : ({t}, {k}) -> {t}
    %q = fusec.pointwise "mul" %d, %d : ({t}, {t}) -> {t}
    %v = fusec.reduce "sum" %q dims [1] keepdim : {t} -> {k}
    fusec.output %v : {k}""", symbolic=False), [{}], tol=dict(atol=1e-2, rtol=1e-4))
    assert [n.code for n in notes] == ["split-moments", "split"] and len(kernels(module)) == 2


def test_per_element_store_of_a_reduced_value_is_declined():
    # Rows too short for reduction-fusion to keep the epilogue out (split-worthy at the default min-rnumel)
    # but long enough for this split's min-rnumel: the fused kernel stores x - sum per element.
    t, k = tensor_type("2, 2048"), tensor_type("2, 1")
    message = declined(graph_text(f"%x : {t}", t, f"""
    %s = fusec.reduce "sum" %x dims [1] keepdim : {t} -> {k}
    %y = fusec.pointwise "sub" %x, %s : ({t}, {k}) -> {t}
    fusec.output %y : {t}""", symbolic=False), min_rnumel=1024)
    assert message.startswith("dependent store: ")


def test_a_split_worthy_reduction_keeps_its_per_element_epilogue_out_and_splits():
    # reduction-fusion leaves x - sum out of a sum over few long rows (split-worthy), so the sum splits.
    t, k = tensor_type("2, 8192"), tensor_type("2, 1")
    module, notes = split(graph_text(f"%x : {t}", t, f"""
    %s = fusec.reduce "sum" %x dims [1] keepdim : {t} -> {k}
    %y = fusec.pointwise "sub" %x, %s : ({t}, {k}) -> {t}
    fusec.output %y : {t}""", symbolic=False), [{}])
    assert len(kernels(module)) == 3 and [n.code for n in notes] == ["split"]


@pytest.mark.parametrize("shape,symbols,what", [("s0", "s0 in [2, inf]", "rnumel s0, as small as 2"),
                                                ("s0, 8192", "s0 in [1, inf]", "xnumel s0, as large as inf")])
def test_unproven_symbolic_sizes_are_declined(shape, symbols, what):
    message = declined(reduce_graph("sum", shape, symbols=symbols), [{"s0": 3}, {"s0": 5}])
    assert message.startswith("unproven size: ") and what in message


def test_provably_small_kernels_are_left_silently():
    for text in [reduce_graph("sum", "128, 8192"), reduce_graph("argmax", "s0, 512", symbols="s0 in [1, inf]"),
                 reduce_graph("sum", "2, s0", symbols="s0 in [1, 4095]")]:
        module, notes = split(text, [{"s0": 7}])
        assert len(kernels(module)) == 1 and not notes


def test_size_range_uses_declared_bounds():
    bounds = {"s0": (4096, float("inf")), "s1": (2, 8)}
    assert size_range(parse_expr("s0*s1"), bounds) == (8192, float("inf"))
    assert size_range(parse_expr("floordiv(s0 + 127, 128)"), bounds) == (32, float("inf"))
    assert size_range(parse_expr("s1 - 1"), bounds) == (1, 7)
    assert size_range(parse_expr("3*s1"), bounds) == (6, 24)


# ---------------------------------------------------------------- Triton, under its interpreter


def test_split_graph_runs_through_triton():
    """A mean over rows of s0, S=8: the launcher allocates the partials like any kernel output."""
    t, v, c = tensor_type("2, s0"), tensor_type("2"), tensor_type("")
    text = graph_text(f"%a : {t}", v, f"""
    %s = fusec.reduce "sum" %a dims [1] : {t} -> {v}
    %n = fusec.constant 3.0 : {c}
    %m = fusec.pointwise "div" %s, %n : ({v}, {c}) -> {v}
    fusec.output %m : {v}""").replace("s0 in [1, inf]", "s0 in [4096, 8192]")
    module, _ = split(text, [{"s0": 5000}], splits=8)
    compiled = compile_module(module, {"s0": 5000})
    assert [k.name for k in compiled.kernels] == ["fusec_per_sum_div_1_split", "fusec_per_sum_div_1"]
    for n in (5000, 4099):
        (a,) = random_inputs(module, {"s0": n}, seed=n)
        assert_same_results([a.sum(1) / 3], compiled([a]), **TOL)


# ---------------------------------------------------------------- choosing S, column reductions


@pytest.mark.parametrize("length, splits", [(1 << 24, 1024), (1 << 20, 512), (5000, 2)])
def test_split_count_from_the_sizes(length, splits):
    """About a thousand programs, chunks of at least 2048 elements: 16M -> 1024 x 16384, 1M -> 512 x 2048."""
    module = fused(reduce_graph("sum", f"{length}"))
    with remarks.collect() as log:
        apply_passes(module, SplitReductions())
    (note,) = [r for r in log.remarks if r.code == "split"]
    assert note.data["splits"] == splits
    assert domains(module)[0] == [str(splits), str(-(-length // splits))]


def test_column_reduction_is_split_with_coalesced_partial_loads():
    """x.sum(0) over [8192, 2048]: 32 programs of 64 columns unsplit; S = 64 gives 2048, chunks of 128 rows."""
    text = """builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[s1, s0], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, 2048], s1 in [8192, inf]) {
    %s = fusec.reduce "sum" %a dims [0] : !fusec.tensor<[s1, s0], f32> -> !fusec.tensor<[s0], f32>
    fusec.output %s : !fusec.tensor<[s0], f32>
  }
}"""
    assert kernels(fused(text))[0].is_outer_reduction
    module, notes = split(text, [{"s0": 33, "s1": 8195}, {"s0": 1, "s1": 8192}], splits=0)
    (note,) = notes
    assert note.data["splits"] == 64
    a, b = kernels(module)
    assert a.is_outer_reduction  # A's neighbouring x are neighbouring columns: loads coalesced along x
    assert domains(module) == [["64*s0", "floordiv(s1 + 63, 64)"], ["s0", "64"]]


# ---------------------------------------------------------------- per-(x, r) stores, column thresholds


def bias_gradient_graph(rows: str, cols: str, dtype: str = "f32", symbols: str = "") -> str:
    """A gradient g * tanh'(x) handed on per (x, r) and its column sum (a bias gradient): one kernel after fusion."""
    t, v = tensor_type(f"{rows}, {cols}", dtype), tensor_type(cols, dtype)
    sym = f" symbols({symbols})" if symbols else ""
    return f"""builtin.module {{
  fusec.graph @g(%x : {t}, %g : {t}) -> ({t}, {v}){sym} {{
    %y = fusec.pointwise "tanh" %x : ({t}) -> {t}
    %y2 = fusec.pointwise "mul" %y, %y : ({t}, {t}) -> {t}
    %d = fusec.pointwise "sub" %g, %y2 : ({t}, {t}) -> {t}
    %db = fusec.reduce "sum" %d dims [0] : {t} -> {v}
    fusec.output %d, %db : {t}, {v}
  }}
}}"""


@pytest.mark.parametrize("rows, splits", [(1024, 16), (1000, 16), (600, 16)])
def test_column_sum_that_also_stores_per_element_is_split(rows, splits):
    """[rows, 768]: 12 programs of 64 columns unsplit. A stores the per-(x, r) gradient at the substituted
    row (masked past the last row when the chunks overrun it) and the partials; B combines them.  Chunks of 64
    rows or more, but where those leave fewer than 128 programs (1000 and 600 rows: 8 chunks, 96 programs) as
    many as keep 32 rows a chunk until every SM has a program (16)."""
    module, notes = split(bias_gradient_graph(str(rows), "768"), [{}], splits=0)
    (note,) = notes
    assert note.data["splits"] == splits
    a, b = kernels(module)
    assert a.is_outer_reduction and len(a.outputs) == 2 and len(b.outputs) == 1
    graph_outputs = module.body.block.ops.first.body.block.last_op.operands
    assert graph_outputs[0].owner is a and graph_outputs[1].owner is b


@pytest.mark.parametrize("rows, cols, splits", [(512, 256, 16), (3152, 192, 64)])
def test_narrow_column_sum_chunks_shrink_for_programs(rows, cols, splits):
    """[512, 256]: 4 programs of 64 columns; chunks of 64 rows give 32 programs, of 32 rows 64: not 128, but a chunk
    is never shorter than 32 rows (MIN_CHUNK_FEW).  [3152, 192] (ViT's layer-norm gradients): 32 chunks of 99 rows
    would be 96 programs, 64 of 50 rows are 192."""
    module, notes = split(bias_gradient_graph(str(rows), str(cols)), [{}], splits=0)
    (note,) = notes
    assert note.data["splits"] == splits


def test_column_sum_with_per_element_store_runs_through_triton():
    text = bias_gradient_graph("s0", "96", symbols="s0 in [512, inf]")
    module, _ = split(text, [{"s0": 700}], splits=0)
    compiled = compile_module(module, {"s0": 700})
    assert len(kernels(module)) == 2  # (the combine over a symbolic count of chunks also compiles a persistent form)
    for n in (700, 513):
        x, g = random_inputs(module, {"s0": n}, seed=n)
        d = g - torch.tanh(x) ** 2
        assert_same_results([d, d.sum(0)], compiled([x, g]), **TOL)


def test_short_or_wide_column_sums_are_left_alone():
    for rows, cols in [("256", "768"), ("1024", "16384")]:  # under min-outer-rnumel; over max-outer-xnumel
        module, notes = split(bias_gradient_graph(rows, cols), [], splits=0)
        assert len(kernels(module)) == 1 and not notes
    module, notes = split(bias_gradient_graph("256", "768"), [], splits=0, min_outer_rnumel=256)
    assert len(kernels(module)) == 2


def test_one_buffer_stored_per_element_and_per_x_is_declined():
    """A kernel that writes its column sums into row 0 of the per-element buffer as well cannot give that
    buffer to A alone; written directly at the kernel level."""
    text = """builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[1024, 64], f32>) -> (!fusec.tensor<[1025, 64], f32>) {
    %y = fusec.kernel @mixed [64, 1024] (%a) : (!fusec.tensor<[1024, 64], f32>) -> (!fusec.tensor<[1025, 64], f32>) {
    ^bb0(%in : !fusec.tensor<[1024, 64], f32>, %out : !fusec.tensor<[1025, 64], f32>):
      %v = fusec.load %in[64*r + x] : !fusec.tensor<[1024, 64], f32>
      %s = fusec.reduce_r "sum" %v : f32 -> f32
      fusec.store %v, %out[64*r + x + 64] : !fusec.tensor<[1025, 64], f32>
      fusec.store %s, %out[x] : !fusec.tensor<[1025, 64], f32>
    }
    fusec.output %y : !fusec.tensor<[1025, 64], f32>
  }
}"""
    module = parse(text)
    with remarks.collect() as log:
        apply_passes(module, SplitReductions())
    (note,) = [r for r in log.remarks if r.pass_name == "split-reductions"]
    assert note.message.startswith("mixed store: ")


@pytest.mark.parametrize("hint, split_made", [(16, True), (2, False)])
def test_a_symbolic_column_sum_is_split_for_the_sizes_it_was_traced_with(hint, split_made):
    """A ViT's MLP bias gradient under dynamic=True: [197*s0, 768] with s0 (the batch) >= 2 is not provably
    worth splitting at every size, but the graph was traced at s0 = 16 (3152 rows): split there, and the
    split is correct at every size; traced at s0 = 2 (394 rows), it is not worth it."""
    text = bias_gradient_graph("197*s0", "768", symbols=f"s0 in [2, inf] hint {hint}")
    module, notes = split(text, [{"s0": 2}, {"s0": 5}], splits=0)
    assert f"hint {hint}" in print_ir(module)  # the example size round-trips with the IR
    if split_made:
        assert [n.code for n in notes] == ["split-on-example", "split"]
        assert "[768, 3152] at the sizes the graph was traced with" in notes[0].message
        assert notes[1].data["splits"] == 32 and len(kernels(module)) == 2
    else:
        assert [n.code for n in notes] == ["split-declined"] and notes[0].message.startswith("unproven size: ")
        assert len(kernels(module)) == 1


def layer_norm_weight_gradient_graph(rows: str, cols: str, symbols: str = "") -> str:
    """dW = sum over rows of g * (x - mean_row) and dB = sum of g: column sums whose kernel also reads a
    per-row statistic (the same value for every column)."""
    t, v, m = tensor_type(f"{rows}, {cols}"), tensor_type(cols), tensor_type(f"{rows}, 1")
    sym = f" symbols({symbols})" if symbols else ""
    return f"""builtin.module {{
  fusec.graph @g(%g : {t}, %x : {t}, %mean : {m}) -> ({v}, {v}){sym} {{
    %c = fusec.pointwise "sub" %x, %mean : ({t}, {m}) -> {t}
    %p = fusec.pointwise "mul" %g, %c : ({t}, {t}) -> {t}
    %dw = fusec.reduce "sum" %p dims [0] : {t} -> {v}
    %db = fusec.reduce "sum" %g dims [0] : {t} -> {v}
    fusec.output %dw, %db : {v}, {v}
  }}
}}"""


def assert_split_as_column_sum(text: str, eager) -> None:
    """The fused kernel of ``text`` (symbol s0 >= 512) is a column reduction, split in two kernels that give
    ``eager(*inputs)`` at two sizes."""
    (kernel,) = kernels(fused(text))
    assert kernel.is_outer_reduction
    module, notes = split(text, [{"s0": 700}, {"s0": 513}], splits=0)
    assert [n.code for n in notes] == ["split"] and len(kernels(module)) == 2
    compiled = compile_module(module, {"s0": 700})
    for n in (700, 1031):
        inputs = random_inputs(module, {"s0": n}, seed=n)
        assert_same_results(eager(*inputs), compiled(inputs), **TOL)


def test_a_column_sum_that_reads_a_per_row_statistic_is_a_column_reduction():
    """ViT's LayerNorm weight gradient, [192, 3152] (x = columns): its per-row mean moves with r only, which
    says nothing of the layout; it was taken for a row reduction (too short to split) and ran as 3 programs."""
    assert_split_as_column_sum(layer_norm_weight_gradient_graph("s0", "96", symbols="s0 in [512, inf]"),
                               lambda g, x, mean: [(g * (x - mean)).sum(0), g.sum(0)])


def test_a_row_read_reduction_that_stores_its_input_transposed_is_a_column_reduction():
    """ViT's attention bias gradient: its input comes transposed from a bmm ([96, rows], read along r), and the
    kernel also stores the value in [rows, 96] layout (at ``96*r + x``) for the next matmul.  Rows of whole r
    gave one column a program and stored one lane per row; as a column reduction the store coalesces."""
    t, tt, v = tensor_type("s0, 96"), tensor_type("96, s0"), tensor_type("96")
    text = f"""builtin.module {{
  fusec.graph @g(%gt : {tt}) -> ({v}, {t}) symbols(s0 in [512, inf]) {{
    %p = fusec.permute %gt [1, 0] : {tt} -> !fusec.tensor<[s0, 96], f32, strides [1, s0]>
    %n = fusec.pointwise "neg" %p : (!fusec.tensor<[s0, 96], f32, strides [1, s0]>) -> {t}
    %db = fusec.reduce "sum" %n dims [0] : {t} -> {v}
    fusec.output %db, %n : {v}, {t}
  }}
}}"""
    assert_split_as_column_sum(text, lambda gt: [-gt.t().sum(0), -gt.t()])
