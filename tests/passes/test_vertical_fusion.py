"""vertical-fusion: graph IR -> form-kernels -> vertical-fusion; kernel counts, names, remarks, interpreter equivalence."""

import pytest

from fusec.dialects import fusec as F
from fusec.passes.form_kernels import FormKernels
from fusec.passes.vertical_fusion import VerticalFusion
from fusec.testing import graph_text, kernels, print_ir, run_passes_checked, tensor_type


def fuse(text: str, sizes=(1, 5, 17), **options):
    """Run form-kernels + vertical-fusion (checked by ``run_passes_checked``); return (module, remarks)."""
    return run_passes_checked(text, FormKernels(), VerticalFusion(**options), sizes=sizes)


def affine_sigmoid(dim0: str) -> str:
    t, v = tensor_type(f"{dim0}, 64"), tensor_type("64")
    return graph_text(f"%x : {t}, %w : {v}, %b : {v}", t, f"""
    %m = fusec.pointwise "mul" %x, %w : ({t}, {v}) -> {t}
    %a = fusec.pointwise "add" %m, %b : ({t}, {v}) -> {t}
    %s = fusec.pointwise "sigmoid" %a : ({t}) -> {t}
    fusec.output %s : {t}""", symbolic=dim0 == "s0")


@pytest.mark.parametrize("dim0", ["s0", "6"])
def test_sigmoid_of_affine_is_one_kernel(dim0):
    module, notes = fuse(affine_sigmoid(dim0))
    (k,) = kernels(module)
    assert k.sym_name.data == "fusec_poi_mul_add_sigmoid_2"
    assert [type(op).__name__ for op in k.block.ops].count("LoadOp") == 3  # x, w, b: no intermediate buffer
    assert k.inputs[0] is F.find_graph(module).block.args[0]
    assert not notes


def test_pointwise_prologue_joins_the_reduction():
    t = tensor_type("s0, 32")
    module, _ = fuse(graph_text(f"%x : {t}", tensor_type("s0"), f"""
    %e = fusec.pointwise "exp" %x : ({t}) -> {t}
    %sq = fusec.pointwise "mul" %e, %e : ({t}, {t}) -> {t}
    %s = fusec.reduce "sum" %sq dims [1] : {t} -> {tensor_type("s0")}
    fusec.output %s : {tensor_type("s0")}"""))
    (k,) = kernels(module)
    assert k.is_reduction and k.sym_name.data.startswith("fusec_red_exp_mul_sum_")
    assert "fusec.load %0[r + 32*x]" in print_ir(k)  # exp's load re-indexed into the reduction domain


def test_broadcast_producer_is_recomputed_in_its_reader():
    t, v = tensor_type("s0, 64"), tensor_type("64")
    module, notes = fuse(graph_text(f"%x : {t}, %w : {v}", t, f"""
    %w2 = fusec.pointwise "exp" %w : ({v}) -> {v}
    %y = fusec.pointwise "mul" %x, %w2 : ({t}, {v}) -> {t}
    fusec.output %y : {t}"""))
    (k,) = kernels(module)
    assert "fusec.load %1[mod(x, 64)]" in print_ir(k)  # exp's load re-indexed through the broadcast
    assert not notes


def test_broadcast_producer_read_by_two_kernels_goes_when_both_recompute_it():
    t, v = tensor_type("s0, 64"), tensor_type("64, 1")
    module, notes = fuse(graph_text(f"%x : {t}, %w : {v}", f"{t}, {t}", f"""
    %w2 = fusec.pointwise "exp" %w : ({v}) -> {v}
    %wr = fusec.reshape %w2 : {v} -> {tensor_type("64")}
    %y = fusec.pointwise "mul" %x, %wr : ({t}, {tensor_type("64")}) -> {t}
    %p = fusec.permute %x [1, 0] : {t} -> {tensor_type("64, s0")}
    %q = fusec.pointwise "add" %p, %w2 : ({tensor_type("64, s0")}, {v}) -> {tensor_type("64, s0")}
    %z = fusec.permute %q [1, 0] : {tensor_type("64, s0")} -> {t}
    %o = fusec.pointwise "sin" %z : ({t}) -> {t}
    fusec.output %y, %o : {t}, {t}"""))
    assert all("exp" in k.sym_name.data for k in kernels(module)), [k.sym_name.data for k in kernels(module)]
    assert not any(k.domain_exprs == [64] for k in kernels(module))  # the [64] kernel is gone
    assert not notes


