"""Two-process cases on gloo (CPU), each run on every rank by ``run_on_two_ranks``.

Each case compiles with ``backend="fusec"`` and compares with the same code run eagerly on
the same process group (gloo's collectives are what they are: the comparison is fusec
against eager, both on gloo).  A case returns a dict of facts; rank 0's is pickled back.
"""

from __future__ import annotations

import copy
import os
import pickle
import socket
import traceback
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

WORLD = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_on_two_ranks(case: str, out_dir: Path) -> dict:
    """Runs ``case`` (a function name here) on two gloo ranks; rank 0's facts, or raises with a rank's traceback."""
    port = free_port()
    mp.spawn(_worker, args=(case, port, str(out_dir)), nprocs=WORLD, join=True)
    results = [pickle.loads((out_dir / f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]
    for r, res in enumerate(results):
        if "error" in res:
            raise AssertionError(f"rank {r} failed:\n{res['error']}")
    # What fusec compiled on rank 0: each graph's ordered externs (collectives and waits), from its final IR.
    dump = out_dir / "dump0"
    dumps = sorted(dump.rglob("final.mlir")) if dump.exists() else []  # a case may dump into subfolders
    results[0]["graphs"] = {str(p.parent.relative_to(dump)): p.read_text().count("{collective = ") for p in dumps}
    results[0]["remarks"] = "".join(p.with_name("remarks.txt").read_text() for p in dumps)
    return results[0]


def _worker(rank: int, case: str, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), FUSEC_DUMP_DIR=str(Path(out_dir, f"dump{rank}")))
    torch.set_num_threads(1)  # two ranks share the machine's cores
    warnings.filterwarnings("error", message="fusec: graph .* runs with torch")  # zero fallbacks to eager
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        result = globals()[case](rank)
    except Exception:
        result = {"error": traceback.format_exc()}
    finally:
        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.pkl").write_bytes(pickle.dumps(result))


def counting_fusec():
    """The fusec backend, counting the graphs Dynamo hands it (DTensor's collectives appear only after AOTAutograd)."""
    from fusec.backend import fusec_backend

    calls: list[int] = []

    def backend(gm, example_inputs, **kw):
        calls.append(len(gm.graph.nodes))
        return fusec_backend(gm, example_inputs, **kw)

    return backend, calls


def mlp(seed: int = 0, width: int = 16, depth: int = 3) -> nn.Module:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers)


def _grads(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters()]


# ---------------------------------------------------------------- DDP


