"""Whole models from ``transformers`` through fusec and Inductor: correctness, fallbacks, kernels, time (GPU).

    python bench/models.py [--models gpt2,bert,vit,resnet,llama] [--dtypes bf16,fp32] [--modes infer,train]
                           [--backends fusec,inductor,inductor-combo] [--dynamic] [--calls 20] [--json out.json]

Backends: eager (no compile: its kernels and device time), fusec, fusec-unpadded, fusec-pooling, fusec-ro (CUDA graphs),
fusec-cl (channels-last in training too), fusec-math-attention (sdpa masks as traced: dense_attention_masks off),
fusec+PASS{OPTIONS}+... (the default pipeline with those passes' options);
inductor, inductor-combo, and each with ``-ro`` (mode="reduce-overhead": CUDA graphs).

Each (model, mode, dtype, backend) runs in a fresh process with empty compile
caches, so the first call is a cold compile (``--warm`` adds a second process reading the first one's caches:
a warm start).  It reports: graphs that fell back
to eager (fusec's "runs with torch" warnings), the largest error against eager
(inference: the output, relative to its size; train: the loss and every
parameter's gradient, relative to its size floored at 1e-3 of the median gradient's: ``gradient_errors``), the
first call's time, kernels per call and their device
time (CUDA profiler), and the wall time per call (the median of 5 rounds of --calls calls, before the profiler runs).  With
``--dynamic`` the model is compiled with ``dynamic=True`` and a second batch size
runs through the same artifact (its recompiles are counted).
Random weights, nothing downloaded.  Prints a Markdown table last.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch

SIZES = {  # name -> (batch, length or image size), realistic but small enough for one GPU call
    "gpt2": (4, 256), "bert": (8, 128), "vit": (16, 224), "resnet": (16, 224), "llama": (4, 256),
    "convnext": (16, 224), "beit": (16, 224),
}


def build(name: str) -> tuple[torch.nn.Module, str]:
    import transformers as T

    if name == "gpt2":
        cfg = T.GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024,
                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return T.GPT2LMHeadModel(cfg), "tokens"
    if name == "bert":
        cfg = T.BertConfig(num_hidden_layers=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        return T.BertForMaskedLM(cfg), "tokens"
    if name == "vit":
        cfg = T.ViTConfig(hidden_size=192, num_hidden_layers=12, num_attention_heads=3, intermediate_size=768,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        return T.ViTModel(cfg), "images"
    if name == "resnet":
        cfg = T.ResNetConfig(embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2], layer_type="basic")
        return T.ResNetModel(cfg), "images"
    if name == "convnext":  # ConvNeXt-T: depthwise 7x7 convolutions, channels-last LayerNorms and MLPs
        return T.ConvNextModel(T.ConvNextConfig(drop_path_rate=0.0)), "images"
    if name == "beit":  # relative-position bias: a gather of a table by computed indices, in every layer
        cfg = T.BeitConfig(num_hidden_layers=4, use_relative_position_bias=True, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, drop_path_rate=0.0)
        return T.BeitModel(cfg), "images"
    if name == "llama":
        cfg = T.LlamaConfig(num_hidden_layers=4, hidden_size=512, num_attention_heads=8, num_key_value_heads=4,
                            intermediate_size=1376, vocab_size=32000, max_position_embeddings=1024)
        return T.LlamaForCausalLM(cfg), "tokens"
    raise SystemExit(f"unknown model {name}")


def inputs(kind: str, batch: int, size: int, dtype, g, device: str = "cuda") -> dict:
    if kind == "tokens":
        ids = torch.randint(0, 30000, (batch, size), generator=g).to(device)
        return {"input_ids": ids, "labels": ids}
    return {"pixel_values": torch.randn(batch, 3, size, size, generator=g).to(device, dtype)}


def loss_of(out) -> torch.Tensor:
    if getattr(out, "loss", None) is not None:
        return out.loss
    hidden = out.pooler_output if getattr(out, "pooler_output", None) is not None else out.last_hidden_state
    return hidden.float().square().mean()


def main_of(out) -> torch.Tensor:
    for key in ("logits", "last_hidden_state", "pooler_output"):
        v = getattr(out, key, None)
        if v is not None:
            return v
    raise AssertionError("no output")


def rel_error(got: torch.Tensor, want: torch.Tensor, floor: float = 1e-12) -> float:
    """The error's norm relative to eager's value's, or to ``floor`` where that is smaller."""
    return ((got.float() - want.float()).norm() / max(want.float().norm().item(), floor)).item()


