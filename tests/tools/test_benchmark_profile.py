"""`python -m fusec.tools.benchmark --profile FILE` writes the per-kernel device times `fusec-report --profile` reads."""

from types import SimpleNamespace

import torch

from fusec.report.model import read_profile
from fusec.tools.benchmark import kernel_profile, write_profile

CUDA, CPU = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU


def event(name, us, device=CUDA):
    return SimpleNamespace(name=name, device_time=us, device_type=device)


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
