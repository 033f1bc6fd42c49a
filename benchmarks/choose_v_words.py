"""Read a sweep CSV and say whether 8-bit decode should decode V from 32-bit words (``v_words``).

    python benchmarks/choose_v_words.py OUT/sweep_<GPU>.csv      prints "yes" or "no" last

The rule: the ``v_words`` twin of the automatic tiling must be faster at B=64 (both 8-bit
per-token-head schemes, by more than 2% on average), no more than 3% slower on any other decode case
of the sweep, and no less accurate (relative error within 1% of the automatic row's).
"""

from __future__ import annotations

import csv
import sys


def main(path: str) -> str:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    auto = {(r["scheme"], r["batch"], r["context"]): r for r in rows
            if r["kind"] == "decode" and r["backend"] == "kvlab-triton"}
    ratios, ok = {}, True
    for r in rows:
        if r["kind"] != "decode" or r["backend"] != "kvlab-triton-sweep-vwords":
            continue
        a = auto.get((r["scheme"], r["batch"], r["context"]))
        if a is None or (r["tile_n"], r["num_stages"], r["num_splits"]) != (a["tile_n"], a["num_stages"],
                                                                           a["num_splits"]):
            continue
        ratio = float(r["median_us"]) / float(a["median_us"])
        ratios[(r["scheme"], r["batch"], r["context"])] = ratio
        ok &= float(r["rel_err_truth"]) <= 1.01 * float(a["rel_err_truth"])
        print(f"{r['scheme']:20s} B={r['batch']:<3} L={r['context']:<6} v_words/auto time {ratio:.3f}")
    big = [v for (s, b, c), v in ratios.items() if b == "64"]
    ok &= bool(big) and sum(big) / len(big) < 0.98
    ok &= all(v <= 1.03 for v in ratios.values())
    return "yes" if ok else "no"


if __name__ == "__main__":
    print(main(sys.argv[1]))
