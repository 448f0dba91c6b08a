"""The generated launcher: symbol binding, input checks and layouts, allocation, views, externs."""

import pytest
import torch
from kernel_cases import compile_text, kernel_module, randn

from fusec.analysis.bind_plan import UnboundSymbol
from fusec.lowering.launcher import InputMismatch
from fusec.lowering.triton_kernel import LoweringError
from fusec.runtime import compile_module, interpreter
from fusec.testing import parse

NEG = kernel_module("fusec_poi_neg_0", "4*s0", ["!fusec.tensor<[s0, 4], f32>"], ["!fusec.tensor<[s0, 4], f32>"],
                    """      %v = fusec.load %in0[x] : !fusec.tensor<[s0, 4], f32>
      %y = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[s0, 4], f32>""")


def test_a_non_contiguous_input_is_copied_to_the_declared_layout():
    module, compiled = compile_text(NEG, {"s0": 3})
    a = randn(4, 3).t()  # shape [3, 4], strides (1, 3)
    (out,) = compiled([a])
    torch.testing.assert_close(out, -a)
    b = randn(3, 1, seed=1).expand(3, 4)  # stride 0: copied as well
    torch.testing.assert_close(compiled([b])[0], -b)


def test_declared_strides_are_read_without_a_copy():
    t = "!fusec.tensor<[4, s0], f32, strides [1, 4]>"
    text = kernel_module("fusec_poi_neg_0", "4*s0", [t], ["!fusec.tensor<[4, s0], f32>"], f"""      %v = fusec.load %in0[4*mod(x, s0) + floordiv(x, s0)] : {t}
      %y = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[4, s0], f32>""")
    module, compiled = compile_text(text, {"s0": 5})
    assert "arg0.stride() != (1, 4)" in compiled.source
    a = randn(5, 4).t()
    torch.testing.assert_close(compiled([a])[0], -a)


def test_a_symbol_bound_from_a_stride():
    t = "!fusec.tensor<[4, 8], f32, strides [s1, 1]>"
    text = kernel_module("fusec_poi_neg_0", "32", [t], ["!fusec.tensor<[4, 8], f32>"], f"""      %v = fusec.load %in0[s1*floordiv(x, 8) + mod(x, 8)] : {t}
      %y = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[4, 8], f32>""", "s1 in [8, inf]")
    module, compiled = compile_text(text, {"s1": 20})
    assert "s1 = arg0.stride(0)" in compiled.source
    for width in (20, 9):
        big = randn(4, width, seed=width)
        torch.testing.assert_close(compiled([big[:, :8]])[0], -big[:, :8])


def test_wrong_shape_dtype_and_count_give_one_clear_error():
    module, compiled = compile_text(NEG, {"s0": 3})
    with pytest.raises(InputMismatch, match=r"input 0 must be torch.float32 of shape \[3, 4\].*got torch.float32 of shape \[3, 5\]"):
        compiled([randn(3, 5)])
    with pytest.raises(InputMismatch, match="got torch.float64"):
        compiled([randn(3, 4, dtype=torch.float64)])
    with pytest.raises(InputMismatch, match="takes 1 tensors, got 2"):
        compiled([randn(3, 4), randn(3, 4)])


def test_a_caller_that_guarantees_shapes_skips_those_checks_never_alignment():
    module = parse(NEG)
    layout = compile_module(module, {"s0": 3}, input_checks="layout")  # as for AOTAutograd's backward graphs
    assert "_bad_input(" not in layout.source and "arg0.stride() != (4, 1) or arg0.data_ptr() % 16" in layout.source
    torch.testing.assert_close(layout([randn(4, 3).t()])[0], -randn(4, 3).t())
    aligned = compile_module(module, {"s0": 3}, input_checks="alignment")  # Dynamo guards strides too
    assert "stride()" not in aligned.source and "if arg0.data_ptr() % 16:" in aligned.source
    for compiled in (layout, aligned):
        a = randn(13)[1:].view(3, 4)  # 4 bytes past 16-byte alignment: copied
        torch.testing.assert_close(compiled([a])[0], -a)
    with pytest.raises(ValueError, match="input_checks must be one of all, layout, alignment"):
        compile_module(module, {"s0": 3}, input_checks="none")


