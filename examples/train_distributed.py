"""Train a small GPT-2 (transformers, random weights) for a few steps on several processes with fusec.

    torchrun --nproc-per-node 2 examples/train_distributed.py --mode ddp --check
    torchrun --nproc-per-node 2 examples/train_distributed.py --mode fsdp2 --check
    torchrun --nproc-per-node 2 examples/train_distributed.py --mode tp --check
    torchrun --nproc-per-node 2 examples/train_distributed.py --mode tp --size base --overlap --check
    torchrun --nproc-per-node 4 examples/train_distributed.py --mode 2d --checkpoint --check

gloo on CPU, nccl on GPUs.  Modes, each PyTorch's own engine with fusec compiling the graphs:

* ``ddp``: DistributedDataParallel around the compiled model (Dynamo splits the graph at gradient buckets);
* ``fsdp2``: TorchTitan's order: each block activation-checkpointed (with ``--checkpoint``), compiled
  (``fullgraph=True``), then ``fully_shard`` per block;
* ``tp``: the MLPs column-/row-wise parallel (DTensor; attention stays replicated: GPT-2 computes
  q, k and v in one projection, which a column split would cut across), each block compiled;
* ``2d``: TP over pairs of ranks and FSDP2 across the pairs, in TorchTitan's order (TP, activation
  checkpointing with ``--checkpoint``, per-block compile, ``fully_shard``); 4 ranks or more.

``--check`` trains the same model eagerly with the same seed and compares the losses.  ``--overlap`` passes
``options={"overlap_collectives": True}``: torch's overlap scheduler buckets and reschedules the collectives in
the graphs (TP's; DDP's and FSDP2's run outside them) before fusec imports them.  ``--size base`` trains a
GPT-2 large enough for the collectives to take time (768 wide, 4 layers, 8 x 256 tokens); ``tiny`` (default)
checks the plumbing in seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"tiny": {"n_embd": 32, "n_layer": 2, "n_head": 2, "batch": 2, "tokens": 16},
         "base": {"n_embd": 768, "n_layer": 4, "n_head": 12, "batch": 8, "tokens": 256}}


def build_model(seed: int, size: str) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    dims = SIZES[size]
    config = GPT2Config(vocab_size=128, n_positions=dims["tokens"], n_embd=dims["n_embd"], n_layer=dims["n_layer"],
                        n_head=dims["n_head"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                        eos_token_id=0,  # no dropout: runs compare exactly
                        use_cache=False)  # training keeps no KV cache (under checkpointing Dynamo cannot trace its lazy init)
    return GPT2LMHeadModel(config)


def conv1d_as_linear(conv) -> nn.Linear:
    """GPT-2's Conv1D (weight [in, out]) as the nn.Linear DTensor's parallel styles shard."""
    linear = nn.Linear(conv.weight.shape[0], conv.weight.shape[1])
    with torch.no_grad():
        linear.weight.copy_(conv.weight.t())
        linear.bias.copy_(conv.bias)
    return linear


def parallelize(model: nn.Module, mode: str, backend: str | None, device: torch.device, options: dict | None,
                checkpoint: bool = False) -> nn.Module:
    """The model wrapped for ``mode``; compiled with ``backend`` (None: eager) and its ``options``."""
    blocks = model.transformer.h

    def compiled(module: nn.Module) -> nn.Module:
        return module if backend is None else torch.compile(module, backend=backend, fullgraph=True, options=options)

    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        # Compile the wrapped model: torch.compile(DDP(m)) breaks at DDP's forward and captures nothing.
        inner = model if backend is None else torch.compile(model, backend=backend, options=options)
        return DDP(inner, device_ids=[device.index] if device.type == "cuda" else None)
    if mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for i in range(len(blocks)):
            blocks[i] = compiled(checkpoint_wrapper(blocks[i]) if checkpoint else blocks[i])
            fully_shard(blocks[i])
        fully_shard(model)
        return model
    if mode == "tp":
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for i in range(len(blocks)):
            blocks[i] = compiled(mlp_tensor_parallel(blocks[i], mesh))
        return model
    if mode == "2d":  # TorchTitan's order: TP, activation checkpointing, per-block compile, fully_shard
        from torch.distributed.fsdp import fully_shard

        mesh = two_d_mesh(device)
        for i in range(len(blocks)):
            block = mlp_tensor_parallel(blocks[i], mesh["tp"])
            blocks[i] = compiled(checkpoint_wrapper(block) if checkpoint else block)
            fully_shard(blocks[i], mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
        return model
    raise SystemExit(f"--mode must be ddp, fsdp2, tp or 2d, not {mode!r}")


def mlp_tensor_parallel(block: nn.Module, mesh) -> nn.Module:
    """The block with its MLP column-/row-wise parallel over ``mesh``."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    block.mlp.c_fc = conv1d_as_linear(block.mlp.c_fc)
    block.mlp.c_proj = conv1d_as_linear(block.mlp.c_proj)
    parallelize_module(block.mlp, mesh, {"c_fc": ColwiseParallel(), "c_proj": RowwiseParallel()})
    return block


