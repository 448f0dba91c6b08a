"""Size symbols bounded by Dynamo guards so that kernels under dynamic=True index in int32 (fusec.frontend.index_guards)."""

import pytest
import torch

import fusec.backend
from fusec.frontend import index_guards


@pytest.fixture
def compiles(monkeypatch):
    """The size guards each compile_graph call's import made, in order."""
    made: list[tuple] = []
    original = fusec.backend.import_graph

    def recording(*args, **kwargs):
        module, info = original(*args, **kwargs)
        made.append(info.size_guards)
        return module, info

    monkeypatch.setattr(fusec.backend, "import_graph", recording)
    torch._dynamo.reset()
    yield made
    torch._dynamo.reset()


def _kernel_index_types(dump) -> list[str]:
    text = next(dump.rglob("final.mlir")).read_text()
    return [line.split("schedule(")[1].split(",")[1].strip(" )") for line in text.splitlines() if "fusec.kernel @" in line]


def test_a_symbolic_sum_indexes_in_int32_under_a_guard_named_in_a_remark(compiles, tmp_path):
    x = torch.randn(3000, generator=torch.Generator().manual_seed(0))
    f = torch.compile(lambda x: (x * 2).sum(), backend="fusec", dynamic=True, options={"dump_dir": str(tmp_path)})
    torch.testing.assert_close(f(x), (x * 2).sum())
    ((guard,),) = compiles
    assert guard[1] == 3000 * 2**16  # the hint times the widest window (far under int32 here)
    assert set(_kernel_index_types(tmp_path)) == {"int32"}
    assert "size-guard: sizes guarded so that indices fit int32" in next(tmp_path.rglob("remarks.txt")).read_text()


def test_a_size_past_the_bound_recompiles_and_stays_right(compiles, monkeypatch):
    monkeypatch.setattr(index_guards, "EXTENT_LIMIT", 2**12)  # a window of 4096 / 64 = 64 times the hint
    f = torch.compile(lambda x: torch.softmax(x, -1) * 3, backend="fusec", dynamic=True)
    g = torch.Generator().manual_seed(1)
    for rows in (2, 5, 64, 100):
        x = torch.randn(rows, 16, generator=g)
        torch.testing.assert_close(f(x), torch.softmax(x, -1) * 3)
    # the first compile (2 x 16) guarded rows <= 2 * 8 and columns <= 16 * 8 (2 * 16 * 8 * 8 = 4096); 5 rows ran
    # it; 64 did not fit and recompiled, with a window of its own too narrow to guard (64 * 16 * 4 * 4 > 4096)
    assert len(compiles) == 2 and compiles[1] == (), compiles
    assert sorted(bound for _, bound in compiles[0]) == [16, 128]


def _symbolic(fn, *shape):
    from torch.fx.experimental.proxy_tensor import make_fx

    from fusec.frontend.importer import find_shape_env

    x = torch.empty(*shape, device="meta")
    gm = make_fx(fn, tracing_mode="symbolic")(x)
    return gm, find_shape_env(gm, [])


def test_each_symbol_gets_its_hint_times_the_widest_window_that_fits_and_none_if_that_is_narrow():
    gm, env = _symbolic(lambda x: x.t() + 1, 1 << 10, 1 << 8)  # [s0, s1] at 1024 x 256: 2**18 elements
    (a, bound_a), (b, bound_b) = index_guards.plan(gm, env)
    assert (bound_a, bound_b) == (1024 * 2**6, 256 * 2**6)  # (64 * 64) * 2**18 = 2**30
    gm, env = _symbolic(lambda x: x + 1, 1 << 29)  # 2**29 elements: only twice the hint fits half of int32
    assert index_guards.plan(gm, env) == ()


def test_a_warm_start_guards_again_what_the_import_guarded(tmp_path, monkeypatch, compiles):
    monkeypatch.setenv("FUSEC_GRAPH_CACHE", "1")
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(index_guards, "EXTENT_LIMIT", 2**10)
    g = torch.Generator().manual_seed(2)
    small, large = torch.randn(4, 8, generator=g), torch.randn(40, 8, generator=g)

    def fn(x):
        return (x.exp() * 2).sum(0)

    torch.compile(fn, backend="fusec", dynamic=True)(small)
    assert len(compiles) == 1 and compiles[0]
    torch._dynamo.reset()
    applied: list = []
    apply = index_guards.apply

    def recording(gm, example_inputs, guards):
        applied.append(guards)
        return apply(gm, example_inputs, guards)

    monkeypatch.setattr(index_guards, "apply", recording)
    f = torch.compile(fn, backend="fusec", dynamic=True)
    torch.testing.assert_close(f(small), fn(small))
    assert len(compiles) == 1 and applied == [compiles[0]]  # from the cache, its guards applied again
    torch.testing.assert_close(f(large), fn(large))  # past the bound: Dynamo recompiles (imported this time)
    assert len(compiles) == 2


def test_a_size_the_user_bounded_keeps_its_range_and_compiles(compiles):
    """mark_dynamic(..., max=N): a narrower guard would violate the user's constraint (Dynamo raises)."""
    f = torch.compile(lambda x: (x * 2).sum(0), backend="fusec")
    x = torch.randn(3000, 8, generator=torch.Generator().manual_seed(3))
    torch._dynamo.mark_dynamic(x, 0, min=2, max=10**9)
    torch.testing.assert_close(f(x), (x * 2).sum(0))
    assert compiles == [()]
