"""Helpers for tests: parse/print IR text, random inputs for a graph, run passes, build graph IR text."""

from __future__ import annotations

import collections
import io
import json
from pathlib import Path

import torch
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from fusec.base import remarks, shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.dialects.fusec import Fusec, GraphOp, KernelOp
from fusec.runtime import interpreter


def context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Fusec)
    return ctx


def parse(text: str) -> ModuleOp:
    module = Parser(context(), text).parse_module()
    module.verify()
    return module


def print_ir(module) -> str:
    out = io.StringIO()
    Printer(out).print_op(module)
    return out.getvalue()


def random_inputs(module: ModuleOp | GraphOp, sizes: dict[str, int], seed: int = 0, device: str = "cpu") -> list[torch.Tensor]:
    """Random tensors for a graph's inputs (normal floats, small non-negative ints), sizes bound by ``sizes``."""
    graph = F.find_graph(module)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for arg in graph.block.args:
        shape = [shapes.evaluate(d, sizes) for d in tensor_type_of(arg).dims]
        dtype = F.torch_dtype(arg.type)
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=gen).to(dtype)
        elif dtype == torch.bool:
            t = torch.rand(shape, generator=gen) > 0.5
        else:
            t = torch.randint(0, 4, shape, generator=gen).to(dtype)
        out.append(t.to(device))
    return out


def apply_passes(module: ModuleOp, *passes) -> ModuleOp:
    from fusec.pipeline import check_structure

    ctx = context()
    for p in passes:
        p.apply(ctx, module)
        module.verify()
        check_structure(module, f"IR after pass '{p.name}'")  # what verifiers miss: uses by dropped ops
    return module