def two_d_mesh(device: torch.device):
    """(data parallel, tensor parallel = 2) over all ranks."""
    from torch.distributed.device_mesh import init_device_mesh

    world = dist.get_world_size()
    if world < 4 or world % 2:
        raise SystemExit("--mode 2d needs an even number of ranks, at least 4 (tensor parallel over pairs)")
    return init_device_mesh(device.type, (world // 2, 2), mesh_dim_names=("dp", "tp"))


def checkpoint_wrapper(module: nn.Module) -> nn.Module:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper as wrap

    return wrap(module)


def train(mode: str, backend: str | None, steps: int, device: torch.device, size: str = "tiny",
          options: dict | None = None, skew: float = 0.0, checkpoint: bool = False) -> tuple[list[float], float, int]:
    """Losses of ``steps`` SGD steps, the seconds per step after the first, and the GPU kernels of one more step
    (0 on the CPU).  ``skew``: rank 1 starts (and so compiles) that many seconds after the others."""
    model = parallelize(build_model(seed=0, size=size).to(device), mode, backend, device, options, checkpoint)
    # Under TP, DTensor (sharded MLP) and plain tensors (replicated attention) are mixed: foreach kernels (the default
    # for CUDA tensors) refuse mixed lists (found on two H100s; CPU tensors default to the per-tensor loop).
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False if mode in ("tp", "2d") else None)
    # DDP and FSDP2 split the batch over the ranks; TP's ranks all see the same batch (2-D: each TP pair one).
    data_rank = {"tp": 0, "2d": dist.get_rank() // 2}.get(mode, dist.get_rank())
    gen = torch.Generator().manual_seed(1000 + data_rank)

    def step() -> float:
        ids = torch.randint(0, 128, (SIZES[size]["batch"], SIZES[size]["tokens"]), generator=gen).to(device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()  # also waits for the step's kernels: the time per step is the device's

    if skew and dist.get_rank() == 1:
        time.sleep(skew)
    losses, started = [], 0.0
    for i in range(steps):
        if i == 1:
            started = time.perf_counter()
        losses.append(step())
    per_step = (time.perf_counter() - started) / max(steps - 1, 1)
    if device.type != "cuda":
        return losses, per_step, 0
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
    kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and "Memcpy" not in e.name
                  and "Memset" not in e.name)
    return losses, per_step, kernels


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["ddp", "fsdp2", "tp", "2d"], default="ddp")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--backend", default="fusec", help="torch.compile backend (fusec, inductor, aot_eager, ...)")
    parser.add_argument("--check", action="store_true", help="train eagerly too and compare the losses")
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--overlap", action="store_true", help="fusec option overlap_collectives (torch's scheduler)")
    parser.add_argument("--checkpoint", action="store_true", help="fsdp2, 2d: activation checkpointing of each block")
    parser.add_argument("--skew", type=float, default=0.0, help="rank 1 starts SKEW seconds late (a slower compile)")
    args = parser.parse_args()
    if "RANK" not in os.environ:
        print("launch with torchrun, e.g. torchrun --nproc-per-node 2 examples/train_distributed.py --mode ddp", file=sys.stderr)
        return 2
    if args.backend == "fusec":
        import fusec.backend  # noqa: F401 -- registers backend="fusec"
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    try:
        options = {"overlap_collectives": True} if args.overlap else None
        if options is not None and args.backend != "fusec":
            parser.error("--overlap is a fusec option")
        losses, per_step, kernels = train(args.mode, args.backend, args.steps, device, args.size, options, args.skew,
                                          args.checkpoint)
        if rank == 0:
            print(f"{args.mode} {args.backend}{' overlap' if args.overlap else ''}: losses {[round(v, 5) for v in losses]}, "
                  f"{per_step * 1e3:.1f} ms/step, {kernels} GPU kernels a step")
        if args.check:
            torch._dynamo.reset()
            want, eager_step, eager_kernels = train(args.mode, None, args.steps, device, args.size,
                                                    checkpoint=args.checkpoint)
            ok = torch.allclose(torch.tensor(losses), torch.tensor(want), rtol=1e-4, atol=1e-5)
            if rank == 0:
                print(f"{args.mode} eager: losses {[round(v, 5) for v in want]}, {eager_step * 1e3:.1f} ms/step, "
                      f"{eager_kernels} GPU kernels a step: "
                      f"{'match' if ok else 'MISMATCH'}")
            if not ok:
                return 1
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