def test_slices_of_a_producer_each_recompute_their_part():
    t, b, q = tensor_type("4, 24"), tensor_type("24"), tensor_type("4, 8", )
    qs = "!fusec.tensor<[4, 8], f32, strides [24, 1]>"
    body = f"""
    %a = fusec.pointwise "add" %x, %b : ({t}, {b}) -> {t}"""
    for name, start in (("q", 0), ("k", 8), ("v", 16)):
        body += f"""
    %{name} = fusec.slice %a dim 1 start {start} step 1 : {t} -> {qs}
    %{name}c = fusec.pointwise "neg" %{name} : ({qs}) -> {q}"""
    body += f"""
    fusec.output %qc, %kc, %vc : {q}, {q}, {q}"""
    module, notes = fuse(graph_text(f"%x : {t}, %b : {b}", f"{q}, {q}, {q}", body), sizes=(1,))
    assert [k.sym_name.data.rsplit("_", 1)[0] for k in kernels(module)] == ["fusec_poi_add_neg"] * 3
    assert "fusec.load %1[mod(x, 8) + 16]" in print_ir(kernels(module)[2])
    assert not notes


def test_expensive_broadcast_is_declined_with_the_numbers():
    # 48 chained exps over [64], read broadcast over [64, 1048576] by a kernel moving 2 bytes a point:
    # the recomputed exps are compute-bound (they no longer hide behind memory traffic).
    m, w, g = tensor_type("64, 1048576", "i1"), tensor_type("64, 1"), tensor_type("64, 1", "i1")
    body = "".join(f"""
    %e{i + 1} = fusec.pointwise "exp" %e{i} : ({w}) -> {w}""" for i in range(48)).replace("%e0 ", "%w ")
    body += f"""
    %c = fusec.constant 1.0 : {tensor_type("")}
    %g = fusec.pointwise "gt" %e48, %c : ({w}, {tensor_type("")}) -> {g}
    %y = fusec.pointwise "logical_and" %m, %g : ({m}, {g}) -> {m}
    fusec.output %y : {m}"""
    text = graph_text(f"%m : {m}, %w : {w}", m, body)
    module, notes = fuse(text, sizes=())
    assert len(kernels(module)) == 2
    (note,) = notes
    assert note.code == "recompute-cost"
    # an exp is 5 instructions (cost_model.FUNCTION_INSTRUCTIONS): 48 * 5 + 3 a point
    assert "(243 instructions a point): 16307438400 instructions more" in note.message
    assert "> max-recompute=1 x saving 128 B and a launch" in note.message
    module, notes = fuse(text, sizes=(), max_recompute=200.0)
    assert len(kernels(module)) == 1 and not notes


def test_gathered_producer_is_recomputed_at_the_gathered_elements():
    # One element per row of exp(x) * y: the gather recomputes it there instead of storing [s0, 10].
    t, k, i = tensor_type("s0, 10"), tensor_type("s0, 1"), tensor_type("s0, 1", "i64")
    module, notes = fuse(graph_text(f"%x : {t}, %y : {t}, %t : {i}", k, f"""
    %e = fusec.pointwise "exp" %x : ({t}) -> {t}
    %p = fusec.pointwise "mul" %e, %y : ({t}, {t}) -> {t}
    %g = fusec.gather %p[%t] dim 1 : {t}, {i} -> {k}
    fusec.output %g : {k}"""))
    (kernel,) = kernels(module)
    gathered = [op for op in kernel.block.ops if isinstance(op, F.LoadOp) and op.offset is not None]
    assert len(gathered) == 2 and all(str(op.index.data) == "10*x" for op in gathered)  # x and y, at the target
    assert not notes


def test_gather_of_a_broadcasting_producer_is_declined():
    t, k, i, v = tensor_type("s0, 10"), tensor_type("s0, 1"), tensor_type("s0, 1", "i64"), tensor_type("10")
    module, notes = fuse(graph_text(f"%x : {t}, %w : {v}, %t : {i}", k, f"""
    %p = fusec.pointwise "mul" %x, %w : ({t}, {v}) -> {t}
    %g = fusec.gather %p[%t] dim 1 : {t}, {i} -> {k}
    fusec.output %g : {k}"""))
    assert len(kernels(module)) == 2
    assert [n.code for n in notes] == ["indirect-load"]


def test_transposed_read_is_reindexed():
    t = tensor_type("s0, 8")
    tt = tensor_type("8, s0")
    module, _ = fuse(graph_text(f"%x : {t}", tt, f"""
    %e = fusec.pointwise "exp" %x : ({t}) -> {t}
    %p = fusec.permute %e [1, 0] : {t} -> {tt}
    %n = fusec.pointwise "neg" %p : ({tt}) -> {tt}
    fusec.output %n : {tt}"""))
    (k,) = kernels(module)
    assert "[floordiv(x, s0) + 8*mod(x, s0)]" in print_ir(k)


