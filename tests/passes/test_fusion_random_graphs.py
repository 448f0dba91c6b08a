"""vertical-fusion + reduction-fusion keep the meaning of random graphs (broadcasts, reductions over
either dim, transposes, externs), under both cost settings; the interpreter is the judge."""

import random

import pytest

from fusec.base import remarks
from fusec.passes.form_kernels import FormKernels
from fusec.passes.reduction_fusion import ReductionFusion
from fusec.passes.vertical_fusion import VerticalFusion
from fusec.runtime import interpreter
from fusec.testing import apply_passes, assert_same_results, graph_text, parse, print_ir, random_inputs

SHAPES = {"A": "s0, 8", "B": "8", "C": "s0, 1", "D": "1, 8", "E": "8, s0", "R": "s0"}
BROADCAST = {("A", "B"): "A", ("A", "C"): "A", ("A", "D"): "A", ("C", "D"): "A", ("C", "B"): "A", ("B", "D"): "D",
             **{(s, s): s for s in SHAPES}}
MM = '{out}:1 = fusec.extern "aten.mm.default"({a}, %w) : ({t}, !fusec.tensor<[8, 8], f32>) -> ({t})'


def T(shape: str) -> str:
    return f"!fusec.tensor<[{SHAPES[shape]}], f32>"


def random_graph(seed: int) -> str:
    rnd = random.Random(seed)
    values = [("%x", "A"), ("%y", "B"), ("%z", "C")]
    lines = []
    for n in range(rnd.randint(3, 14)):
        out, kind = f"%v{n}", rnd.random()
        if kind < 0.3:
            (a, s), fn = rnd.choice(values), rnd.choice(["sin", "tanh", "neg", "abs", "sigmoid", "exp"])
            lines.append(f'{out} = fusec.pointwise "{fn}" {a} : ({T(s)}) -> {T(s)}')
        elif kind < 0.6:
            a, sa = rnd.choice(values)
            partners = [(b, sb) for b, sb in values if (sa, sb) in BROADCAST]
            b, sb = rnd.choice(partners)
            s, fn = BROADCAST[(sa, sb)], rnd.choice(["add", "mul", "sub", "maximum"])
            lines.append(f'{out} = fusec.pointwise "{fn}" {a}, {b} : ({T(sa)}, {T(sb)}) -> {T(s)}')
        elif kind < 0.8:
            a = rnd.choice([v for v, s in values if s == "A"])
            dim, keep = rnd.choice([0, 1]), rnd.random() < 0.7
            s = ("C" if dim else "D") if keep else ("R" if dim else "B")
            kind_text, keep_text = rnd.choice(["sum", "max"]), " keepdim" if keep else ""
            lines.append(f'{out} = fusec.reduce "{kind_text}" {a} dims [{dim}]{keep_text} : {T("A")} -> {T(s)}')
        elif kind < 0.9:
            a, sa = rnd.choice([v for v in values if v[1] in ("A", "E")])
            s = "E" if sa == "A" else "A"
            lines.append(f"{out} = fusec.permute {a} [1, 0] : {T(sa)} -> {T(s)}")
        else:
            s = "A"
            lines.append(MM.format(out=out, a=rnd.choice([v for v, sv in values if sv == "A"]), t=T("A")))
        values.append((out, s))
    outs = rnd.sample(values[3:], min(len(values) - 3, rnd.randint(1, 3)))
    types = ", ".join(T(s) for _, s in outs)
    lines.append(f"fusec.output {', '.join(v for v, _ in outs)} : {types}")
    args = f"%x : {T('A')}, %y : {T('B')}, %z : {T('C')}, %w : !fusec.tensor<[8, 8], f32>"
    body = "\n".join("    " + line for line in lines)
    return graph_text(args, types, body)


@pytest.mark.parametrize("recompute_max_ops", [0, 8])
@pytest.mark.parametrize("seed", range(24))
def test_random_graph_keeps_its_meaning(seed, recompute_max_ops):
    text = random_graph(seed)
    module = parse(text)
    with remarks.collect():
        apply_passes(module, FormKernels(), VerticalFusion(recompute_max_ops=recompute_max_ops), ReductionFusion())
    fused = parse(print_ir(module))
    for size in (1, 4):
        inputs = random_inputs(fused, {"s0": size}, seed=seed)
        assert_same_results(interpreter.run(parse(text), inputs), interpreter.run(fused, inputs), equal_nan=True)