def test_an_unbindable_symbol_is_a_compile_time_error():
    text = kernel_module("fusec_poi_neg_0", "s1", ["!fusec.tensor<[4], f32>"], ["!fusec.tensor<[s1], f32>"], """      %v = fusec.load %in0[0] : !fusec.tensor<[4], f32>
      fusec.store %v, %out0[x] : !fusec.tensor<[s1], f32>""", "s1 in [1, inf]")
    with pytest.raises(UnboundSymbol, match="size symbol 's1' is neither a dim nor a stride of any input"):
        compile_module(parse(text), {"s1": 4})


VIEWS_AND_EXTERN = """builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[s0, 8], f32>, %w : !fusec.tensor<[8, 3], f32>) -> (!fusec.tensor<[s0, 3], f32>, !fusec.tensor<[8, s0], f32, strides [1, 8]>, !fusec.tensor<[s0, 2, 4], f32>, !fusec.tensor<[s0, 3], f32, strides [8, 3]>, !fusec.tensor<[s0, 8], f32>) symbols(s0 in [1, inf]) {
    %n = fusec.kernel @fusec_poi_neg_0 [8*s0] (%a) : (!fusec.tensor<[s0, 8], f32>) -> (!fusec.tensor<[s0, 8], f32>) {
    ^bb0(%in0 : !fusec.tensor<[s0, 8], f32>, %out0 : !fusec.tensor<[s0, 8], f32>):
      %v = fusec.load %in0[x] : !fusec.tensor<[s0, 8], f32>
      %y = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[s0, 8], f32>
    }
    %mm = fusec.extern "aten.mm.default"(%n, %w) : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[8, 3], f32>) -> !fusec.tensor<[s0, 3], f32>
    %t = fusec.permute %n [1, 0] : !fusec.tensor<[s0, 8], f32> -> !fusec.tensor<[8, s0], f32, strides [1, 8]>
    %r = fusec.reshape %n : !fusec.tensor<[s0, 8], f32> -> !fusec.tensor<[s0, 2, 4], f32>
    %s = fusec.slice %n dim 1 start 1 step 3 : !fusec.tensor<[s0, 8], f32> -> !fusec.tensor<[s0, 3], f32, strides [8, 3]>
    %f = fusec.extern "aten.full.default"([s0, 8], 0.5, dtype = f32, device = device) : () -> !fusec.tensor<[s0, 8], f32>
    fusec.output %mm, %t, %r, %s, %f : !fusec.tensor<[s0, 3], f32>, !fusec.tensor<[8, s0], f32, strides [1, 8]>, !fusec.tensor<[s0, 2, 4], f32>, !fusec.tensor<[s0, 3], f32, strides [8, 3]>, !fusec.tensor<[s0, 8], f32>
  }
}"""


def test_views_and_externs_run_as_torch_calls():
    module, compiled = compile_text(VIEWS_AND_EXTERN, {"s0": 5})
    assert "_aten_mm_default(buf0, arg1)" in compiled.source
    assert "_aten_full_default([s0, 8], 0.5, dtype=torch.float32, device=device)" in compiled.source
    for rows in (2, 5):
        a, w = randn(rows, 8, seed=rows), randn(8, 3, seed=9)
        mm, t, r, s, f = compiled([a, w])
        torch.testing.assert_close(mm, (-a) @ w)
        torch.testing.assert_close(t, (-a).t())
        torch.testing.assert_close(r, (-a).reshape(rows, 2, 4))
        torch.testing.assert_close(s, (-a)[:, 1::3])
        torch.testing.assert_close(f, torch.full((rows, 8), 0.5))


