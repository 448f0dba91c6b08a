"""combo-grouping: which kernels group, why others do not, and that meaning and peak memory hold."""

import random

import pytest
import torch

from fusec.analysis.cost_model import DEFAULT_SIZE_HINT
from fusec.analysis.liveness import peak_memory_estimate
from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.passes import combo_grouping
from fusec.passes.combo_grouping import ComboGrouping
from fusec.passes.form_kernels import FormKernels
from fusec.pipeline import PipelineError, parse_pipeline_spec
from fusec.runtime import interpreter
from fusec.testing import apply_passes, assert_same_results, parse, print_ir, random_inputs, seed_graph, sgd_kernels

T = "!fusec.tensor<[s0, 512], f32>"
V = "!fusec.tensor<[s0], f32>"

SEED = seed_graph("s0", "s0 in [2, inf]")

MIXED_SIZES = ["64", "s0", "1000", "4*s1", "3", "s0*s1", "257", "8192", "s1", "16", "2*s0", "100", "31", "s0 + 7", "512", "5", "12"]


def combos(module) -> list[F.ComboOp]:
    return [op for op in module.walk() if isinstance(op, F.ComboOp)]


def names(ops) -> list[str]:
    return [k.sym_name.data for k in ops]


def run_grouping(text: str, pass_: ComboGrouping = ComboGrouping(), form: bool = True):
    module = parse(text)
    if form:
        apply_passes(module, FormKernels())
    before = print_ir(module)
    with remarks.collect() as log:
        apply_passes(module, pass_)
    return parse(before), module, log


def check_equivalent(before, after, sizes: dict[str, int], seed: int = 0):
    inputs = random_inputs(before, sizes, seed=seed)
    assert_same_results(interpreter.run(before, inputs), interpreter.run(parse(print_ir(after)), inputs))


# ---------------------------------------------------------------- grouping


def test_seed_reductions_become_one_combo():
    before, after, log = run_grouping(SEED)
    (combo,) = combos(after)
    assert names(combo.kernels) == ["fusec_red_sum_0", "fusec_red_max_1", "fusec_red_min_2", "fusec_red_sum_3"]
    graph = F.find_graph(after)
    assert [op.name for op in graph.block.ops] == ["fusec.combo", "fusec.output"]
    assert not log.remarks
    for s0 in (2, 9):
        check_equivalent(before, after, {"s0": s0}, seed=s0)


def test_optimizer_update_over_mixed_sizes_launches_twice():
    before, after, log = run_grouping(sgd_kernels(MIXED_SIZES), form=False)
    groups = combos(after)
    graph = F.find_graph(after)
    launches = [op for op in graph.block.ops if isinstance(op, (F.ComboOp, F.KernelOp))]
    assert len(launches) == 3  # 17 kernels, 8 a combo at most
    assert [len(c.kernels) for c in groups] == [8, 8]
    assert [(r.code, r.subjects) for r in log.remarks] == [("limit-max-subkernels", ("@fusec_poi_sgd_16",))]
    check_equivalent(before, after, {"s0": 3, "s1": 5})


def test_optimizer_update_16_params_two_launches_at_two_sizes():
    before, after, _ = run_grouping(sgd_kernels(MIXED_SIZES[:16]), form=False)
    graph = F.find_graph(after)
    assert [op.name for op in graph.block.ops] == ["fusec.combo", "fusec.combo", "fusec.output"]
    for sizes in ({"s0": 2, "s1": 3}, {"s0": 11, "s1": 6}):
        check_equivalent(before, after, sizes, seed=sizes["s0"])


def test_dependent_kernel_stays_out_with_a_dependence_remark():
    text = f"""
builtin.module {{
  fusec.graph @g(%a : {T}) -> ({T}, {T}) symbols(s0 in [2, inf]) {{
    %e = fusec.pointwise "exp" %a : ({T}) -> {T}
    %n = fusec.pointwise "neg" %e : ({T}) -> {T}
    fusec.output %e, %n : {T}, {T}
  }}
}}"""
    _, after, log = run_grouping(text)
    assert not combos(after)
    (r,) = log.remarks
    assert (r.code, r.subjects) == ("dependence", ("@fusec_poi_neg_1",))
    assert "@fusec_poi_exp_0" in r.message