def ddp_small_buckets(rank: int) -> dict:
    """DDP with a tiny bucket cap: Dynamo splits at buckets; grads equal eager DDP's."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch._dynamo.reset()
    base = mlp()
    torch.manual_seed(100 + rank)
    x = torch.randn(8, 16)
    cap = 16 * 17 * 4  # one Linear's weight and bias per bucket
    # Dynamo's DDPOptimizer asserts the first bucket (1 MiB by default) is no larger than the others.
    dist._DEFAULT_FIRST_BUCKET_BYTES = cap
    eager = DDP(copy.deepcopy(base), bucket_cap_mb=cap / 2**20)
    eager(x).square().mean().backward()
    compiled_model = DDP(copy.deepcopy(base), bucket_cap_mb=cap / 2**20)
    backend, calls = counting_fusec()
    # torch.compile(DDP(m)) captures nothing on torch 2.13 (its forward breaks at the skipped
    # _inside_ddp_forward and the module call runs eagerly): compile the wrapped module, inside DDP.
    compiled_model.module = torch.compile(compiled_model.module, backend=backend)
    compiled_model(x).square().mean().backward()
    for a, b in zip(_grads(eager), _grads(compiled_model), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    return {"backend_calls": len(calls)}


def ddp_python_reducer(rank: int, options: dict | None = None) -> dict:
    """DDP with optimize_ddp="python_reducer" and compiled autograd: the backward holds all_reduce + wait."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch._dynamo.reset()
    base = mlp()
    torch.manual_seed(100 + rank)
    x = torch.randn(8, 16)
    eager = DDP(copy.deepcopy(base))
    eager(x).square().mean().backward()
    backend, calls = counting_fusec()
    with torch._dynamo.config.patch(optimize_ddp="python_reducer"):
        compiled_model = DDP(copy.deepcopy(base))  # DDP picks its reducer when made
        compiled_model.module = torch.compile(compiled_model.module, backend=backend, options=options)
        with torch._dynamo.compiled_autograd._enable(torch.compile(backend=backend, options=options)):
            compiled_model(x).square().mean().backward()
    for a, b in zip(_grads(eager), _grads(compiled_model), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    return {"backend_calls": len(calls)}


# ---------------------------------------------------------------- tensor parallelism


class FeedForward(nn.Module):
    def __init__(self, width: int = 16, hidden: int = 32):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.w1 = nn.Linear(width, hidden)
        self.w2 = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.w2(torch.relu(self.w1(self.norm(x))))


def _tp(rank: int, sequence_parallel: bool) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module

    torch._dynamo.reset()
    mesh = init_device_mesh("cpu", (WORLD,))
    torch.manual_seed(0)
    base = FeedForward()
    x = torch.randn(2, 8, 16)  # the same on every rank (seeded alike)
    if sequence_parallel:
        plan = {"norm": SequenceParallel(), "w1": ColwiseParallel(input_layouts=Shard(1)),
                "w2": RowwiseParallel(output_layouts=Shard(1))}
        x_in = x.chunk(WORLD, dim=1)[rank]
    else:
        plan = {"w1": ColwiseParallel(), "w2": RowwiseParallel(output_layouts=Replicate())}
        x_in = x
    eager = parallelize_module(copy.deepcopy(base), mesh, plan)
    compiled_model = parallelize_module(copy.deepcopy(base), mesh, plan)
    backend, calls = counting_fusec()
    compiled = torch.compile(compiled_model, backend=backend, fullgraph=True)
    want, got = eager(x_in), compiled(x_in)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    reference = base(x).chunk(WORLD, dim=1)[rank] if sequence_parallel else base(x)
    torch.testing.assert_close(want, reference, rtol=1e-4, atol=1e-5)  # TP itself matches one device
    return {"backend_calls": len(calls)}


def overlapped() -> dict:
    """The backend option that runs torch's overlap scheduler, made to run on the CPU: its roofline estimate of
    compute reads a GPU's bandwidth, so a constant stands in for it (the collectives keep their analytical model)."""
    import torch._inductor.fx_passes.overlap_scheduling as overlap_scheduling

    from fusec.frontend import collective_overlap

    overlap_scheduling.estimate_roofline_runtime_ms = lambda node: 0.01
    collective_overlap.runtime_estimates_available = lambda: True
    return {"overlap_collectives": True}


def overlap_option(rank: int) -> dict:
    """Both overlap cases in one spawn (starting two ranks costs more than either), each dumping into a subfolder."""
    dump = Path(os.environ["FUSEC_DUMP_DIR"])
    for name, case in (("bucketed", _bucketed_collectives), ("reducer", lambda r: ddp_python_reducer(r, overlapped()))):
        os.environ["FUSEC_DUMP_DIR"] = str(dump / name)
        case(rank)
    os.environ["FUSEC_DUMP_DIR"] = str(dump)
    return {}


def _bucketed_collectives(rank: int) -> dict:
    """Two all-gathers and two reduce-scatters that torch's scheduler buckets, around matmuls it overlaps them with."""
    import torch.distributed._functional_collectives as fcol

    def f(x, w1, w2, y):
        a = fcol.all_gather_tensor(w1, 0, dist.group.WORLD)
        b = fcol.all_gather_tensor(w2.sin(), 0, dist.group.WORLD)
        r = fcol.reduce_scatter_tensor(w1 * 2, "sum", 0, dist.group.WORLD)
        s = fcol.reduce_scatter_tensor(w2 + 1, "sum", 0, dist.group.WORLD)
        h = (y @ y).relu()
        return (x @ a.t()) + 1, (h @ b.t()).cos(), r * s

    torch._dynamo.reset()
    torch.manual_seed(10 + rank)  # different data on each rank: the gathers and sums show it
    inputs = [torch.randn(16, 16) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # all_gather_tensor's deprecation
        want = f(*inputs)
        got = torch.compile(f, backend="fusec", options=overlapped())(*inputs)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    return {}


def tp_pairwise(rank: int) -> dict:
    return _tp(rank, sequence_parallel=False)


def tp_sequence_parallel(rank: int) -> dict:
    return _tp(rank, sequence_parallel=True)


# ---------------------------------------------------------------- FSDP2


def _fsdp2_losses(compile_blocks: bool, rank: int, checkpointed: bool = False) -> tuple[list[float], int]:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.distributed.fsdp import fully_shard

    torch._dynamo.reset()
    model = nn.Sequential(*[FeedForward() for _ in range(2)])
    torch.manual_seed(0)
    for p in model.parameters():
        nn.init.normal_(p, std=0.2)
    backend, calls = counting_fusec()
    for i, block in enumerate(model):
        if checkpointed:  # TorchTitan's order: activation checkpointing, per-block compile, then fully_shard
            block = checkpoint_wrapper(block)
        if compile_blocks:
            block.compile(backend=backend, fullgraph=True)
        fully_shard(block)
        model[i] = block
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(10 + rank)
    losses = []
    for _ in range(3):
        x = torch.randn(4, 8, 16)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, len(calls)


def fsdp2_per_block(rank: int) -> dict:
    """Per-block compile, then fully_shard; and with activation checkpointing first (TorchTitan's order).  One
    spawn for both: starting two ranks costs more than either run."""
    facts = {}
    for checkpointed in (False, True):
        eager, _ = _fsdp2_losses(False, rank, checkpointed)
        compiled, calls = _fsdp2_losses(True, rank, checkpointed)
        torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), rtol=1e-4, atol=1e-5)
        facts["checkpointed" if checkpointed else "plain"] = {"losses": compiled, "backend_calls": calls}
    return facts