EXTERN_RESULTS = """builtin.module {
  fusec.graph @g(%go : !fusec.tensor<[2, 5, 6, 6], f32>, %x : !fusec.tensor<[2, 3, 6, 6], f32>, %w : !fusec.tensor<[5, 3, 3, 3], f32>) -> (!fusec.tensor<[5], f32>, !fusec.tensor<[5, 3, 3, 3], f32>) {
    %gx, %gw, %gb = fusec.extern "aten.convolution_backward.default"(%go, %x, %w, [5], [1, 1], [1, 1], [1, 1], false, [0, 0], 1, [false, true, true]) : (!fusec.tensor<[2, 5, 6, 6], f32>, !fusec.tensor<[2, 3, 6, 6], f32>, !fusec.tensor<[5, 3, 3, 3], f32>) -> (!fusec.tensor<[2, 3, 6, 6], f32>, !fusec.tensor<[5, 3, 3, 3], f32>, !fusec.tensor<[5], f32>)
    %gw2, %gb2 = fusec.extern "aten.convolution_backward.default"(%go, %x, %w, [5], [1, 1], [1, 1], [1, 1], false, [0, 0], 1, [false, true, true]) results [1, 2] : (!fusec.tensor<[2, 5, 6, 6], f32>, !fusec.tensor<[2, 3, 6, 6], f32>, !fusec.tensor<[5, 3, 3, 3], f32>) -> (!fusec.tensor<[5, 3, 3, 3], f32>, !fusec.tensor<[5], f32>)
    fusec.output %gb, %gw2 : !fusec.tensor<[5], f32>, !fusec.tensor<[5, 3, 3, 3], f32>
  }
}"""


