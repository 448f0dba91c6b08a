"""Bad and unusual input to compiled code (issue 11.2, issue 14.3): one clear exception naming the culprit, and
eager's answers for NaN, Inf, empty and 0-d tensors and Python scalars."""

from __future__ import annotations

import inspect
import re
import warnings
from dataclasses import dataclass

import pytest
import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from fusec.analysis.bind_plan import InputMismatch
from fusec.dialects import fusec as F
from fusec.pipeline import parse_module, run_pipeline
from fusec.registry import PASSES, make_context
from fusec.runtime import InputTypeMismatch, compile_module

pytestmark = [pytest.mark.usefixtures("fresh_dynamo"),  # tests/conftest.py
              pytest.mark.filterwarnings("error:fusec. graph .* runs with torch")]

NAN, INF = float("nan"), float("inf")
ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
DEVICES = ["cpu", pytest.param("cuda", marks=ON_GPU)]  # NaN rules differ between the interpreter and GPU code

GRAPH = """\
fusec.graph @g(%a : !fusec.tensor<[s0, 8], f32>, %b : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
  %s = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[s0, 8], f32> -> !fusec.tensor<[s0], f32>
  %o = fusec.pointwise "add" %s, %b : (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>) -> !fusec.tensor<[s0], f32>
  fusec.output %o : !fusec.tensor<[s0], f32>
}
"""


def compiled_graph(input_checks: str = "all"):
    ctx = make_context()
    module = parse_module(ctx, GRAPH)
    run_pipeline(ctx, module, "form-kernels")
    return compile_module(module, {"s0": 4}, input_checks=input_checks)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ---------------------------------------------------------------- a compiled graph called with the wrong inputs


@pytest.mark.parametrize("inputs, error, message", [
    (lambda: [randn(3, 8)], InputMismatch, "@g takes 2 tensors, got 1"),
    (lambda: [randn(3, 8, dtype=torch.float64), randn(3)], InputMismatch,
     "@g: input 0 must be torch.float32 of shape [3, 8] (bound from the inputs' sizes), got torch.float64 of shape [3, 8]"),
    (lambda: [randn(3, 8), randn(5)], InputMismatch,
     "@g: input 1 must be torch.float32 of shape [3] (bound from the inputs' sizes), got torch.float32 of shape [5]"),
    (lambda: [randn(3, 8), randn(3, 1)], InputMismatch,
     "@g: input 1 must be torch.float32 of shape [3] (bound from the inputs' sizes), got torch.float32 of shape [3, 1]"),
    (lambda: [randn(3, 8), 2.0], InputTypeMismatch, "@g: input 1 must be a torch.float32 tensor, got float 2.0"),
    (lambda: [None, randn(3)], InputTypeMismatch, "@g: input 0 must be a torch.float32 tensor, got NoneType None"),
], ids=["count", "dtype", "symbol", "rank", "python-float", "none"])
def test_a_compiled_graph_names_the_input_that_contradicts_its_types(inputs, error, message):
    with pytest.raises(error) as info:
        compiled_graph()(inputs())
    assert str(info.value) == message


@pytest.mark.parametrize("inputs, error, message", [
    (lambda: [randn(3, 8), 2.0], InputTypeMismatch, "@g: input 1 must be a torch.float32 tensor, got float 2.0"),
    (lambda: [randn(3, 8), "x"], InputTypeMismatch, "@g: input 1 must be a torch.float32 tensor, got str 'x'"),
    (lambda: [randn(3, 8)], InputMismatch, "@g takes 2 tensors, got 1"),
], ids=["python-float", "str", "count"])
def test_a_graph_that_trusts_its_caller_still_names_the_input_when_it_fails(inputs, error, message):
    """The backend's graphs leave shapes to Dynamo's guards (input_checks="alignment"); called directly with an
    input that makes the launcher fail, the failure is the clear message, not an AttributeError inside it."""
    with pytest.raises(error) as info:
        compiled_graph("alignment")(inputs())
    assert str(info.value) == message
    assert info.value.__context__ is None or info.value.__suppress_context__  # no internal error chained above it


def test_input_mismatch_is_a_value_error_and_a_non_tensor_also_a_type_error():
    assert issubclass(InputMismatch, ValueError) and issubclass(InputTypeMismatch, TypeError)


def test_check_inputs_names_a_contradicting_symbol_without_running():
    compiled = compiled_graph("alignment")
    with pytest.raises(InputMismatch, match=re.escape("@g: input 1 dim 0 is 5, but its type says s0 = 3 (s0 = 3 from input 0 dim 0)")):
        compiled.check_inputs([randn(3, 8), randn(5)])
    with pytest.raises(InputMismatch, match=re.escape("@g: input 0 must be torch.float32, got torch.int32 (shape [3, 8])")):
        compiled.check_inputs([randn(3, 8).to(torch.int32), randn(3)])
    compiled.check_inputs([randn(3, 8), randn(3)])


