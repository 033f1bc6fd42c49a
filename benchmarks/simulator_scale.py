"""How fast the timed simulator runs (CPU seconds), against the targets.

    python benchmarks/simulator_scale.py [--quick]

* the PR #39866 scenario (Gemma 4 31B NVFP4 on a B200, 4 sessions × 5 turns over 65K tokens,
  1.32M prompt tokens, the released ``vllm`` gate): target <= 5 s on one core;
* 10,000 requests of 1,024 prompt / 256 output tokens (Llama 3.1 8B on an H100, KV memory from
  utilization 0.9, all sent at once): target <= 30 s.

Prints a table and writes ``benchmarks/results/simulator_scale.csv`` (with the machine's load, since
a busy machine slows the numbers down). ``--quick`` runs 1,000 requests instead of 10,000.
"""

from __future__ import annotations

import csv
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvlab.models import get_model  # noqa: E402
from kvlab.serving import EngineConfig, simulate  # noqa: E402
from kvlab.simulator import session_workload, synthetic_workload  # noqa: E402
from kvlab.timing import estimate_kv_cache_memory  # noqa: E402


def timed(label: str, target_s: float, config: EngineConfig, work, **kw) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulate(config, work, detail="counts", progress=True, **kw)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = res.metrics
    return dict(
        case=label,
        requests=len(work),
        steps=res.summary.steps,
        finished=m.finished,
        simulated_wall_time_s=round(m.wall_time_s, 2),
        cpu_s=round(cpu, 2),
        elapsed_s=round(wall, 2),
        target_s=target_s,
        meets_target=cpu <= target_s,
        load_1min=round(os.getloadavg()[0], 2),
        python=platform.python_version(),
    )


def main() -> None:
    n = 1000 if "--quick" in sys.argv else 10_000
    rows = []
    est = estimate_kv_cache_memory("b200", get_model("gemma-4-31b"), "nvfp4", 0.9, 1, 8192)
    gemma = EngineConfig(
        "gemma-4-31b",
        kv_cache_memory=est.kv_cache_bytes,
        max_model_len=131072,
        max_num_seqs=64,
        profile="vllm-0.21",
    )
    rows.append(
        timed(
            "PR #39866 scenario (1.32M prompt tokens)",
            5.0,
            gemma,
            session_workload(4, 5, 65_000),
            gpu="b200",
            weight_dtype="nvfp4",
        )
    )
    est = estimate_kv_cache_memory("h100", get_model("llama-3.1-8b"), "bf16", 0.9, 1, 8192)
    llama = EngineConfig("llama-3.1-8b", kv_cache_memory=est.kv_cache_bytes, max_model_len=4096)
    target = 30.0 if n == 10_000 else 3.0
    rows.append(
        timed(f"{n:,} requests of 1K/256", target, llama, synthetic_workload(n, 1024, 256), gpu="h100")
    )
    for r in rows:
        print(
            f"{r['case']:42} steps {r['steps']:7,}  CPU {r['cpu_s']:7.2f} s  (target <= {r['target_s']} s: "
            f"{'met' if r['meets_target'] else 'NOT met'})  simulated {r['simulated_wall_time_s']:,.1f} s  "
            f"load {r['load_1min']}"
        )
    out = ROOT / "benchmarks" / "results" / "simulator_scale.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