def test_dependence_through_an_extern_and_a_view():
    text = """
builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[8, 8], f32>) -> (!fusec.tensor<[8, 8], f32>, !fusec.tensor<[8, 8], f32>) {
    %e = fusec.pointwise "exp" %a : (!fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[8, 8], f32>
    %t = fusec.permute %e [1, 0] : !fusec.tensor<[8, 8], f32> -> !fusec.tensor<[8, 8], f32>
    %m:1 = fusec.extern "aten.mm.default"(%t, %a) : (!fusec.tensor<[8, 8], f32>, !fusec.tensor<[8, 8], f32>) -> (!fusec.tensor<[8, 8], f32>)
    %n = fusec.pointwise "neg" %m : (!fusec.tensor<[8, 8], f32>) -> !fusec.tensor<[8, 8], f32>
    fusec.output %e, %n : !fusec.tensor<[8, 8], f32>, !fusec.tensor<[8, 8], f32>
  }
}"""
    before, after, log = run_grouping(text)
    assert not combos(after)
    assert [(r.code, r.subjects) for r in log.remarks] == [("dependence", ("@fusec_poi_neg_1",))]
    check_equivalent(before, after, {})


def test_long_and_short_reductions_stay_apart():
    text = f"""
builtin.module {{
  fusec.graph @g(%a : {T}, %b : !fusec.tensor<[4, s1], f32>) -> ({V}, !fusec.tensor<[4], f32>) symbols(s0 in [2, inf], s1 in [2, inf]) {{
    %s = fusec.reduce "sum" %a dims [1] : {T} -> {V}
    %l = fusec.reduce "max" %b dims [1] : !fusec.tensor<[4, s1], f32> -> !fusec.tensor<[4], f32>
    fusec.output %s, %l : {V}, !fusec.tensor<[4], f32>
  }}
}}"""
    _, after, log = run_grouping(text, ComboGrouping(size_hints=("s1=100000",)))
    assert not combos(after)
    (r,) = log.remarks
    assert r.code == "reduction-length-class" and r.subjects == ("@fusec_red_max_1",)
    _, after, log = run_grouping(text, ComboGrouping(size_hints=("s1=1000",)))  # both short now
    assert len(combos(after)) == 1 and not log.remarks


def test_large_pointwise_stays_alone():
    text = f"""
builtin.module {{
  fusec.graph @g(%a : {T}, %b : {T}) -> ({T}, {T}) symbols(s0 in [2, inf]) {{
    %e = fusec.pointwise "exp" %a : ({T}) -> {T}
    %n = fusec.pointwise "neg" %b : ({T}) -> {T}
    fusec.output %e, %n : {T}, {T}
  }}
}}"""
    _, after, log = run_grouping(text, ComboGrouping(size_hints=("s0=4096",), large_pointwise_numel=1 << 20))
    assert not combos(after)
    assert [r.code for r in log.remarks] == ["large-pointwise", "large-pointwise"]
    assert log.remarks[0].data["xnumel"] == 4096 * 512
    _, after, _ = run_grouping(text, ComboGrouping(size_hints=("s0=4096",)))
    assert len(combos(after)) == 1