def two_readers(extra: str = "", outs: str = "") -> str:
    t = tensor_type("s0, 8")
    return graph_text(f"%x : {t}, %y : {t}", ", ".join([t, t] + ([t] if outs else [])), f"""
    %a = fusec.pointwise "add" %x, %y : ({t}, {t}) -> {t}
    %b = fusec.pointwise "exp" %a : ({t}) -> {t}
    %c = fusec.pointwise "sin" %a : ({t}) -> {t}{extra}
    fusec.output %b, %c{outs} : {", ".join([t, t] + ([t] if outs else []))}""")


def test_readers_covering_the_producer_end_in_one_kernel():
    # The first reader also stores %a (it visits all of it once); the second then inlines that kernel.
    module, notes = fuse(two_readers())
    (k,) = kernels(module)
    assert k.sym_name.data == "fusec_poi_add_exp_sin_2" and len(k.outputs) == 2
    assert not notes


def test_cheap_producer_is_recomputed_in_each_transposed_reader():
    t = tensor_type("s0, s0")
    module, notes = fuse(graph_text(f"%x : {t}, %y : {t}", f"{t}, {t}", f"""
    %a = fusec.pointwise "add" %x, %y : ({t}, {t}) -> {t}
    %p = fusec.permute %a [1, 0] : {t} -> {t}
    %b = fusec.pointwise "exp" %p : ({t}) -> {t}
    %c = fusec.pointwise "sin" %p : ({t}) -> {t}
    fusec.output %b, %c : {t}, {t}"""))
    assert [k.sym_name.data for k in kernels(module)] == ["fusec_poi_add_exp_1", "fusec_poi_add_sin_2"]
    assert not notes


def test_expensive_producer_is_stored_by_a_reader_that_covers_it():
    # With recompute-max-ops=0 nothing is recomputed: the first reader also stores %a
    # and the second reader then inlines that merged kernel's copy.
    module, _ = fuse(two_readers(), **{"recompute_max_ops": 0})
    (k,) = kernels(module)
    assert len(k.outputs) == 2 and "\"add\"" in print_ir(k)


def test_graph_output_blocks_an_expensive_non_covering_reader():
    t, tt = tensor_type("s0, s0"), tensor_type("s0, s0")
    body = f"""
    %a = fusec.pointwise "exp" %x : ({t}) -> {t}
    %b = fusec.pointwise "sin" %a : ({t}) -> {t}
    %p = fusec.permute %b [1, 0] : {t} -> {tt}
    %n = fusec.pointwise "neg" %p : ({tt}) -> {tt}
    fusec.output %b, %n : {t}, {tt}"""
    text = graph_text(f"%x : {t}", f"{t}, {tt}", body)
    module, notes = fuse(text, recompute_max_ops=2)
    assert len(kernels(module)) == 2
    (note,) = notes
    assert note.code == "graph-output"
    assert "recomputing costs 3 ops > recompute-max-ops=2" in note.message
    module, notes = fuse(text, recompute_max_ops=3)  # cheap enough: the reader recomputes, the producer stays
    assert [k.sym_name.data for k in kernels(module)] == ["fusec_poi_exp_sin_1", "fusec_poi_exp_sin_neg_2"]


def test_extern_reader_gets_the_value_from_the_fused_kernel():
    t = tensor_type("s0, 8")
    v = tensor_type("8, 8")
    module, notes = fuse(graph_text(f"%x : {t}, %v : {v}", f"{t}, {t}", f"""
    %a = fusec.pointwise "exp" %x : ({t}) -> {t}
    %mm:1 = fusec.extern "aten.mm.default"(%a, %v) : ({t}, {v}) -> ({t})
    %b = fusec.pointwise "tanh" %a : ({t}) -> {t}
    fusec.output %mm, %b : {t}, {t}"""), recompute_max_ops=0)
    (k,) = kernels(module)
    assert len(k.outputs) == 2  # tanh's result and exp's, which the extern reads
    extern = next(op for op in F.find_graph(module).block.ops if isinstance(op, F.ExternOp))
    assert extern.inputs[0].owner is k
    assert [n.code for n in notes] == ["extern-consumer"]
    assert "aten.mm.default" in notes[0].message