def test_extern_results_come_from_their_positions_and_may_be_undefined():
    """convolution_backward with a partial output mask returns (None, grad_w, grad_b): ``results [1, 2]`` picks the
    two tensors; a result declared where the op gives None (undefined) passes on as None instead of failing."""
    module, compiled = compile_text(EXTERN_RESULTS, {})
    go, x, w = randn(2, 5, 6, 6, seed=1), randn(2, 3, 6, 6, seed=2), randn(5, 3, 3, 3, seed=3)
    _, want_w, want_b = torch.ops.aten.convolution_backward(go, x, w, [5], [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                                            [False, True, True])
    for run in (compiled, lambda inputs: interpreter.run(module, inputs)):
        gb, gw2 = run([go, x, w])
        torch.testing.assert_close(gb, want_b)
        torch.testing.assert_close(gw2, want_w)


def test_buffers_are_deleted_after_their_last_use():
    text = """builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[16], f32>) -> (!fusec.tensor<[16], f32>) {
    %n = fusec.kernel @fusec_poi_neg_0 [16] (%a) : (!fusec.tensor<[16], f32>) -> (!fusec.tensor<[16], f32>) {
    ^bb0(%in0 : !fusec.tensor<[16], f32>, %out0 : !fusec.tensor<[16], f32>):
      %v = fusec.load %in0[x] : !fusec.tensor<[16], f32>
      %y = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[16], f32>
    }
    %e = fusec.kernel @fusec_poi_exp_1 [16] (%n) : (!fusec.tensor<[16], f32>) -> (!fusec.tensor<[16], f32>) {
    ^bb0(%in0 : !fusec.tensor<[16], f32>, %out0 : !fusec.tensor<[16], f32>):
      %v = fusec.load %in0[x] : !fusec.tensor<[16], f32>
      %y = fusec.pointwise "exp" %v : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[16], f32>
    }
    fusec.output %e : !fusec.tensor<[16], f32>
  }
}"""
    module, compiled = compile_text(text)
    source = compiled.source
    assert "del buf0" in source and "del buf1" not in source
    # a static domain: literal block sizes and grid, no per-call heuristics
    assert "fusec_poi_neg_0.launch(1, 1, arg0, buf0, 16, 16)  # grid 1, num_warps 1, XBLOCK=16" in source
    a = randn(16)
    torch.testing.assert_close(compiled([a])[0], torch.exp(-a))


def test_graph_level_ops_are_refused_before_form_kernels():
    text = """builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[16], f32>) -> (!fusec.tensor<[16], f32>) {
    %n = fusec.pointwise "neg" %a : (!fusec.tensor<[16], f32>) -> !fusec.tensor<[16], f32>
    fusec.output %n : !fusec.tensor<[16], f32>
  }
}"""
    with pytest.raises(LoweringError, match="run form-kernels first"):
        compile_module(parse(text))


def test_a_symbol_solved_from_a_linear_dim():
    t, o = "!fusec.tensor<[4*s1 + 2], f32>", "!fusec.tensor<[s1], f32>"
    text = kernel_module("fusec_poi_neg_0", "s1", [t], [o], f"""      %v = fusec.load %in0[4*x + 2] : {t}
      %y = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %y, %out0[x] : {o}""", "s1 in [1, inf]")
    module, compiled = compile_text(text, {"s1": 3})
    assert "s1 = (arg0.shape[0] - 2) // 4" in compiled.source
    a = randn(4 * 5 + 2)
    torch.testing.assert_close(compiled([a])[0], -a[2::4])
    with pytest.raises(InputMismatch):
        compiled([randn(4 * 5 + 3)])  # 23 is no 4*s1 + 2: the shape check catches it


def _chain(last_view: str, last_type: str, summed: str = "!fusec.tensor<[2], f32>") -> str:
    """neg over [4, 6], viewed [4, 3, 2], permuted [3, 4, 2], then ``last_view`` summed over dim 0 (``summed``)."""
    return f"""builtin.module {{
  fusec.graph @g(%a : !fusec.tensor<[4, 6], f32>) -> ({summed}) {{
    %n = fusec.kernel @fusec_poi_neg_0 [24] (%a) : (!fusec.tensor<[4, 6], f32>) -> (!fusec.tensor<[4, 6], f32>) {{
    ^bb0(%in0 : !fusec.tensor<[4, 6], f32>, %out0 : !fusec.tensor<[4, 6], f32>):
      %v = fusec.load %in0[x] : !fusec.tensor<[4, 6], f32>
      %y = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[4, 6], f32>
    }}
    %r = fusec.reshape %n : !fusec.tensor<[4, 6], f32> -> !fusec.tensor<[4, 3, 2], f32>
    %p = fusec.permute %r [1, 0, 2] : !fusec.tensor<[4, 3, 2], f32> -> !fusec.tensor<[3, 4, 2], f32, strides [2, 6, 1]>
    %q = {last_view}
    %s = fusec.extern "aten.sum.dim_IntList"(%q, [0]) : ({last_type}) -> {summed}
    fusec.output %s : {summed}
  }}
}}"""


def test_a_chain_of_views_only_views_read_is_one_call_on_its_root():
    """reshape -> permute -> slice: one ``_reinterpret`` of the kernel's buffer, none for the two views in between;
    the buffer lives until that last view."""
    text = _chain("fusec.slice %p dim 1 start 1 step 2 : !fusec.tensor<[3, 4, 2], f32, strides [2, 6, 1]> -> "
                  "!fusec.tensor<[3, 2, 2], f32, strides [2, 12, 1]>", "!fusec.tensor<[3, 2, 2], f32, strides [2, 12, 1]>",
                  "!fusec.tensor<[2, 2], f32>")
    module, compiled = compile_text(text)
    source = compiled.source
    assert source.count("_reinterpret(") == 1 and "_reinterpret(buf0, (3, 2, 2), (2, 12, 1), 6)" in source, source
    assert source.index("del buf0") > source.index("_reinterpret(buf0")
    a = randn(4, 6)
    want = (-a).reshape(4, 3, 2).permute(1, 0, 2)[:, 1::2].sum(0)
    for run in (compiled, lambda inputs: interpreter.run(module, inputs)):
        torch.testing.assert_close(run([a])[0], want)


def test_a_view_that_needs_a_copy_makes_the_chain_before_it():
    """permute then a reshape that no strides give (a copy): the permuted view is made, from the buffer, where the
    reshape needs it."""
    text = _chain("fusec.reshape %p : !fusec.tensor<[3, 4, 2], f32, strides [2, 6, 1]> -> !fusec.tensor<[12, 2], f32>",
                  "!fusec.tensor<[12, 2], f32>")
    module, compiled = compile_text(text)
    source = compiled.source
    assert "buf2 = _reinterpret(buf0, (3, 4, 2), (2, 6, 1), 0)" in source and "buf3 = buf2.reshape((12, 2))" in source
    a = randn(4, 6, seed=3)
    want = (-a).reshape(4, 3, 2).permute(1, 0, 2).reshape(12, 2).sum(0)
    for run in (compiled, lambda inputs: interpreter.run(module, inputs)):
        torch.testing.assert_close(run([a])[0], want)


def test_a_tuple_of_tensors_is_indexed_without_flattening():
    module, compiled = compile_text(EXTERN_RESULTS, {})
    assert "_pick_results" not in compiled.source  # convolution_backward returns (Tensor, Tensor, Tensor)


SLICED_PRODUCT = """builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[s0, 8], f32>, %w : !fusec.tensor<[8, 8], f32>) -> (!fusec.tensor<[s0, 4], f32>, !fusec.tensor<[s0, 4], f32>) symbols(s0 in [1, inf]) {
    %mm = fusec.extern "aten.mm.default"(%a, %w) : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[s0, 8], f32>
    %hi = fusec.slice %mm dim 1 start 4 step 1 : !fusec.tensor<[s0, 8], f32> -> !fusec.tensor<[s0, 4], f32, strides [8, 1]>
    %odd = fusec.slice %mm dim 1 start 1 step 1 : !fusec.tensor<[s0, 8], f32> -> !fusec.tensor<[s0, 4], f32, strides [8, 1]>
    %x = fusec.kernel @fusec_poi_neg_0 [4*s0] (%hi) : (!fusec.tensor<[s0, 4], f32, strides [8, 1]>) -> (!fusec.tensor<[s0, 4], f32>) {
    ^bb0(%in0 : !fusec.tensor<[s0, 4], f32, strides [8, 1]>, %out0 : !fusec.tensor<[s0, 4], f32>):
      %v = fusec.load %in0[8*floordiv(x, 4) + mod(x, 4)] : !fusec.tensor<[s0, 4], f32, strides [8, 1]>
      %y = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[s0, 4], f32>
    }
    %z = fusec.kernel @fusec_poi_exp_1 [4*s0] (%odd) : (!fusec.tensor<[s0, 4], f32, strides [8, 1]>) -> (!fusec.tensor<[s0, 4], f32>) {
    ^bb0(%in0 : !fusec.tensor<[s0, 4], f32, strides [8, 1]>, %out0 : !fusec.tensor<[s0, 4], f32>):
      %v = fusec.load %in0[8*floordiv(x, 4) + mod(x, 4)] : !fusec.tensor<[s0, 4], f32, strides [8, 1]>
      %y = fusec.pointwise "exp" %v : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[s0, 4], f32>
    }
    fusec.output %x, %z : !fusec.tensor<[s0, 4], f32>, !fusec.tensor<[s0, 4], f32>
  }
}"""


def test_a_view_16_bytes_into_a_new_product_needs_no_alignment_check():
    """mm's result is a new allocation (as the launcher's own): a kernel reading it, or a view of it starting a
    multiple of 16 bytes in (columns 4..7 of f32 rows), is launched with no per-call alignment check; a view 4 bytes
    in (column 1) is checked."""
    _, compiled = compile_text(SLICED_PRODUCT, {"s0": 5})
    checked = {name: positions for name, positions, *_ in compiled.launcher.launch_keys}
    assert checked == {"fusec_poi_neg_0": (), "fusec_poi_exp_1": (0,)}
    for rows in (3, 5):
        a, w = randn(rows, 8, seed=rows), randn(8, 8, seed=9)
        hi, odd = compiled([a, w])
        torch.testing.assert_close(hi, -(a @ w)[:, 4:])
        torch.testing.assert_close(odd, (a @ w)[:, 1:5].exp())