def test_large_pointwise_after_a_join():
    """A large kernel met after two small ones joined: its remark asks about kernels already in a group (a
    KeyError once, on GPT-2's padded LM head, which combo-grouping met after the layers' combos)."""
    small = "!fusec.tensor<[8, 64], f32>"
    text = f"""
builtin.module {{
  fusec.graph @g(%a : {small}, %b : {small}, %c : {T}) -> ({small}, {small}, {T}) symbols(s0 in [2, inf]) {{
    %e = fusec.pointwise "exp" %a : ({small}) -> {small}
    %n = fusec.pointwise "neg" %b : ({small}) -> {small}
    %l = fusec.pointwise "sin" %c : ({T}) -> {T}
    fusec.output %e, %n, %l : {small}, {small}, {T}
  }}
}}"""
    _, after, log = run_grouping(text, ComboGrouping(size_hints=("s0=4096",), large_pointwise_numel=1 << 20))
    assert [len(c.kernels) for c in combos(after)] == [2]
    assert [r.code for r in log.remarks] == ["large-pointwise"]


def test_limits_on_subkernels_and_arguments():
    _, after, log = run_grouping(SEED, ComboGrouping(max_subkernels=3))
    assert [len(c.kernels) for c in combos(after)] == [3]
    assert [(r.code, r.subjects) for r in log.remarks] == [("limit-max-subkernels", ("@fusec_red_sum_3",))]
    _, after, log = run_grouping(SEED, ComboGrouping(max_args=6))  # t, out a kernel and s0: 2 kernels take 5, 3 take 7
    assert [len(c.kernels) for c in combos(after)] == [2, 2]
    assert not log.remarks  # every kernel found a group in the end


def test_cost_model_refuses_a_combo_of_two_heavy_long_reductions():
    text = """
builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[s0, s1], f32>, %b : !fusec.tensor<[s0, s1], f32>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>) symbols(s0 in [2, inf], s1 in [2, inf]) {
    %x = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s0], f32>
    %y = fusec.reduce "sum" %b dims [1] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s0], f32>
    fusec.output %x, %y : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>
  }
}"""
    # One full wave of long blocks each (2 rows a block): together they need a second wave and a tail.
    _, after, log = run_grouping(text, ComboGrouping(size_hints=("s0=264", "s1=16777216")))
    assert not combos(after)
    (r,) = log.remarks
    assert r.code == "not-profitable" and r.data["gain_us"] < 0
    _, after, _ = run_grouping(text, ComboGrouping(size_hints=("s0=16", "s1=16777216")))  # 16 blocks: one wave
    assert len(combos(after)) == 1


# ---------------------------------------------------------------- peak memory

PEAK = f"""
builtin.module {{
  fusec.graph @g(%x : {T}, %y : {T}) -> ({V}, {V}) symbols(s0 in [2, inf]) {{
    %p = fusec.pointwise "exp" %x : ({T}) -> {T}
    %a = fusec.reduce "sum" %p dims [1] : {T} -> {V}
    %q = fusec.pointwise "exp" %y : ({T}) -> {T}
    %b = fusec.reduce "sum" %q dims [1] : {T} -> {V}
    fusec.output %a, %b : {V}, {V}
  }}
}}"""


def test_grouping_that_would_raise_peak_memory_is_refused():
    # Grouping exp(x) with exp(y), or the two sums, would hold both big intermediates at once.
    before, after, log = run_grouping(PEAK)
    assert not combos(after)
    assert [(r.code, r.subjects) for r in log.remarks] == [
        ("dependence", ("@fusec_red_sum_1",)), ("peak-memory", ("@fusec_poi_exp_2",)), ("peak-memory", ("@fusec_red_sum_3",))]
    for s0 in (2, 64):
        assert peak_memory_estimate(F.find_graph(after), {"s0": s0}) <= peak_memory_estimate(F.find_graph(before), {"s0": s0})


def test_peak_memory_estimate_counts_live_buffers():
    module = parse(PEAK)
    apply_passes(module, FormKernels())
    graph = F.find_graph(module)
    s0 = 10
    big, small = s0 * 512 * 4, s0 * 4
    # inputs x, y; the fullest moment holds p and a then q (p dies at its sum), or q and both sums.
    assert peak_memory_estimate(graph, {"s0": s0}) == 2 * big + max(big + small, big + 2 * small)


