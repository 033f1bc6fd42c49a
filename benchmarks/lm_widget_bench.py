"""Latency of the answer explorer (lesson 07) once a scheme's runs are cached.

Builds the explorer (its first update scores every scheme and generates with the default scheme:
that cost is reported separately), visits a second scheme once (computed), then times a fixed
sequence of interactions that only revisit cached runs: prompt, metric and scheme changes. Each
interaction is timed until the figures and the generation view are updated (outside an event loop the
update runs synchronously, so the debounce delay is not included).

Target (issue figure): <= 1 s per interaction once a scheme's run is cached.

    python benchmarks/lm_widget_bench.py [--tokens 64] [--out benchmarks/results/lm_widget_cpu.csv]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0

#: Interactions over cached runs: (control, value).
CACHED_SEQUENCE: list[tuple[str, object]] = [
    ("prompt", 1), ("prompt", 2), ("prompt", 5), ("metric", "top1_agreement"), ("metric", "perplexity"),
    ("scheme", "fp8_e5m2"), ("prompt", 3), ("scheme", "int8_per_token_head"),
    ("metric", "mean_kl"), ("prompt", 0), ("scheme", "fp8_e5m2"), ("prompt", 7),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=64, help="tokens scored for the bars/curves")
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "lm_widget_cpu.csv"))
    args = parser.parse_args()
    from kvlab.widgets.answer_explorer import build_answer_explorer

    t0 = time.perf_counter()
    ex = build_answer_explorer(num_tokens=args.tokens, new_tokens=args.new_tokens, rounding="nearest",
                               debounce_s=0)
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    ex.controls["scheme"].value = "fp8_e5m2"  # first visit: generations of this scheme are computed
    ex.refresh()
    first_visit_s = time.perf_counter() - t1
    rows = []
    for control, value in CACHED_SEQUENCE:
        t = time.perf_counter()
        ex.controls[control].value = value
        ex.refresh()
        rows.append({"control": control, "value": value, "seconds": round(time.perf_counter() - t, 4),
                     "error": ex.last_error or ""})
    times = [r["seconds"] for r in rows]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["control", "value", "seconds", "error"])
        w.writeheader()
        w.writerows(rows)
        w.writerow({"control": "build (scores every scheme)", "value": args.tokens,
                    "seconds": round(build_s, 2), "error": ""})
        w.writerow({"control": "first visit of a scheme", "value": "fp8_e5m2",
                    "seconds": round(first_visit_s, 2), "error": ""})
    print(f"build {build_s:.1f} s, first visit of a scheme {first_visit_s:.1f} s")
    print(f"cached interactions: median {statistics.median(times) * 1e3:.0f} ms, "
          f"max {max(times) * 1e3:.0f} ms (target <= {TARGET_S:.0f} s: "
          f"{'met' if max(times) <= TARGET_S else 'NOT met'})")


if __name__ == "__main__":
    main()
