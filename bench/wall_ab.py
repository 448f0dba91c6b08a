"""Wall per call of one model under several backends, measured in interleaved processes (GPU).

    python bench/wall_ab.py MODEL infer|train BACKEND [BACKEND ...] [--rounds 3]

Runs ``bench/wall.py MODEL MODE BACKEND`` once per backend per round, the backends in turn (A B A B ...), each in a
fresh process, and prints each backend's per-process medians and their median.  One process per configuration is
not enough: on an H200 the same commit read GPT-2's inference at 2.06 ms in one process and 1.30 ms in the next
(thirty-second session), more than fusec and Inductor differ; interleaving spreads the machine's drift over all.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

WALL = re.compile(r"^WALL .* median ([0-9.]+) ms")


def one(model: str, mode: str, backend: str) -> float | str:
    """The median ms a call of one process of wall.py, or the reason it gave none."""
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("wall.py")), model, mode, backend],
                          capture_output=True, text=True)
    found = [float(m.group(1)) for line in done.stdout.splitlines() if (m := WALL.match(line))]
    if found:
        return found[-1]
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}, no output"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("mode", choices=["infer", "train"])
    p.add_argument("backends", nargs="+")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    runs: dict[str, list[float]] = {b: [] for b in args.backends}
    for r in range(args.rounds):
        for backend in args.backends:
            got = one(args.model, args.mode, backend)
            print(f"round {r + 1} {backend}: {got}", flush=True)
            if isinstance(got, float):
                runs[backend].append(got)
    print(f"\n| {args.model} {args.mode} | median of process medians, ms | each process |")
    print("|---|---|---|")
    for backend, values in runs.items():
        median = f"{statistics.median(values):.2f}" if values else "failed"
        print(f"| {backend} | {median} | {', '.join(f'{v:.2f}' for v in values)} |")


if __name__ == "__main__":
    main()