def assert_same_results(before: list[torch.Tensor], after: list[torch.Tensor], **tol) -> None:
    assert len(before) == len(after)
    for a, b in zip(before, after, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        torch.testing.assert_close(a, b, **tol)


def run_passes_checked(text: str, *passes, sizes=(1, 5, 17)) -> tuple[ModuleOp, list[remarks.Remark]]:
    """Parse ``text`` and run ``passes`` on it; check that the result prints and parses back and that the
    interpreter gives the same results before and after for s0 in ``sizes``. Returns (module, remarks)."""
    module = parse(text)
    with remarks.collect() as log:
        apply_passes(module, *passes)
    reparsed = parse(print_ir(module))
    for size in sizes:
        inputs = random_inputs(reparsed, {"s0": size}, seed=size)
        assert_same_results(interpreter.run(parse(text), inputs), interpreter.run(reparsed, inputs))
    return module, log.remarks


def kernels(module: ModuleOp | GraphOp) -> list[KernelOp]:
    """The kernels directly in the graph (not those inside a combo), in order."""
    return [op for op in F.find_graph(module).block.ops if isinstance(op, KernelOp)]


# ---------------------------------------------------------------- graph IR text


def dumped_launches_and_remarks(dump: Path) -> tuple[int, collections.Counter]:
    """Of the one graph dumped into ``dump``: the launches its final IR makes (kernels and combos) and its active
    remarks counted by ``"pass: code"``."""
    (graph_dir,) = [p for p in dump.iterdir() if p.is_dir()]
    last = sorted(graph_dir.glob("[0-9][0-9]-*.mlir"))[-1]
    (graph,) = [op for op in parse(last.read_text()).walk() if isinstance(op, F.GraphOp)]
    launches = [op for op in graph.block.ops if isinstance(op, (F.KernelOp, F.ComboOp))]
    log = json.loads((graph_dir / "remarks.json").read_text())
    return len(launches), collections.Counter(f"{r['pass_name']}: {r['code']}" for r in log if not r["superseded"])


def tensor_type(shape: str, dtype: str = "f32") -> str:
    """``!fusec.tensor<[shape], dtype>``; ``shape`` is the dims' text, e.g. ``"s0, 64"`` ("" for 0-d)."""
    return f"!fusec.tensor<[{shape}], {dtype}>"


def graph_text(args: str, outs: str, body: str, symbolic: bool = True) -> str:
    """A module holding ``fusec.graph @g(args) -> (outs)``, declaring ``s0 in [1, inf]`` when ``symbolic``.

    ``body`` is the graph's ops, ``fusec.output`` included, one per line."""
    syms = " symbols(s0 in [1, inf])" if symbolic else ""
    return f"builtin.module {{\n  fusec.graph @g({args}) -> ({outs}){syms} {{\n{body}\n  }}\n}}"


def variance_graph(shape: str, dim: int, symbols: str = "", n: str = "4096.0") -> str:
    """Batch norm's statistics: the mean, then the sum of squares around it (``n``: the row length as a float
    constant), over ``dim`` of a 2-D input; outputs the mean and the variance.  ``symbols`` declares a size symbol."""
    t = tensor_type(shape)
    k = tensor_type(", ".join("1" if i == dim else d for i, d in enumerate(shape.split(", "))))
    c = tensor_type("")
    text = graph_text(f"%x : {t}", f"{k}, {k}", f"""
    %s = fusec.reduce "sum" %x dims [{dim}] keepdim : {t} -> {k}
    %n = fusec.constant {n} : {c}
    %m = fusec.pointwise "div" %s, %n : ({k}, {c}) -> {k}
    %d = fusec.pointwise "sub" %x, %m : ({t}, {k}) -> {t}
    %q = fusec.pointwise "mul" %d, %d : ({t}, {t}) -> {t}
    %v = fusec.reduce "sum" %q dims [{dim}] keepdim : {t} -> {k}
    %w = fusec.pointwise "div" %v, %n : ({k}, {c}) -> {k}
    fusec.output %m, %w : {k}, {k}""", symbolic=bool(symbols))
    return text.replace("s0 in [1, inf]", symbols) if symbols else text


def seed_graph(rows: str = "1024", symbols: str = "") -> str:
    """The seed example: sum, max, min and sum over dim 1 of four [rows, 512] f32 inputs (independent reductions).

    ``symbols`` is the text of the symbol declarations, e.g. ``"s0 in [2, inf]"``, when ``rows`` uses one."""
    t, v = f"!fusec.tensor<[{rows}, 512], f32>", f"!fusec.tensor<[{rows}], f32>"
    sym = f" symbols({symbols})" if symbols else ""
    return f"""
builtin.module {{
  fusec.graph @seed(%t1 : {t}, %t2 : {t}, %t3 : {t}, %t4 : {t}) -> ({v}, {v}, {v}, {v}){sym} {{
    %a = fusec.reduce "sum" %t1 dims [1] : {t} -> {v}
    %b = fusec.reduce "max" %t2 dims [1] : {t} -> {v}
    %c = fusec.reduce "min" %t3 dims [1] : {t} -> {v}
    %d = fusec.reduce "sum" %t4 dims [1] : {t} -> {v}
    fusec.output %a, %b, %c, %d : {v}, {v}, {v}, {v}
  }}
}}"""


# An SGD step with weight decay, one 1-d parameter a size: graph @sgd(%p0, %g0, %p1, %g1, ...) -> (%o0, %o1, ...);
# the sizes are expressions over s0 and s1.
_SGD_SYMBOLS = "symbols(s0 in [2, inf], s1 in [2, inf])"


def sgd_graph(sizes: list[str]) -> str:
    """p - lr * (g + wd * p) for a 1-d parameter of each size, as graph ops (form-kernels makes four kernels each)."""
    args, outs, lines = [], [], []
    for i, n in enumerate(sizes):
        t = f"!fusec.tensor<[{n}], f32>"
        args += [f"%p{i} : {t}", f"%g{i} : {t}"]
        lines += [f'%wp{i} = fusec.pointwise "mul" %p{i}, %wd : ({t}, !fusec.tensor<[], f32>) -> {t}',
                  f'%s{i} = fusec.pointwise "add" %g{i}, %wp{i} : ({t}, {t}) -> {t}',
                  f'%u{i} = fusec.pointwise "mul" %s{i}, %lr : ({t}, !fusec.tensor<[], f32>) -> {t}',
                  f'%o{i} = fusec.pointwise "sub" %p{i}, %u{i} : ({t}, {t}) -> {t}']
        outs.append((f"%o{i}", t))
    body = "\n    ".join(lines)
    return f"""
builtin.module {{
  fusec.graph @sgd({", ".join(args)}) -> ({", ".join(t for _, t in outs)}) {_SGD_SYMBOLS} {{
    %wd = fusec.constant 0.1 : !fusec.tensor<[], f32>
    %lr = fusec.constant 0.01 : !fusec.tensor<[], f32>
    {body}
    fusec.output {", ".join(o for o, _ in outs)} : {", ".join(t for _, t in outs)}
  }}
}}"""


def sgd_kernel(i: int, n: str) -> str:
    """One fused update p - lr * (g + wd * p) of parameter ``i`` over n elements (as vertical fusion makes it)."""
    t = f"!fusec.tensor<[{n}], f32>"
    return f"""
    %o{i} = fusec.kernel @fusec_poi_sgd_{i} [{n}] (%p{i}, %g{i}) : ({t}, {t}) -> ({t}) {{
    ^bb0(%p: {t}, %g: {t}, %out: {t}):
      %pv = fusec.load %p[x] : {t}
      %gv = fusec.load %g[x] : {t}
      %wd = fusec.constant 0.1 : f32
      %lr = fusec.constant 0.01 : f32
      %t0 = fusec.pointwise "mul" %wd, %pv : (f32, f32) -> f32
      %t1 = fusec.pointwise "add" %gv, %t0 : (f32, f32) -> f32
      %t2 = fusec.pointwise "mul" %lr, %t1 : (f32, f32) -> f32
      %t3 = fusec.pointwise "sub" %pv, %t2 : (f32, f32) -> f32
      fusec.store %t3, %out[x] : {t}
    }}"""


def sgd_kernels(sizes: list[str]) -> str:
    """The same update as ``sgd_graph``, one ``sgd_kernel`` a parameter."""
    types = [f"!fusec.tensor<[{n}], f32>" for n in sizes]
    args = ", ".join(f"%p{i} : {t}, %g{i} : {t}" for i, t in enumerate(types))
    body = "".join(sgd_kernel(i, n) for i, n in enumerate(sizes))
    outs = ", ".join(f"%o{i}" for i in range(len(sizes)))
    return f"""
builtin.module {{
  fusec.graph @sgd({args}) -> ({", ".join(types)}) {_SGD_SYMBOLS} {{{body}
    fusec.output {outs} : {", ".join(types)}
  }}
}}"""
