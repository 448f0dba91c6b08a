"""Identical kernels compile once: launch sites whose kernels differ only in name share one kernel."""


import pytest
import torch
import torch.nn as nn

from fusec.runtime import kernel_cache


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))


class Stack(nn.Module):
    def __init__(self, width: int, depth: int):
        super().__init__()
        self.blocks = nn.Sequential(*(Block(width) for _ in range(depth)))

    def forward(self, x):
        return self.blocks(x)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def kernel_sources(dump) -> dict[str, str]:
    """Kernel name -> Triton source, from a compiled graph's dump folder."""
    (folder,) = [p for p in dump.iterdir() if p.is_dir()]
    return {p.stem: p.read_text() for p in folder.glob("fusec_*.py")}


def test_body_hash_ignores_only_the_kernel_name():
    source = "# fusec kernel k_1: pointwise\n@triton.jit\ndef k_1(in_ptr0, xnumel):\n    k_12 = 1\n"
    renamed = source.replace("k_1:", "k_7:").replace("def k_1(", "def k_7(")
    assert kernel_cache.body_hash(source, "k_1") == kernel_cache.body_hash(renamed, "k_7")
    # A different body, or a name that is only a prefix of another identifier, is not the same kernel.
    assert kernel_cache.body_hash(source, "k_1") != kernel_cache.body_hash(source.replace("= 1", "= 2"), "k_1")
    assert kernel_cache.body_hash(source, "k_1") != kernel_cache.body_hash(source.replace("k_12", "k_72"), "k_1")


@pytest.mark.slow
def test_four_identical_blocks_compile_each_distinct_kernel_once(tmp_path):
    torch.manual_seed(0)
    model = Stack(width=16, depth=4).eval()
    x = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model, backend="fusec", options={"dump_dir": str(tmp_path)})(x)
    torch.testing.assert_close(got, want)

    sources = kernel_sources(tmp_path)
    bodies = {kernel_cache.body_hash(src, name) for name, src in sources.items()}
    assert len(sources) >= 4 * 2 and len(bodies) * 2 <= len(sources), (len(sources), len(bodies))
    # Each distinct body was loaded (for Triton: compiled) exactly once in this process, whatever its names.
    assert all(kernel_cache.load_counts[(b, True)] == 1 for b in bodies)


def test_sites_of_one_body_share_the_kernel_object():
    name_a, name_b = "fusec_poi_neg_3", "fusec_poi_neg_41"
    template = '''# fusec kernel {n}: test
import triton
import triton.language as tl


@triton.jit
def {n}(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr0 + xindex, -tl.load(in_ptr0 + xindex, xmask), xmask)
'''
    a = kernel_cache.load_shared_kernel(template.format(n=name_a), name_a, True)
    b = kernel_cache.load_shared_kernel(template.format(n=name_b), name_b, True)
    assert a is b
    # Compiling it elsewhere (a worker) must use the source it was loaded from: Triton keys on its name.
    assert kernel_cache.shared_origin(b) == (template.format(n=name_a), name_a)
    x = torch.randn(37, generator=torch.Generator().manual_seed(2))
    out = torch.empty_like(x)
    b[(1,)](x, out, 37, XBLOCK=64)
    torch.testing.assert_close(out, -x)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_triton_compiles_each_body_once(tmp_path):
    torch.manual_seed(0)
    model = Stack(width=24, depth=4).cuda().eval()
    x = torch.randn(3, 5, 24, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
    before = kernel_cache.compiled_kernel_count()
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model, backend="fusec", options={"dump_dir": str(tmp_path)})(x)
    torch.testing.assert_close(got, want)
    sources = kernel_sources(tmp_path)
    bodies = {kernel_cache.body_hash(src, name) for name, src in sources.items()}
    assert len(bodies) * 2 <= len(sources)
    compiled = kernel_cache.compiled_kernel_count() - before
    assert 1 <= compiled <= len(bodies), (compiled, len(bodies), len(sources))
