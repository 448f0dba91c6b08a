"""Ops that eager computes off the graph's device (CPU factory ops, CPU scalar math beside GPU tensors) run as
torch calls there.  Traced with fake CUDA tensors, so it runs without a GPU; the GPU run is in
tests/backend/test_semantics.py."""

import torch
from corpus import relative_position_bias
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.frontend.decompositions import fusec_decompositions
from fusec.frontend.importer import import_graph


def fn(x):
    return x * 2 + 1, torch.zeros(3) + 3, torch.arange(4) * 2, x.sum()


def test_cpu_results_beside_gpu_tensors_run_as_torch_calls_on_the_cpu():
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(5, 4, device="cuda")
    gm = make_fx(fn, tracing_mode="fake")(x)
    with remarks.collect() as log:
        module, info = import_graph(gm, [x])
    assert info.device.type == "cuda"
    externs = [op.target.data for op in module.walk() if isinstance(op, F.ExternOp)]
    assert externs == ["aten.zeros.default", "aten.add.Tensor", "aten.arange.default", "aten.mul.Tensor"]
    moved = [r for r in log.remarks if r.code == "extern-device"]
    assert len(moved) == 4 and all("on cpu" in r.message for r in moved)
    assert not info.externs  # placed, not fallen back: nothing is reported as a fallback
    # The GPU tensor's arithmetic and its sum stay native (kernels on the graph's device).
    assert [op.fn.data for op in module.walk() if isinstance(op, F.PointwiseOp)] == ["mul", "add"]
    assert [op.kind.data for op in module.walk() if isinstance(op, F.ReduceOp)] == ["sum"]


def with_a_dead_cpu_scalar(x):
    return x * 2 + 1, torch.full((2, 2), 3.0) * torch.tensor(2.0), x.sum()


def test_no_gpu_kernel_writes_into_the_storage_of_a_cpu_result():
    """The CPU scalar ``torch.tensor(2.0)`` is dead after its multiply, and is a [] f32 as ``x.sum()`` is:
    reuse-buffers once gave the sum kernel its storage, a CPU pointer a GPU kernel cannot write (Triton: "Pointer
    argument cannot be accessed from Triton (cpu tensor?)").  Externs computing off the graph's device are
    marked in the IR, and their storage is no kernel's."""
    from fusec.pipeline import default_pipeline_spec, run_pipeline
    from fusec.registry import make_context

    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(5, 4, device="cuda")
    gm = make_fx(with_a_dead_cpu_scalar, tracing_mode="fake")(x)
    module, info = import_graph(gm, [x])
    marked = {op.target.data: op.attributes.get(F.DEVICE_MARK) for op in module.walk() if isinstance(op, F.ExternOp)}
    assert marked and all(m is not None and m.data == "cpu" for m in marked.values()), marked
    run_pipeline(make_context(), module, default_pipeline_spec())
    off_device = [op for op in module.walk() if isinstance(op, F.ExternOp)]
    assert all("fusec.storage" not in op.attributes for op in off_device)
    kernel_storages = [op.attributes["fusec.storage"] for op in module.walk()
                       if isinstance(op, F.KernelOp) and "fusec.storage" in op.attributes]
    assert len(kernel_storages) == 2


def test_a_cpu_tensor_built_from_sizes_for_a_gpu_gather_is_computed_on_the_gpu():
    """180 torch calls on the CPU a BEiT layer (4 ms a call on an H200, 3x eager's time), then a copy to the GPU: the
    index depends on sizes only and only a GPU gather reads it, so it is computed there, by kernels."""
    with FakeTensorMode(allow_non_fake_inputs=True):
        table = torch.empty(38, 4, device="cuda")
    traced = torch.func.functionalize(relative_position_bias, remove="mutations")
    gm = make_fx(traced, tracing_mode="fake", decomposition_table=fusec_decompositions())(table)
    assert sum(n.op == "call_function" for n in gm.graph.nodes) > 40  # the CPU chain eager runs
    with remarks.collect() as log:
        module, info = import_graph(gm, [table])
    assert not [r for r in log.remarks if r.code == "extern-device"]
    externs = [op for op in module.walk() if isinstance(op, F.ExternOp)]
    assert [op.target.data for op in externs] == ["aten._to_copy.default"]  # the copy to the device, of a device value
    assert F.DEVICE_MARK not in externs[0].attributes
    assert sum(isinstance(op, F.PointwiseOp) for op in module.walk()) > 20  # the index arithmetic, natively
    assert info.constants and not any(info.constants_stay)  # the lifted constant moves to the device with its readers


