"""Allocator and simulator speed (not a test).

Measures: the ``capacity`` call; simulated steps per second for 1,000 requests (8k prompt, 256 output)
on Gemma 4 31B at TP=2 under each admission policy; and the 16-request re-simulation the widgets run
on every slider move (median and p95). Prints a table and writes
``benchmarks/results/allocator_<host>.csv``.

    python benchmarks/allocator_bench.py [--requests 1000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import csv
import platform
import socket
import statistics
import time
from pathlib import Path

from kvlab.admission import POLICY_NAMES
from kvlab.serving import EngineConfig, capacity, simulate
from kvlab.simulator import synthetic_workload

BASE = dict(
    model="gemma-4-31b",
    kv_cache_memory="16GiB",
    tensor_parallel_size=2,
    max_model_len=131072,
    profile="vllm-0.21",
)


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.95 * len(values))) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    rows = []

    config = EngineConfig(**BASE)
    times = timed(lambda: capacity(config.replace(kv_cache_memory=16 * 2**30 + 1)), 1)  # first, uncached plan
    times += timed(lambda: capacity(config), args.repeats)
    rows.append(("capacity() gemma-4-31b tp2 (cached plan)", "median ms", statistics.median(times[1:]) * 1e3))
    rows.append(("capacity() gemma-4-31b tp2 (first call)", "ms", times[0] * 1e3))

    big = synthetic_workload(args.requests, prompt_tokens=8192, output_tokens=256, seed=0)
    for policy in POLICY_NAMES:
        cfg = config.replace(policy=policy)
        t0 = time.perf_counter()
        result = simulate(cfg, big, detail="counts")
        elapsed = time.perf_counter() - t0
        s = result.summary
        note = f"finished={s.finished} preempt={s.preemptions} stalled={'yes' if s.stalled else 'no'}"
        rows.append(
            (f"simulate {args.requests} req 8k/256 [{policy}] ({note})", "steps/s", s.steps / elapsed)
        )
        rows.append((f"simulate {args.requests} req 8k/256 [{policy}]", "steps", s.steps))

    small = synthetic_workload(
        16, prompt_tokens=(1000, 4000), output_tokens=(32, 128), arrival_rate=1.0, seed=0
    )
    times = timed(lambda: simulate(config, small), args.repeats)
    rows.append(
        ("re-simulate 16 requests (1k-4k prompt, 32-128 out)", "median ms", statistics.median(times) * 1e3)
    )
    rows.append(("re-simulate 16 requests (1k-4k prompt, 32-128 out)", "p95 ms", p95(times) * 1e3))

    width = max(len(r[0]) for r in rows)
    print(
        f"host: {platform.node() or 'cpu'}  python {platform.python_version()}  {platform.processor() or ''}"
    )
    for name, unit, value in rows:
        print(f"{name:<{width}}  {value:>12.2f}  {unit}")
    host = socket.gethostname() or "cpu"
    out = Path(__file__).parent / "results" / f"allocator_{host}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["measurement", "unit", "value"])
        w.writerows((n, u, f"{v:.4f}") for n, u, v in rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
