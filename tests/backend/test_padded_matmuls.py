"""pad-matmuls through torch.compile(backend="fusec"): matmuls with misaligned rows on zero-padded operands.

On CPU only with ``when=always`` (and ``cost-rule=false``: these shapes are far too small to gain); on a GPU
the default pipeline pads where the cost rule says so.  Values, strides and gradients match eager's: the
padding is zeros, the result a slice of the padded product, and outputs get eager's (contiguous) strides.
"""

import contextlib

import pytest
import torch

from fusec.pipeline import default_pipeline_spec

on_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
PADDED = "pad-matmuls{when=always cost-rule=false}," + default_pipeline_spec().replace("pad-matmuls,", "")


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def linear_relu(x, w, b):
    y = x @ w.t()  # returned directly (the slice of the padded product is copied to eager's strides) and read by a kernel
    return y, torch.relu(torch.nn.functional.linear(x, w, b)) * 2


def inputs(dtype, seed=0, device="cpu", rows=4):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(rows, 768, generator=g).to(device, dtype), torch.randn(1001, 768, generator=g).to(device, dtype),
            torch.randn(1001, generator=g).to(device, dtype)]


def _dump_text(tmp_path, name: str) -> str:
    return "".join(p.read_text() for p in sorted(tmp_path.glob(f"*/{name}")))


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
    torch.testing.assert_close(got[0], want[0], atol=0, rtol=0)  # zero padding adds nothing to the products
    row = 1008 if dtype == torch.bfloat16 else 1004  # 1001 elements rounded up to 16 bytes
    remarks = _dump_text(tmp_path, "remarks.txt")
    assert remarks.count("padded-matmul") == 2 and f"N 1001 -> {row}" in remarks, remarks
    assert f"_empty(({row}, 768), (768, 1)" in _dump_text(tmp_path, "launcher.py")  # W with zero rows, row-major


def test_the_interpreter_runs_the_padded_graph():
    args = inputs(torch.float32)
    fn = torch.compile(linear_relu, backend="fusec", options={"pipeline": PADDED, "execute": "interpret"})
    for g, w in zip(fn(*args), linear_relu(*args), strict=True):
        torch.testing.assert_close(g, w)
        assert g.stride() == w.stride()


def test_cpu_graphs_stay_unpadded_by_default(tmp_path):
    args = inputs(torch.float32)
    fn = torch.compile(linear_relu, backend="fusec", options={"dump_dir": str(tmp_path)})
    for g, w in zip(fn(*args), linear_relu(*args), strict=True):
        torch.testing.assert_close(g, w)
    assert "padding-skipped" in _dump_text(tmp_path, "remarks.txt")
    assert "fusec.cat" not in _dump_text(tmp_path, "final.mlir")


def test_gradients_through_padded_matmuls(tmp_path):
    """Training an LM head: forward, input and weight gradients all pass through padded matmuls (N, K and M)."""
    g = torch.Generator().manual_seed(3)
    h, w = torch.randn(2, 3, 96, generator=g), torch.randn(1001, 96, generator=g)

    def loss(h, w):
        return torch.nn.functional.linear(h, w).logsumexp(-1).sum()

    args = [t.clone().requires_grad_() for t in (h, w)]
    eager = [t.clone().requires_grad_() for t in (h, w)]
    fn = torch.compile(loss, backend="fusec", options={"pipeline": PADDED, "dump_dir": str(tmp_path)})
    fn(*args).backward()
    loss(*eager).backward()
    for got, want in zip(args, eager, strict=True):
        torch.testing.assert_close(got.grad, want.grad, atol=1e-4, rtol=1e-4)
    remarks = _dump_text(tmp_path, "remarks.txt")
    assert "N 1001 -> 1004" in remarks and "K 1001 -> 1004" in remarks and "M 1001 -> 1004" in remarks, remarks


def test_symbolic_rows_pad_the_static_columns():
    """dynamic=True: the rows are a size symbol, the columns (static) are padded; outputs match eager's at two sizes."""
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


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize(("dtype", "tf32", "row"), [(torch.bfloat16, False, 50264), (torch.float32, True, 50260),
                                                    (torch.float32, False, None)])
def test_lm_head_on_cuda_is_padded_where_tensor_cores_run_it(dtype, tf32, row, tmp_path):
    """The default pipeline on a GPU: GPT-2's LM head shape is padded where cuBLAS runs it on tensor cores (16-bit,
    or fp32 with TF32 allowed), and keeps its sizes for fp32 at torch's default precision; values match."""
    g = torch.Generator().manual_seed(4)
    h = torch.randn(1024, 768, generator=g).to("cuda", dtype)
    w = (torch.randn(50257, 768, generator=g) * 0.05).to("cuda", dtype)
    with _tf32(tf32):
        fn = torch.compile(lambda h, w: h @ w.t(), backend="fusec", options={"dump_dir": str(tmp_path)})
        got, want = fn(h, w), h @ w.t()
    tol = {"rtol": 2e-2, "atol": 2e-2} if tf32 else {}
    torch.testing.assert_close(got, want, **tol)  # the same products with zeros added (cuBLAS may split K otherwise)
    assert got.stride() == want.stride()
    remarks = _dump_text(tmp_path, "remarks.txt")
    if row is None:
        assert "N 50257 ->" not in remarks and "float32_matmul_precision 'highest'" in remarks
    else:
        assert f"N 50257 -> {row}" in remarks


@contextlib.contextmanager
def _tf32(allowed: bool):
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