def gradient_errors(got: dict, want: dict) -> list[float]:
    """Each gradient's error relative to its norm, floored at 1e-3 of the median gradient norm: a gradient zero
    in exact arithmetic (an attention key's bias: softmax ignores a constant added to a row's scores) comes
    out as rounding noise of ~1e-6, whose relative error against another rounding says nothing (BERT bf16:
    1.4 for every compiler)."""
    norms = sorted(w.float().norm().item() for w in want.values())
    floor = 1e-3 * norms[len(norms) // 2] if norms else 1e-12
    return [rel_error(got[n], want[n], floor) for n in want if n in got]


GENERATED = ("fusec_", "triton_")  # kernels the compilers generate; the rest are library calls (cuBLAS, cuDNN, aten)


def profile_kernels(call, top: int = 0) -> tuple[int, float, list, float]:
    """Kernels per call, their device µs, the ``top`` kernel names by total device time (name, count, µs), and
    the device µs of generated kernels (the rest is library time, the same for every backend but for layouts)."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        call()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    by_name: dict[str, list[float]] = {}
    for e in events:
        by_name.setdefault(e.name[:70], []).append(e.device_time)
    slowest = sorted(((n, len(t), round(sum(t), 1)) for n, t in by_name.items()), key=lambda r: -r[2])[:top]
    generated = sum(e.device_time for e in events if e.name.startswith(GENERATED))
    return len(events), sum(e.device_time for e in events), slowest, generated


def host_profile(call, top: int, calls: int = 20) -> list[str]:
    """The ``top`` functions by own host time over ``calls`` calls (cProfile), and Triton's launch hook."""
    import cProfile
    import pstats

    import triton

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]  # (file, line, fn) -> (cc, nc, tt, ct, callers)
    hook = triton.knobs.runtime.launch_enter_hook
    return [f"launch_enter_hook={hook!r}"] + [
        f"{tt / calls * 1e6:9.1f} µs/call own {ct / calls * 1e6:9.1f} cum  x{nc // calls:<5} {fn}  {file.rsplit('/', 2)[-1]}:{line}"
        for (file, line, fn), (cc, nc, tt, ct, _) in rows]


