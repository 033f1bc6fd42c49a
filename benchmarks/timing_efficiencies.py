"""Fit the step-time model's kernel efficiencies to the measured kernel CSVs and ship the table.

    python benchmarks/timing_efficiencies.py

Reads benchmarks/results/decode_*.csv (written by ``kvlab bench``) and lowbit_*.csv (the low-bit
schemes' benchmark, for the schemes the first does not measure), fits
``time = latency + bytes / (efficiency × peak bandwidth)`` per scheme for decode and cache write,
and ``achieved / peak BF16 FLOP/s`` for prefill, prints the table and writes it to
kvlab/timing/kernel_efficiency.csv (what the time model reads) and benchmarks/results/.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvlab.timing.kernel_fit import fit_kernel_csv, write_efficiency_table  # noqa: E402


def main() -> None:
    rows = []
    results = ROOT / "benchmarks" / "results"
    # the main kernel benchmark first; the low-bit benchmark adds the schemes it alone measures
    for path in [*sorted(results.glob("decode_*.csv")), *sorted(results.glob("lowbit_*.csv"))]:
        with path.open() as f:
            if not {"scheme", "kind", "median_us", "bytes", "device"} <= set(f.readline().strip().split(",")):
                continue  # a summary table, not kernel timings
        known = {(r.scheme, r.kind) for r in rows}
        rows += [r for r in fit_kernel_csv(path, kernel="kvlab") if (r.scheme, r.kind) not in known]
    print(f"{'scheme':22} {'kind':8} {'eff':>6} {'latency us':>11} {'pts':>4}  gpu")
    for r in rows:
        print(f"{r.scheme:22} {r.kind:8} {r.efficiency:6.3f} {r.latency_s * 1e6:11.2f} {r.points:4}  {r.gpu}")
    out = ROOT / "kvlab" / "timing" / "kernel_efficiency.csv"
    write_efficiency_table(rows, out)
    shutil.copy(out, ROOT / "benchmarks" / "results" / "timing_kernel_efficiency.csv")
    print(f"wrote {out.relative_to(ROOT)} and benchmarks/results/timing_kernel_efficiency.csv")


if __name__ == "__main__":
    main()