def test_limits_decline_with_the_numbers():
    module, notes = fuse(affine_sigmoid("s0"), max_ops=5)
    assert len(kernels(module)) == 2  # mul+add fits in 5 ops, adding sigmoid does not
    assert [(n.code, n.message) for n in notes] == [("limit", "max-ops=5 exceeded (7)")]
    module, notes = fuse(affine_sigmoid("s0"), max_inputs=2)
    assert len(kernels(module)) == 2
    assert [(n.code, n.message) for n in notes] == [("limit", "max-inputs=2 exceeded (3)")]


def test_cat_reader_masks_the_inlined_loads():
    t, c = tensor_type("s0, 4"), tensor_type("s0, 8")
    module, _ = fuse(graph_text(f"%x : {t}, %y : {t}", c, f"""
    %e = fusec.pointwise "exp" %x : ({t}) -> {t}
    %l = fusec.pointwise "sin" %y : ({t}) -> {t}
    %k = fusec.cat %e, %l dim 1 : ({t}, {t}) -> {c}
    fusec.output %k : {c}"""))
    (k,) = kernels(module)
    text = print_ir(k)
    assert text.count(" mask ") == 2 and "\"where\"" in text


def test_masked_read_of_an_integer_division_is_declined():
    t, c = tensor_type("s0, 4", "i64"), tensor_type("s0, 8", "i64")
    module, notes = fuse(graph_text(f"%x : {t}, %y : {t}", c, f"""
    %one = fusec.constant 1 : {tensor_type("", "i64")}
    %y1 = fusec.pointwise "add" %y, %one : ({t}, {tensor_type("", "i64")}) -> {t}
    %f = fusec.pointwise "floordiv" %x, %y1 : ({t}, {t}) -> {t}
    %k = fusec.cat %f, %x dim 1 : ({t}, {t}) -> {c}
    fusec.output %k : {c}"""))
    assert len(kernels(module)) == 2  # masked-off lanes would divide by zero
    assert [n.code for n in notes] == ["masked-load"]


def residual_stream(layers: int) -> str:
    """A bf16 residual stream; each layer's norm-like readers see it through an fp32 upcast, and an extern (the
    layer's matmul) adds the next term: GPT-2's and Llama's inference graphs in small."""
    h, u, w = tensor_type("s0, 64", "bf16"), tensor_type("s0, 64"), tensor_type("64, 64")
    lines, outs, stream = [], [], "%h0"
    for i in range(1, layers + 1):
        lines += [f'%u{i} = fusec.pointwise "convert" {stream} : ({h}) -> {u}',
                  f'%q{i} = fusec.pointwise "mul" %u{i}, %u{i} : ({u}, {u}) -> {u}',
                  f'%t{i} = fusec.pointwise "tanh" %u{i} : ({u}) -> {u}',
                  f'%m{i}:1 = fusec.extern "aten.mm.default"(%t{i}, %w) : ({u}, {w}) -> ({u})',
                  f'%c{i} = fusec.pointwise "convert" %m{i} : ({u}) -> {h}',
                  f'%h{i} = fusec.pointwise "add" {stream}, %c{i} : ({h}, {h}) -> {h}']
        outs.append(f"%q{i}")
        stream = f"%h{i}"
    body = "    " + "\n    ".join(lines) + f"\n    fusec.output {', '.join(outs)}, {stream} : {', '.join([u] * layers)}, {h}"
    return graph_text(f"%h0 : {h}, %w : {w}", ", ".join([u] * layers + [h]), body, symbolic=True)


@pytest.mark.parametrize("layers", [2, 4, 6])
def test_keep_narrow_stores_the_stream_instead_of_recomputing_it(layers):
    """keep-narrow: the upcasts go into their readers first, then the sums are stored narrow by one of them; the
    default stores the sum where it is upcast and recomputes both in each reader: half a kernel more a layer
    (its byte rule stops the recomputed history after two layers here).  Interpreter-checked by ``fuse``."""
    narrow, _ = fuse(residual_stream(layers), keep_narrow=True)
    default, _ = fuse(residual_stream(layers))
    assert len(kernels(narrow)) == layers + 2
    assert len(kernels(default)) == 3 * layers // 2 + 2
    assert max(len(k.inputs) for k in kernels(narrow)) <= 3


def test_cross_domain_takes_per_reader_or_per_producer():
    assert VerticalFusion().cross_domain == "per-reader"
    assert VerticalFusion(cross_domain="per-producer").cross_domain == "per-producer"
    with pytest.raises(ValueError, match="cross-domain must be one of per-reader, per-producer"):
        VerticalFusion(cross_domain="sometimes")