# ---------------------------------------------------------------- failures inside a pass name the user's line


@dataclass(frozen=True)
class RefuseMul(ModulePass):
    name = "test-refuse-mul"

    def apply(self, ctx, op: ModuleOp) -> None:
        for pointwise in op.walk():
            if isinstance(pointwise, F.PointwiseOp) and pointwise.fn.data == "mul":
                raise PassFailedException("cannot handle mul")


@dataclass(frozen=True)
class CrashOnMul(ModulePass):
    name = "test-crash-mul"

    def apply(self, ctx, op: ModuleOp) -> None:
        for pointwise in op.walk():
            if isinstance(pointwise, F.PointwiseOp) and pointwise.fn.data == "mul":
                _ = {}[pointwise.fn.data]


@pytest.fixture
def failing_passes(monkeypatch):
    for cls in (RefuseMul, CrashOnMul):
        monkeypatch.setitem(PASSES, cls.name, lambda cls=cls: cls)


def user_program(x):
    y = x + 1
    return torch.sin(y) * 3


def user_line() -> tuple[int, str]:
    lines, first = inspect.getsourcelines(user_program)
    offset = next(i for i, line in enumerate(lines) if "* 3" in line)
    return first + offset, lines[offset].rstrip("\n")


def compile_failure(pipeline: str) -> str:
    with pytest.raises(Exception) as info:
        torch.compile(user_program, backend="fusec", options={"pipeline": pipeline})(randn(4))
    return str(info.value)


def test_a_pass_refusal_names_the_fx_node_and_the_users_line(failing_passes):
    line, text = user_line()
    message = compile_failure("test-refuse-mul")
    col = text.index("torch.sin") + 1
    assert (f"PipelineError: pass 'test-refuse-mul' failed: cannot handle mul\n"
            f"  at: %0 = fusec.pointwise \"mul\" %1, %2 : (!fusec.tensor<[4], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[4], f32>\n"
            f"  from FX node 'mul' at {__file__}:{line}:{col}\n"
            f"    {text}\n"
            f"    {' ' * (col - 1)}^") in message


def test_a_pass_crash_names_the_pass_the_fx_node_and_the_users_line(failing_passes):
    line, text = user_line()
    message = compile_failure("test-crash-mul")
    col = text.index("torch.sin") + 1
    assert (f"PassCrash: while running pass 'test-crash-mul' on 'fusec.pointwise' op (FX node 'mul' at {__file__}:{line}:{col}): "
            f"KeyError: 'mul'\n    {text}\n    {' ' * (col - 1)}^") in message


def test_a_pipeline_file_error_under_torch_compile_names_file_line_column(tmp_path):
    pipe = tmp_path / "mine.pipeline"
    pipe.write_text("form-kernels\n# fusion next\nvertical-fusion{max-ops=lots}\n")
    message = compile_failure(str(pipe))
    assert (f"{pipe}:3:17: pass 'vertical-fusion': option 'max-ops' expects int, got lots\n"
            "vertical-fusion{max-ops=lots}\n"
            "                ^") in message


def test_a_lowering_failure_names_the_op_and_its_line():
    ctx = make_context()
    module = parse_module(ctx, GRAPH, "lower_me.mlir")  # no form-kernels: graph ops cannot reach the launcher
    with pytest.raises(ValueError, match="fusec.reduce cannot reach the launcher") as info:
        compile_module(module, {"s0": 4})
    assert info.value.__notes__ == [
        "while lowering 'fusec.reduce' op (lower_me.mlir:2:3)",
        GRAPH.splitlines()[1] + "\n  ^",
    ]


# ---------------------------------------------------------------- NaN and Inf as eager