def test_a_cpu_chain_something_on_the_cpu_reads_stays_there_with_all_it_reads():
    """A value the graph returns (eager returns it on the CPU) keeps its whole chain on the CPU, and so does a
    constant it reads: a native op never reads a CPU value, and a torch call on the CPU never a device one."""
    def fn(table):
        index = torch.arange(4) * torch.tensor(3)
        return torch.ops.aten.index.Tensor(table, [index.to(table.device)]) * 2, index + 1

    with FakeTensorMode(allow_non_fake_inputs=True):
        table = torch.empty(12, 4, device="cuda")
    gm = make_fx(torch.func.functionalize(fn, remove="mutations"), tracing_mode="fake")(table)
    module, info = import_graph(gm, [table])
    on_cpu = {op.target.data for op in module.walk() if isinstance(op, F.ExternOp) and F.DEVICE_MARK in op.attributes}
    assert {"aten.arange.default", "aten.mul.Tensor", "aten.add.Tensor"} <= on_cpu, on_cpu
    assert info.constants_stay == (True,)


def scaled(x):
    # a CPU scalar from a size, as torch 2.11 traces q.shape[-1] ** -0.5 under dynamic=True
    return x * torch.scalar_tensor(x.shape[-1], dtype=torch.float64).pow(-0.5).to(torch.float32)


def scaled_and_returned(x):
    s = torch.scalar_tensor(x.shape[-1], dtype=torch.float64).pow(-0.5)
    return x * s.to(torch.float32), s


def _import_with_fake_cuda(fn):
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(5, 4, device="cuda")
    gm = make_fx(fn, tracing_mode="fake")(x)
    with remarks.collect() as log:
        module, info = import_graph(gm, [x])
    return module, log


def test_a_cpu_scalar_only_gpu_ops_read_is_computed_on_the_gpu():
    module, log = _import_with_fake_cuda(scaled)
    assert not [op for op in module.walk() if isinstance(op, F.ExternOp)]
    assert not [r for r in log.remarks if r.code == "extern-device"]
    assert "pow" in [op.fn.data for op in module.walk() if isinstance(op, F.PointwiseOp)]


def test_a_cpu_scalar_the_graph_returns_stays_on_the_cpu():
    module, log = _import_with_fake_cuda(scaled_and_returned)
    externs = [op.target.data for op in module.walk() if isinstance(op, F.ExternOp)]
    assert "aten.pow.Tensor_Scalar" in externs  # eager returns it on the CPU
    assert all("on cpu" in r.message for r in log.remarks if r.code == "extern-device")


def bias_corrected(x, step):
    # an optimizer's update with its step count kept on the CPU (state made by an eager step, or loaded)
    return x * (1 - 0.9 ** step) + step


def test_a_cpu_scalar_argument_only_gpu_ops_read_is_copied_there_once():
    with FakeTensorMode(allow_non_fake_inputs=True):
        x, step = torch.empty(5, 4, device="cuda"), torch.empty(())
    gm = make_fx(bias_corrected, tracing_mode="fake", decomposition_table=fusec_decompositions())(x, step)
    with remarks.collect() as log:
        module, _ = import_graph(gm, [x, step])
    externs = [op for op in module.walk() if isinstance(op, F.ExternOp)]
    assert [op.target.data for op in externs] == ["aten._to_copy.default"]  # one copy to the device, nothing else
    assert not [r for r in log.remarks if r.code == "extern-device"]
    assert [op.fn.data for op in module.walk() if isinstance(op, F.PointwiseOp)] == ["pow", "sub", "mul", "add"]


def step_returned(x, step):
    return x * (1 - 0.9 ** step), step + 1


def test_a_cpu_scalar_argument_the_graph_also_returns_work_of_stays_on_the_cpu():
    with FakeTensorMode(allow_non_fake_inputs=True):
        x, step = torch.empty(5, 4, device="cuda"), torch.empty(())
    gm = make_fx(step_returned, tracing_mode="fake", decomposition_table=fusec_decompositions())(x, step)
    module, _ = import_graph(gm, [x, step])
    assert "aten._to_copy.default" not in [op.target.data for op in module.walk() if isinstance(op, F.ExternOp)]


def test_a_native_op_reading_a_value_left_on_the_cpu_is_refused_at_import(monkeypatch):
    """The safety net under placement: were a CPU constant kept on the CPU while the ops reading it moved to the
    device (this session's first try, whose GPU kernel was handed a CPU pointer), the graph is refused at import --
    the backend runs it with torch, with a warning -- instead of crashing at its first call."""
    import pytest

    import fusec.frontend.importer as importer
    from fusec.frontend.builder import UnsupportedGraph

    monkeypatch.setattr(importer, "computed_on_device", lambda imp, node: False)  # constants stay on the CPU
    with FakeTensorMode(allow_non_fake_inputs=True):
        table = torch.empty(38, 4, device="cuda")
    traced = torch.func.functionalize(relative_position_bias, remove="mutations")
    gm = make_fx(traced, tracing_mode="fake", decomposition_table=fusec_decompositions())(table)
    with pytest.raises(UnsupportedGraph, match="would read a value that stays off cuda"):
        import_graph(gm, [table])
