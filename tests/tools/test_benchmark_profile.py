"""`python -m fusec.tools.benchmark --profile FILE` writes the per-kernel device times `fusec-report --profile` reads."""

from types import SimpleNamespace

import pytest
import torch

from fusec.report.model import read_profile
from fusec.tools.benchmark import kernel_profile, write_profile

CUDA, CPU = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU


def event(name, us, device=CUDA):
    return SimpleNamespace(name=name, device_time=us, device_type=device, id=0, cpu_children=[])


def test_kernel_times_are_summed_by_name_slowest_first_without_copies_and_host_events():
    events = [event("fusec_poi_add_3", 2.5), event("fusec_red_sum_1", 7.0), event("fusec_poi_add_3", 1.5),
              event("Memset (Device)", 9.0), event("Memcpy HtoD", 9.0), event("aten::add", 50.0, CPU)]
    assert kernel_profile(events, "seed") == [
        {"name": "fusec_red_sum_1", "device_time_us": 7.0, "program": "seed"},
        {"name": "fusec_poi_add_3", "device_time_us": 4.0, "program": "seed"}]


def test_the_written_profile_is_what_fusec_report_reads(tmp_path):
    path = tmp_path / "prof.json"
    write_profile(path, kernel_profile([event("fusec_poi_add_3", 2.5), event("fusec_red_sum_1", 7.0)]))
    assert read_profile(path) == {"fusec_poi_add_3": 2.5, "fusec_red_sum_1": 7.0}


def host(name, children=(), id=0):
    return SimpleNamespace(name=name, device_type=CPU, cpu_children=list(children), id=id)


def kernel(name, us, id):
    return SimpleNamespace(name=name, device_time=us, device_type=CUDA, id=id)


def test_kernels_launched_in_a_graphs_range_name_their_graph():
    """Kernel names are unique within a graph only: a forward's and a backward's fusec_poi_add_3 stay apart.  A
    kernel and the runtime call that launched it share a correlation id; the call is nested in the graph's range."""
    fw = host("fusec:forward_0_0", [host("aten::empty", id=14), host("cuLaunchKernelEx", id=11)], id=2)
    bw = host("fusec:backward_0_0", [host("cuLaunchKernelEx", id=12), host("aten::mm", [host("cudaLaunchKernel", id=13)], id=9)],
              id=4)  # an op's id (aten::empty's 14) may equal a kernel's: only launches' ids count
    events = [fw, bw, kernel("fusec_poi_add_3", 2.0, 11), kernel("fusec_poi_add_3", 5.0, 12), kernel("gemm", 3.0, 13),
              kernel("gemm", 1.0, 14), kernel("fusec:forward_0_0", 40.0, 2)]  # eager's gemm; the range's annotation
    assert kernel_profile(events) == [
        {"name": "fusec_poi_add_3", "device_time_us": 5.0, "graph": "backward_0_0"},
        {"name": "gemm", "device_time_us": 3.0, "graph": "backward_0_0"},
        {"name": "fusec_poi_add_3", "device_time_us": 2.0, "graph": "forward_0_0"},
        {"name": "gemm", "device_time_us": 1.0}]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_training_steps_profile_times_every_kernel_of_the_report(tmp_path):
    """On the GPU: a profiled training step of two identical layers names each kernel's graph, and the report puts
    a device time on every launched kernel and combo of both graphs, the shared bodies' split among their sites."""
    from fusec.report import write_report
    from fusec.report.model import graph_folders, read_graph, share_out
    from fusec.tools.benchmark import profile_kernels

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.norm = torch.nn.Linear(64, 64), torch.nn.LayerNorm(64)

        def forward(self, x):
            return self.norm(x + torch.nn.functional.gelu(self.lin(x)))

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(Layer(), Layer()).cuda()
    x = torch.randn(256, 64, device="cuda")
    compiled = torch.compile(model, backend="fusec", options={"dump_dir": str(tmp_path / "dump")})

    def step():
        compiled(x).square().sum().backward()

    entries = profile_kernels(step, "layers")
    torch._dynamo.reset()
    fusec_entries = [e for e in entries if e["name"].startswith("fusec_")]
    assert {e.get("graph", "").split("_")[0] for e in fusec_entries} == {"forward", "backward"}
    path = tmp_path / "prof.json"
    write_profile(path, entries)
    folders = graph_folders(tmp_path / "dump")
    profile = share_out(read_profile(path), folders)
    boxes = [b for f in folders for b in read_graph(f, profile=profile).boxes
             if b.kind in ("kernel", "combo") and b.combo is None]
    assert boxes and all(b.device_time_us is not None for b in boxes), [b.name for b in boxes if b.device_time_us is None]
    assert sum(b.device_time_us for b in boxes) == pytest.approx(sum(e["device_time_us"] for e in fusec_entries), rel=1e-3)
    assert "µs" in write_report(tmp_path / "dump", tmp_path / "r.html", path).read_text()