def compile_and_compare(fn, *inputs, dynamic=False, exact=True):
    """fn compiled with fusec equals eager (dtype, shape, NaN where eager has NaN; values bit for bit, or within
    torch's tolerance where libdevice and torch's own math differ by an ulp); no graph fell back to eager."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(fn, backend="fusec", dynamic=dynamic)(*inputs)
    assert not [w for w in caught if "runs with torch" in str(w.message)], [str(w.message) for w in caught]
    want = fn(*inputs)
    got, want = (x if isinstance(x, tuple) else (x,) for x in (got, want))
    for g, w in zip(got, want, strict=True):
        assert (g.dtype, g.shape, g.device) == (w.dtype, w.shape, w.device)
        torch.testing.assert_close(g, w, equal_nan=True, **({"rtol": 0, "atol": 0} if exact else {}))


def special_values(rows: int = 6, cols: int = 9, seed: int = 0) -> torch.Tensor:
    """Random values with rows that test the rules: all -inf, NaN beside +inf, tied +infs, all NaN, tied maxima,
    then NaN, +inf and -inf scattered."""
    x = randn(rows, cols, seed=seed)
    x[0] = -INF
    x[1, 3], x[1, 1] = NAN, INF
    x[2, 2], x[2, 5] = INF, INF
    x[3] = NAN
    x[4, 4], x[4, 6] = 9.0, 9.0
    g = torch.Generator().manual_seed(seed + 1)
    flat = x[5:].view(-1)
    spots = torch.randperm(flat.numel(), generator=g)[:3 * max(flat.numel() // 8, 1)].chunk(3)
    for where, value in zip(spots, (NAN, INF, -INF), strict=True):
        flat[where] = value
    return x


POINTWISE = {
    "arith": lambda x: (x * 2 + 1, x - x, x / (x - x), -x, x.abs()),
    "transcendental": lambda x: (torch.exp(x), torch.log(x), torch.sqrt(x), torch.tanh(x), torch.sigmoid(x)),
    "compare-select": lambda x: (torch.relu(x), torch.clamp(x, -1, 1), torch.maximum(x, x.flip(-1)),
                                 torch.minimum(x, x.flip(-1)), torch.where(x > 0, x, 0.0), x == x),
    "classify": lambda x: (torch.isnan(x), torch.isinf(x), torch.isfinite(x), torch.nan_to_num(x)),
}
REDUCTIONS = {
    "sum-mean-prod": lambda x: (x.sum(-1), x.mean(-1), x.prod(-1), x.sum(0)),
    "max-min": lambda x: (x.amax(-1), x.amin(-1), x.max(-1).values, x.min(-1).values, x.amax(0)),
    "argmax-argmin": lambda x: (x.argmax(-1), x.argmin(-1), x.max(-1).indices, x.min(-1).indices, x.argmax(0)),
    "softmax": lambda x: (torch.softmax(x, -1), torch.log_softmax(x, -1)),
    "var": lambda x: (x.var(-1),),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", POINTWISE)
def test_nan_and_inf_propagate_through_pointwise_ops_as_eager(name, device):
    compile_and_compare(POINTWISE[name], special_values().to(device), exact=name != "transcendental")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_nan_and_inf_propagate_through_reductions_as_eager(name, dynamic, device):
    """max/min of a row with a NaN is NaN, argmax/argmin point at its first NaN, ties give the first index.
    Static sizes give persistent reductions (whole rows), dynamic ones looped reductions (rows in blocks)."""
    compile_and_compare(REDUCTIONS[name], special_values().to(device), dynamic=dynamic, exact=name not in ("softmax", "var"))


# ---------------------------------------------------------------- empty and 0-d tensors, Python scalars


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (0,)], ids=str)
def test_zero_size_tensors(shape, dynamic, device):
    compile_and_compare(lambda x: (x * 2 + 1, x.sum(-1), x.mean(-1), x.prod(-1), x.sum(0)), randn(*shape).to(device),
                        dynamic=dynamic)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_zero_dim_tensors(dynamic):
    compile_and_compare(lambda x, y: (x * y, (x + 1).exp(), x.sum(), x.amax(), x.argmax(), y.sum() * x),
                        randn(seed=1), randn(3, seed=2), dynamic=dynamic, exact=False)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name, fn, args", [
    ("float", lambda x, a: x * a + a, lambda: (randn(5), 2.5)),
    ("int", lambda x, n: x.reshape(n, -1) + n, lambda: (randn(12), 3)),
    ("bool", lambda x, b: x * 2 if b else x, lambda: (randn(4), True)),
    ("int-tensor", lambda x, n: (x + n, x.sum() * n, x // n), lambda: (torch.arange(-6, 6), 7)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_python_scalars_as_inputs(name, fn, args, dynamic):
    compile_and_compare(fn, *args(), dynamic=dynamic)


# ---------------------------------------------------------------- more than 2**31 elements (int64 indexing)


def _free_gpu_bytes() -> int:
    return torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(_free_gpu_bytes() < 24 * 2**30, reason="needs a CUDA GPU with 24 GiB free")
def test_more_than_2_to_the_31_elements_index_with_int64():
    rows, cols = 2**19 + 1, 2**12  # 2**31 + 4096 elements: past int32 by one row
    x = torch.randint(-100, 100, (rows * cols,), dtype=torch.int8, device="cuda",
                      generator=torch.Generator("cuda").manual_seed(0))

    def fn(x):
        y = x * 3 + 1  # int8 wraps as eager
        return y, x.view(rows, cols).sum(-1)

    got_y, got_s = torch.compile(fn, backend="fusec")(x)
    want_y, want_s = fn(x)
    assert got_y.dtype == want_y.dtype and got_s.dtype == want_s.dtype
    assert torch.equal(got_y[-2 * cols:], want_y[-2 * cols:]) and torch.equal(got_y[:cols], want_y[:cols])
    assert torch.equal(got_y, want_y)
    assert torch.equal(got_s, want_s)