def one(args) -> dict:
    """One configuration, in this (fresh) process."""
    torch.manual_seed(0)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    model, kind = build(args.model)
    model = model.to("cuda", dtype).train(args.mode == "train")
    batch, size = SIZES[args.model]
    data = inputs(kind, batch, size, dtype, torch.Generator().manual_seed(1))
    if args.mode == "infer":
        data.pop("labels", None)

    def run(m, d):
        if args.mode == "infer":
            with torch.no_grad():
                return main_of(m(**d))
        m.zero_grad(set_to_none=True)
        loss = loss_of(m(**d))
        loss.backward()
        return loss.detach()

    def grads(m):
        return {n: p.grad.detach().clone() for n, p in m.named_parameters() if p.grad is not None}

    want = run(model, data)
    want_grads = grads(model) if args.mode == "train" else {}
    compiled = model
    if args.backend == "eager":
        pass
    elif args.backend.startswith("fusec"):
        compiled.compile(backend="fusec", dynamic=args.dynamic or None, options=fusec_variant(args.backend))
    else:
        import torch._inductor.config as ic

        ic.combo_kernels = args.backend.startswith("inductor-combo")
        compiled.compile(dynamic=args.dynamic or None, mode="reduce-overhead" if args.backend.endswith("-ro") else None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.synchronize()
        start = time.perf_counter()
        got = run(compiled, data)
        torch.cuda.synchronize()
        first = time.perf_counter() - start
    fallbacks = [str(w.message) for w in caught if "runs with torch" in str(w.message)]
    errors = [rel_error(got, want)]
    if args.mode == "train":
        got_grads = grads(compiled)
        errors += gradient_errors(got_grads, want_grads)
        errors.append(float(len(set(want_grads) ^ set(got_grads))))  # a missing gradient counts as error 1+
    # The wall time before the CUDA profiler runs (after it, launches can stay slower for the rest of the process),
    # after the compile's garbage is collected and a few warm calls: a full collection of a compile's objects inside
    # the loop once cost a whole configuration several ms per call, in no repeatable way.
    # The median of 5 rounds of --calls calls, as bench/wall.py: one round of 10 calls read GPT-2's inference at
    # 2.37 ms where wall.py's rounds on the next machine read 1.07.
    gc.collect()
    for _ in range(3):
        run(compiled, data)
    rounds = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.calls):
            run(compiled, data)
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) / args.calls * 1e3)
    wall_ms = statistics.median(rounds)
    host_top = host_profile(lambda: run(compiled, data), args.host_profile) if args.host_profile else []
    kernels, device_us, slowest, generated_us = profile_kernels(lambda: run(compiled, data), args.top)
    second = None
    if args.dynamic:
        counters = __import__("torch._dynamo.utils", fromlist=["counters"]).counters
        before = sum(counters["stats"].values())
        data2 = inputs(kind, batch // 2 or 1, size if kind == "images" else size // 2, dtype, torch.Generator().manual_seed(2))
        if args.mode == "infer":
            data2.pop("labels", None)
        run(compiled, data2)
        second = {"frames_after_second_size": sum(counters["stats"].values()) - before}
    return {"model": args.model, "mode": args.mode, "dtype": args.dtype, "backend": args.backend, "dynamic": args.dynamic,
            "fallbacks": fallbacks, "max_error": max(errors), "first_call_s": first, "kernels": kernels,
            "device_us": device_us, "generated_us": generated_us, "wall_ms": wall_ms, "second_size": second, "slowest": slowest,
            "host_top": host_top}


def fusec_variant(name: str) -> dict:
    """Options of the fusec variants compared here: ``fusec`` (the defaults), ``fusec-unpadded`` (the default
    pipeline without pad-matmuls), ``fusec-pooling`` (native_pooling), ``fusec-ro`` (CUDA graphs, as Inductor's
    ``inductor-ro`` and ``inductor-combo-ro``: mode="reduce-overhead"); ``fusec+PASS{OPTIONS}+...`` is the default
    pipeline with each named pass given those options (``fusec+split-reductions{split-phases=false}``)."""
    if name.startswith("fusec+"):
        from fusec.pipeline import default_pipeline_spec

        spec = default_pipeline_spec()
        for override in name.split("+")[1:]:
            pass_name = override.split("{")[0]
            spec, count = re.subn(rf"(?<![\w-]){re.escape(pass_name)}(\{{[^}}]*\}})?(?![\w-])", override, spec)
            if not count:
                raise SystemExit(f"{name}: no pass {pass_name!r} in the default pipeline")
        return {"pipeline": spec}
    if name == "fusec-cl":  # channels-last on every graph with convolutions, training graphs too
        from fusec.pipeline import default_pipeline_spec

        return {"pipeline": default_pipeline_spec().replace("channels-last", "channels-last{when=always}")}
    if name == "fusec-unpadded":
        from fusec.pipeline import default_pipeline_spec

        return {"pipeline": default_pipeline_spec().replace("pad-matmuls,", "")}
    return {"fusec": {}, "fusec-pooling": {"native_pooling": True}, "fusec-ro": {"cudagraphs": True},
            "fusec-math-attention": {"dense_attention_masks": False}}[name]


def failure(stderr: str) -> str:
    """The exception line of a failed run (Dynamo ends its message with advice, not the cause)."""
    lines = stderr.strip().splitlines() or ["no output"]
    causes = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b", line)]
    return (causes or lines)[-1]


def table(rows: list[dict]) -> str:
    head = ["model", "mode", "dtype", "backend", "fallbacks", "max rel. error", "first call s", "kernels", "device µs",
            "of it generated", "wall ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['mode']} | {r['dtype']} | {r['backend']} | failed: {r['error'][:80]} |")
            continue
        lines.append(f"| {r['model']} | {r['mode']} | {r['dtype']} | {r['backend']}{' dyn' if r['dynamic'] else ''} | "
                     f"{len(r['fallbacks'])} | {r['max_error']:.1e} | {r['first_call_s']:.1f} | {r['kernels']} | "
                     f"{r['device_us']:.0f} | {r.get('generated_us', 0):.0f} | {r['wall_ms']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="gpt2,bert,vit,resnet,llama")
    p.add_argument("--dtypes", default="bf16,fp32")
    p.add_argument("--modes", default="infer,train")
    p.add_argument("--backends", default="fusec,inductor,inductor-combo")
    p.add_argument("--dynamic", action="store_true")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--top", type=int, default=0, help="also list the N kernels with the most device time per run")
    p.add_argument("--host-profile", type=int, default=0, help="also list the N functions with the most host time per call")
    p.add_argument("--json")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--dtype", help=argparse.SUPPRESS)
    p.add_argument("--warm", action="store_true", help="run each configuration a second time in a new process "
                   "with the first one's caches (compile caches on): the warm start's first call")
    p.add_argument("--backend", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print("RESULT " + json.dumps(one(args)))
        return
    rows = []
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            for dtype in args.dtypes.split(","):
                for backend in args.backends.split(","):
                    cmd = [sys.executable, __file__, "--one", "--model", model, "--mode", mode, "--dtype", dtype,
                           "--backend", backend, "--calls", str(args.calls), "--top", str(args.top),
                           "--host-profile", str(args.host_profile)]
                    cmd += ["--dynamic"] if args.dynamic else []
                    with tempfile.TemporaryDirectory() as cache:
                        caches = "1" if args.warm else "0"  # a warm start reads what the first process wrote
                        # Triton's cache too: rows share kernels (fusec's variants compile the same ones), and a row
                        # after another would find them compiled, its first call warm.
                        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "FUSEC_CACHE_DIR": cache, "TRITON_CACHE_DIR": cache,
                               "TORCHINDUCTOR_FX_GRAPH_CACHE": caches, "TORCHINDUCTOR_AUTOGRAD_CACHE": caches}
                        for label in [backend, f"{backend} warm"][:2 if args.warm else 1]:
                            try:
                                done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
                                result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
                                row = json.loads(result[-1][7:]) if result else {"error": failure(done.stderr)}
                            except subprocess.TimeoutExpired:
                                row = {"error": f"timed out after {args.timeout} s"}
                            for key, value in {"model": model, "mode": mode, "dtype": dtype}.items():
                                row.setdefault(key, value)
                            row["backend"] = label
                            rows.append(row)
                            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(table(rows))
    for r in rows:
        for name, count, us in r.get("slowest") or []:
            print(f"  {r['model']} {r['mode']} {r['dtype']} {r['backend']}: {us:8.1f} µs  x{count}  {name}")
        for line in r.get("host_top") or []:
            print(f"  host {r['model']} {r['mode']} {r['dtype']} {r['backend']}: {line}")


if __name__ == "__main__":
    main()
