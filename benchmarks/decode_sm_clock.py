"""The SM clock and board power while a B=64 decode runs: what the issue floors of ``lowbit_notes.md``
divide by, and whether a decode runs into the board's power limit.

A decode kernel whose loop issues ``N`` warp-instructions cannot finish before ``N / (SMs × 4 ×
clock)``; that floor depends on the clock the GPU actually holds under the load, not on its
maximum. For each scheme this script times the B=64, L=32768 decode as ``kvlab bench`` does
(CUDA-graph replays after the steady-state warm-up), then replays it for ``SECONDS`` more while
``nvidia-smi`` samples the SM clock and the power draw every 100 ms, and writes one row per scheme:
µs, samples, the median / lowest / highest SM clock, the board's maximum clock, the median / highest
power draw (W) and the board's power limit (W). Output: ``decode_sm_clock.csv`` in the
folder given as the first argument (default ``.``).

    PYTHONPATH=. python3 benchmarks/decode_sm_clock.py "$OUT"
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from decode_gap_ab import LOWBIT, paged_sets  # the same cache builders (same folder)

from kvlab.bench.attention_cases import attention_case
from kvlab.bench.config import BenchConfig
from kvlab.bench.context import gpu_context
from kvlab.bench.measure import time_graph_us
from kvlab.bench.results import write_dict_rows
from kvlab.kernels.attention import prepare_paged_attention
from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention

SCHEMES = ("bfloat16", "fp8_e4m3", "int8_per_token_head", "fp8_per_token_head", "int4_per_token_head",
           "kivi4", "kivi2")
SECONDS = 3.0


def sampled(step, seconds: float) -> list[tuple[int, float]]:
    """``(SM clock MHz, power draw W)`` samples taken every 100 ms while ``step`` runs for ``seconds``."""
    with tempfile.NamedTemporaryFile("r", suffix=".csv") as log:
        probe = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                                  "--format=csv,noheader,nounits", "-lms", "100", "-f", log.name])
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(8):
                step()
            torch.cuda.synchronize()
        probe.terminate()
        probe.wait()
        with open(log.name) as written:  # by name: nvidia-smi opens the file itself
            pairs = [line.split(",") for line in written.read().splitlines() if "," in line]
        return [(int(c), float(w)) for c, w in pairs if c.strip().isdigit()]


def main() -> None:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    config = BenchConfig()
    ctx = gpu_context()
    query = ["nvidia-smi", "--query-gpu=clocks.max.sm,power.limit", "--format=csv,noheader,nounits"]
    board = subprocess.run(query, capture_output=True, text=True, check=True).stdout.split(",")
    max_clock, power_limit = int(board[0]), float(board[1])
    case = attention_case(config, 64, 32768, 1)
    rows = []
    for scheme in SCHEMES:
        cache, batches = paged_sets(config, case, scheme)
        prep = prepare_lowbit_attention if scheme in LOWBIT else prepare_paged_attention
        calls = [prep(case.queries[s], cache, batches[s]) for s in range(case.sets)]
        us = time_graph_us([c.run for c in calls], config.repeats)
        samples = sampled(calls[0].run, SECONDS)
        clocks, watts = [c for c, _ in samples], [w for _, w in samples]
        rows.append(dict(device=ctx.device, batch=64, context=32768, scheme=scheme, us=round(us, 1),
                         samples=len(samples), sm_mhz_median=statistics.median(clocks),
                         sm_mhz_min=min(clocks),
                         sm_mhz_max=max(clocks), sm_mhz_board_max=max_clock,
                         power_w_median=round(statistics.median(watts), 1), power_w_max=round(max(watts), 1),
                         power_w_limit=power_limit))
        print(rows[-1], flush=True)
        del calls, cache, batches
        torch.cuda.empty_cache()
    write_dict_rows(rows, os.path.join(out_dir, "decode_sm_clock.csv"))


if __name__ == "__main__":
    main()
