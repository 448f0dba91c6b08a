"""fusec-report on a real model: a training step of GPT-2 (``transformers``, tiny and random) dumped and reported."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from model_zoo import MODELS

from fusec.tools.fusec_report import main

pytestmark = [pytest.mark.usefixtures("fresh_dynamo"), pytest.mark.slow]


def test_a_gpt2_training_step_reports_every_kernel_of_both_graphs(tmp_path):
    case = MODELS["gpt2"]
    torch.manual_seed(0)
    eager = case.build().train()
    compiled = copy.deepcopy(eager)
    inputs = case.inputs(torch.Generator().manual_seed(1), *case.sizes[0])
    want = case.loss(eager(**inputs))
    compiled.compile(backend="fusec", options={"dump_dir": str(tmp_path / "dump")})
    got = case.loss(compiled(**inputs))
    got.backward()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    out = tmp_path / "gpt2.html"
    assert main([str(tmp_path / "dump"), "-o", str(out)]) == 0
    page = out.read_text()
    folders = sorted(p for p in (tmp_path / "dump").iterdir() if p.is_dir())
    assert {re.sub(r"_\d.*", "", f.name) for f in folders} == {"forward", "backward"}
    for folder in folders:
        final = (folder / "final.mlir").read_text()
        kernels = re.findall(r"fusec\.(?:kernel|combo) @(\w+)", final)
        assert kernels, folder.name
        for name in kernels:  # each kernel, combo member or not, is in the picture and has its panel
            assert name in page, (folder.name, name)
        assert "extern" in page  # GPT-2's matmuls run as torch calls: boxes of their own
