"""align-matmul-outputs through torch.compile(backend="fusec"): a linear with an odd number of outputs.

The linear's result gets a padded row stride (on CPU only with ``when=always``); the launcher writes it
with the matmul's ``out=`` overload into the padded buffer, the relu reads it there, and the value
returned directly is copied back to eager's strides.
"""

import pytest
import torch

from fusec.pipeline import default_pipeline_spec

on_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
PADDED = "align-matmul-outputs{when=always}," + default_pipeline_spec()  # opt-in: not in the default pipeline


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def linear_relu(x, w, b):
    y = x @ w.t()  # returned directly (the padded mm result is copied to eager's strides) and read by a kernel
    return y, torch.relu(torch.nn.functional.linear(x, w, b)) * 2


def inputs(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(4, 768, generator=g).to(dtype), torch.randn(1001, 768, generator=g).to(dtype),
            torch.randn(1001, generator=g).to(dtype)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_padded_linear_matches_eager(dtype, tmp_path):
    args = inputs(dtype)
    fn = torch.compile(linear_relu, backend="fusec", options={"pipeline": PADDED, "dump_dir": str(tmp_path)})
    got, want = fn(*args), linear_relu(*args)
    # fusec decomposes linear into mm + add: in bf16 that rounds once more than eager's fused addmm
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, **tol)
        assert g.stride() == w.stride()
    torch.testing.assert_close(got[0], want[0], atol=0, rtol=0)  # the mm itself: the same BLAS call, padded or not
    [dump] = tmp_path.iterdir()
    launcher = (dump / "launcher.py").read_text()
    assert launcher.count("_aten_mm_out(") == 2 and "out=buf" in launcher, launcher
    row = 1008 if dtype == torch.bfloat16 else 1004  # 1001 elements rounded up to 16 bytes
    assert f"(4, 1001), ({row}, 1)" in launcher, launcher
    assert '"identity"' in (dump / "final.mlir").read_text() or "identity" in launcher
    remarks = (dump / "remarks.txt").read_text()
    assert "padded-matmul" in remarks and f"[{row}, 1]" in remarks, remarks


def test_the_interpreter_lays_extern_results_out_as_typed():
    """execute="interpret" runs the same padded IR: the extern result is re-laid out to the padded type."""
    args = inputs(torch.float32)
    fn = torch.compile(linear_relu, backend="fusec", options={"pipeline": PADDED, "execute": "interpret"})
    for g, w in zip(fn(*args), linear_relu(*args), strict=True):
        torch.testing.assert_close(g, w)
        assert g.stride() == w.stride()


def test_cpu_graphs_stay_unpadded_by_default(tmp_path):
    args = inputs(torch.float32)
    accelerator_only = "align-matmul-outputs," + default_pipeline_spec()  # the pass's own default: when=accelerator
    fn = torch.compile(linear_relu, backend="fusec", options={"pipeline": accelerator_only, "dump_dir": str(tmp_path)})
    for g, w in zip(fn(*args), linear_relu(*args), strict=True):
        torch.testing.assert_close(g, w)
    [dump] = tmp_path.iterdir()
    assert "out=" not in (dump / "launcher.py").read_text()
    assert "padding-skipped" in (dump / "remarks.txt").read_text()


@pytest.mark.parametrize("target", ["mm", "addmm", "bmm", "baddbmm"])
def test_out_overload_writes_a_padded_view_in_place(target):
    """What the launcher relies on: the out= overloads accept a result whose row stride exceeds its row."""
    out, p, got, want = _padded_call(target, "cpu")
    assert got.data_ptr() == p and got.stride() == out.stride()
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("target", ["mm", "addmm", "bmm", "baddbmm"])
@pytest.mark.gpu
@on_gpu
def test_out_overload_writes_a_padded_view_in_place_on_cuda(target):
    out, p, got, want = _padded_call(target, "cuda", torch.bfloat16)
    assert got.data_ptr() == p and got.stride() == out.stride()
    torch.testing.assert_close(got, want)


@pytest.mark.gpu
@on_gpu
def test_padded_linear_on_cuda_matches_eager(tmp_path):
    args = [a.cuda() for a in inputs(torch.bfloat16)]
    fn = torch.compile(linear_relu, backend="fusec", options={"pipeline": PADDED, "dump_dir": str(tmp_path)})
    for g, w in zip(fn(*args), linear_relu(*args), strict=True):
        torch.testing.assert_close(g, w, atol=2e-2, rtol=2e-2)  # mm + add rounds once more than eager's addmm
        assert g.stride() == w.stride()
    [dump] = tmp_path.iterdir()
    assert "out=buf" in (dump / "launcher.py").read_text()


def _padded_call(target, device, dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    batch = (2,) if target in ("bmm", "baddbmm") else ()
    a = torch.randn(*batch, 8, 64, generator=g).to(device, dtype)
    b = torch.randn(*batch, 64, 1001, generator=g).to(device, dtype)
    bias = torch.randn(*batch, 8, 1001, generator=g).to(device, dtype) if target == "baddbmm" else \
        torch.randn(1001, generator=g).to(device, dtype)
    strides = ((8 * 1008,) if batch else ()) + (1008, 1)
    out = torch.empty_strided((*batch, 8, 1001), strides, dtype=dtype, device=device)
    p = out.data_ptr()
    op = getattr(torch.ops.aten, target)
    args = (bias, a, b) if target in ("addmm", "baddbmm") else (a, b)
    got = op.out(*args, out=out)
    return out, p, got, op.default(*args)


def test_lm_head_shape_reshaped_output(tmp_path):
    """Batched tokens [2, 3, 96] through a bias-free linear to 1001 logits: mm, then a view to [2, 3, 1001] as output."""
    g = torch.Generator().manual_seed(2)
    h, w = torch.randn(2, 3, 96, generator=g), torch.randn(1001, 96, generator=g)

    def lm_head(h, w):
        return torch.nn.functional.linear(h, w)

    fn = torch.compile(lm_head, backend="fusec", options={"pipeline": PADDED, "dump_dir": str(tmp_path)})
    got, want = fn(h, w), lm_head(h, w)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
    [dump] = tmp_path.iterdir()
    assert "_aten_mm_out(" in (dump / "launcher.py").read_text()


def test_symbolic_rows_keep_a_static_padded_row_stride():
    """dynamic=True: the rows are a size symbol, the padded row stride stays 1004 (fp32) and outputs match eager's."""
    def fn(h, w):
        y = h @ w.t()
        return y, torch.relu(y)

    compiled = torch.compile(fn, backend="fusec", dynamic=True, options={"pipeline": PADDED})
    for rows in (5, 9):
        g = torch.Generator().manual_seed(rows)
        h, w = torch.randn(2, rows, 32, generator=g), torch.randn(1001, 32, generator=g)
        for got, want in zip(compiled(h, w), fn(h, w), strict=True):
            torch.testing.assert_close(got, want)
            assert got.stride() == want.stride()