# ---------------------------------------------------------------- random graphs


def random_graph(seed: int) -> str:
    """Kernels, views and externs over [s0, 8] tensors, with random dependences."""
    rng = random.Random(seed)
    t, v = "!fusec.tensor<[s0, 8], f32>", "!fusec.tensor<[s0], f32>"
    values = [("%a", t), ("%b", t), ("%c", t)]
    lines = []
    for i in range(rng.randint(6, 14)):
        kind = rng.random()
        src, st = rng.choice(values)
        name = f"%v{i}"
        if kind < 0.45 or st == v:
            other, ot = rng.choice([x for x in values if x[1] == st])
            fn = rng.choice(["add", "mul", "sub", "maximum"])
            lines.append(f'{name} = fusec.pointwise "{fn}" {src}, {other} : ({st}, {ot}) -> {st}')
            values.append((name, st))
        elif kind < 0.75:
            red = rng.choice(["sum", "max", "min"])
            lines.append(f'{name} = fusec.reduce "{red}" {src} dims [1] : {t} -> {v}')
            values.append((name, v))
        elif kind < 0.85:
            lines.append(f'{name}:1 = fusec.extern "aten.neg.default"({src}) : ({t}) -> ({t})')
            values.append((f"{name}#0", t))
        else:
            lines.append(f"{name} = fusec.reshape {src} : {t} -> !fusec.tensor<[s0, 2, 4], f32>")
            lines.append(f"{name}b = fusec.reshape {name} : !fusec.tensor<[s0, 2, 4], f32> -> {t}")
            values.append((f"{name}b", t))
    outs = rng.sample(values[3:], k=min(len(values) - 3, rng.randint(1, 4)))
    body = "\n    ".join(lines)
    return f"""
builtin.module {{
  fusec.graph @r(%a : {t}, %b : {t}, %c : {t}) -> ({", ".join(o[1] for o in outs)}) symbols(s0 in [2, inf]) {{
    {body}
    fusec.output {", ".join(o[0] for o in outs)} : {", ".join(o[1] for o in outs)}
  }}
}}"""


def _reaches(src: F.KernelOp, dst: F.KernelOp, graph: F.GraphOp) -> bool:
    work, seen = [src], set()
    while work:
        op = work.pop()
        for r in op.results:
            for use in r.uses:
                user = use.operation
                while user.parent_op() is not graph:
                    user = user.parent_op()
                if user is dst:
                    return True
                if id(user) not in seen:
                    seen.add(id(user))
                    work.append(user)
    return False


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs_keep_meaning_dependences_and_peak_memory(seed, monkeypatch):
    fast = combo_grouping.Schedule.live_after_move

    def checked(self, pa, pb, merged, s, lo, hi):  # the incremental liveness equals the recomputed one
        reduced = [n for i, n in enumerate(self.nodes) if i not in (pa, pb)]
        order = reduced[:s] + [merged] + reduced[s:]
        got = fast(self, pa, pb, merged, s, lo, hi)
        assert got == self.live(lo, hi, order)
        return got

    monkeypatch.setattr(combo_grouping.Schedule, "live_after_move", checked)
    text = random_graph(seed)
    before, after, _ = run_grouping(text, ComboGrouping(max_subkernels=4))
    check_equivalent(before, after, {"s0": 5}, seed=seed)
    # Members of a combo were independent in the graph before grouping.
    kernels = {k.sym_name.data: k for k in before.walk() if isinstance(k, F.KernelOp)}
    graph = F.find_graph(before)
    for combo in combos(after):
        members = [kernels[n] for n in names(combo.kernels)]
        for x in members:
            for y in members:
                assert x is y or not _reaches(x, y, graph), (seed, names(members))
    for s0 in (2, 7, 300):
        assert peak_memory_estimate(F.find_graph(after), {"s0": s0}) <= peak_memory_estimate(graph, {"s0": s0})


