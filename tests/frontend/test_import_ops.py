"""Every aten op the importer maps: it imports natively, and the reference interpreter agrees with eager."""

import pytest
from corpus import CASES, DYNAMIC_CASES, randn
from import_helpers import assert_matches_eager, import_and_run, trace

from fusec.dialects import fusec as F

DESIGNED_EXTERNS = {"aten.mm.default", "aten.bmm.default"}


def _ops_in(gm) -> set[str]:
    return {n.target._opname for n in gm.graph.nodes if n.op == "call_function" and hasattr(n.target, "_opname")}


@pytest.mark.parametrize("name, fn, make_inputs, aten_op", CASES, ids=[c[0] for c in CASES])
def test_op_imports_natively_and_matches_eager(name, fn, make_inputs, aten_op):
    inputs = make_inputs()
    assert aten_op in _ops_in(trace(fn, *inputs)), f"the traced graph does not exercise aten.{aten_op}"
    module, info, log, outputs = import_and_run(fn, *inputs)
    assert not log.remarks, log.text()
    externs = {op.target.data for op in module.walk() if isinstance(op, F.ExternOp)}
    assert externs <= DESIGNED_EXTERNS
    assert_matches_eager(outputs, fn(*inputs))


@pytest.mark.parametrize("name", DYNAMIC_CASES)
def test_op_imports_with_symbolic_sizes(name):
    _, fn, make_inputs, _ = next(c for c in CASES if c[0] == name)
    inputs = make_inputs()
    module, info, log, outputs = import_and_run(fn, *inputs, dynamic=True)
    assert info.symbols, "symbolic tracing should give size symbols"
    assert not log.remarks, log.text()
    assert_matches_eager(outputs, fn(*inputs))


def test_symbolic_graph_runs_at_other_sizes():
    fn = lambda x: (x[:, 1:] - x.mean(1, keepdim=True)).softmax(-1)  # noqa: E731
    gm = trace(fn, randn(4, 6), dynamic=True)
    from fusec.frontend.importer import import_graph
    from fusec.runtime import interpreter

    module, info = import_graph(gm, [randn(4, 6)])
    for shape in [(3, 5), (7, 2), (2, 9)]:
        x = randn(*shape, seed=3)
        outputs = interpreter.run(module, info.tensor_inputs([x]))
        assert_matches_eager(info.assemble_outputs(outputs, info.bind_symbols([x])), fn(x))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_python_number_applies_to_16_bit_arithmetic_at_fp32(dtype):
    """torch's GPU kernels read a number in add/sub/mul/div of fp16/bf16 tensors at fp32 (``x * 0.044715`` in bf16
    differs from ``x * bf16(0.044715)`` at 17% of elements): the importer makes it an f32 constant, and the
    interpreter, Triton's interpreter and the fp32 computation rounded once agree bit for bit.  A number that becomes
    a 16-bit value (``where``'s) keeps the tensor's type."""
    import torch

    dt = getattr(torch, dtype)
    x = torch.randn(4096, generator=torch.Generator().manual_seed(3)).mul(3).to(dt)

    def fn(x):
        return x * 0.044715, x / 0.3, 0.7 - x, torch.add(x, x, alpha=0.15), torch.where(x > 0, x, 0.1)

    module, _, log, outputs = import_and_run(fn, x)
    assert not log.remarks, log.text()
    constants = {op.value.data: op.result.type.element_type for op in module.walk() if isinstance(op, F.ConstantOp)}
    assert [constants[v] for v in (0.044715, 0.3, 0.7, 0.15)] == [F.F32] * 4
    assert constants[0.1] == F.ELEMENT_TYPES[dtype]
    wide = [fn(x.float())[i].to(dt) for i in range(4)] + [fn(x)[4]]
    compiled = torch.compile(fn, backend="fusec")(x)
    for i, want in enumerate(wide):
        assert torch.equal(outputs[i], want), f"interpreter, output {i}"
        assert torch.equal(compiled[i], want), f"fusec, output {i}"
    assert not torch.equal(wide[0], x * torch.tensor(0.044715, dtype=dt))  # the rounded number differs here