@pytest.mark.parametrize("seed", range(6))
def test_precomputed_reachability_equals_the_walk(seed):
    """The dependence remark names members from bitsets; they agree with a def-use walk for every pair."""
    from fusec.passes.combo_schedule import depends

    module = parse(random_graph(seed))
    apply_passes(module, FormKernels())
    graph = F.find_graph(module)
    grouper = combo_grouping._GraphGrouper(ComboGrouping(), graph)
    ops = [op for op in graph.block.ops if not isinstance(op, F.OutputOp)]
    for a in ops:
        for b in ops:
            if a is not b:
                assert grouper._linked(a, b) == (depends(a, b) or depends(b, a)), (seed, a.name, b.name)


# ---------------------------------------------------------------- hints, options, benchmark hook


def test_a_symbol_without_hint_uses_the_default_and_says_so():
    text = SEED.replace("s0 in [2, inf]", "s0 in [1, inf]")
    _, _, log = run_grouping(text, ComboGrouping(max_subkernels=1))
    assert log.remarks and all(r.code == "limit-max-subkernels" for r in log.remarks)
    assert all(r.data["defaulted_size_hints"] == {"s0": DEFAULT_SIZE_HINT} for r in log.remarks)
    _, _, log = run_grouping(SEED, ComboGrouping(max_subkernels=1))  # lower bound 2 is a hint
    assert all("defaulted_size_hints" not in r.data and r.data["size_hints"] == {"s0": 2} for r in log.remarks)


def test_options_from_a_pipeline_spec():
    (p,) = parse_pipeline_spec('combo-grouping{max-subkernels=3 max-args=20 sm-count=108 size-hints="s0=64","s1=8" benchmark=true}')
    assert (p.max_subkernels, p.max_args, p.sm_count, p.size_hints, p.benchmark) == (3, 20, 108, ("s0=64", "s1=8"), True)
    with pytest.raises(PipelineError, match="size hint 's0:64' is not of the form SYMBOL=INTEGER"):
        parse_pipeline_spec('combo-grouping{size-hints="s0:64"}')


def test_benchmark_without_cuda_is_skipped_with_a_remark(monkeypatch):
    monkeypatch.setattr(combo_grouping, "cuda_available", lambda: False)
    _, after, log = run_grouping(SEED, ComboGrouping(benchmark=True))
    assert len(combos(after)) == 1
    assert [r.code for r in log.remarks] == ["benchmark-skipped"]


def test_benchmark_on_a_gpu_keeps_the_faster(monkeypatch):
    timed = []

    def timer(kernels, hints):
        timed.append(names(kernels))
        return 10.0, 20.0  # the combo is slower

    monkeypatch.setattr(combo_grouping, "cuda_available", lambda: True)
    monkeypatch.setattr(combo_grouping, "benchmark_timer", lambda: timer)
    before, after, log = run_grouping(SEED, ComboGrouping(benchmark=True))
    assert timed == [["fusec_red_sum_0", "fusec_red_max_1", "fusec_red_min_2", "fusec_red_sum_3"]]
    assert not combos(after) and [r.code for r in log.remarks] == ["benchmark-slower"]
    check_equivalent(before, after, {"s0": 3})
    monkeypatch.setattr(combo_grouping, "benchmark_timer", lambda: lambda kernels, hints: (10.0, 5.0))
    _, after, _ = run_grouping(SEED, ComboGrouping(benchmark=True))
    assert len(combos(after)) == 1


def test_running_twice_changes_nothing_more():
    _, after, _ = run_grouping(SEED)
    text = print_ir(after)
    apply_passes(after, ComboGrouping())
    assert print_ir(after) == text


def test_interpreter_runs_combos_on_float64_too():
    text = SEED.replace("f32", "f64")
    before, after, _ = run_grouping(text)
    inputs = random_inputs(before, {"s0": 4})
    out = interpreter.run(after, inputs)
    assert out[0].dtype == torch.float64
    torch.testing.assert_close(out[1], inputs[1].amax(1))
