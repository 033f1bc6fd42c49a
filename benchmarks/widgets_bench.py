"""Latency of every explorer's update and cost of every lesson notebook, on this machine's CPU.

For each explorer (built with its default settings), a fixed sequence of control changes is applied
from Python; each change is timed until the figures have been recomputed and updated (outside an
event loop the update runs synchronously, so the debounce delay is not part of the measure). The
first visit of a value computes from scratch, revisits may hit caches: both are part of the
sequence, and the table reports the median, 95th percentile and maximum over all of them.

Each notebook in ``notebooks/*.py`` is then executed headless in a fresh kernel (nbclient), with the
wall time and the peak resident memory of the kernel's process tree.

Targets (2 CPU cores): median ≤ 100 ms and 95th percentile ≤ 150 ms per interaction; ≤ 60 s and
≤ 1.5 GB per notebook.

Some explorers draw their views in seconds just after the others (``Explorer.later``: in a notebook
the page draws the first figures while the rest is computed). Outside an event loop both run before
the change returns, so the columns time the whole update; ``1st`` columns (``first_*`` in the CSV)
time the update until the first figures were sent (``Explorer.first_view_s``).

Each interaction is timed twice: wall clock (what a user waits for on an idle machine) and the
process's CPU time (``time.process_time``: what the update costs, nearly unaffected when other
processes share the cores; on a loaded machine the wall time is inflated by the load). To compare
two versions, run both on the same machine one after the other and compare the CPU columns
(``--label`` names the version in the CSV; ``--append`` adds to an existing CSV).

    python benchmarks/widgets_bench.py [--skip-notebooks] [--out benchmarks/results/widgets_cpu.csv]
                                       [--label NAME] [--append] [--only EXPLORER ...]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INTERACTION_TARGET_MS = 100.0
INTERACTION_P95_TARGET_MS = 150.0
NOTEBOOK_TARGET_S = 60.0
NOTEBOOK_TARGET_BYTES = 1.5e9

#: explorer → (builder name, [(control, value), …]) applied in order.
SEQUENCES: dict[str, tuple[str, list[tuple[str, object]]]] = {
    "memory": ("build_memory_explorer", [
        ("kv_memory_gib", 24.0), ("kv_memory_gib", 32.0), ("kv_memory_gib", 12.0), ("kv_memory_gib", 20.0),
        ("max_model_len", 16384), ("max_model_len", 65536), ("max_model_len", 32768),
        ("kv_cache_dtype", "fp8"), ("kv_cache_dtype", "int8_per_token_head"), ("kv_cache_dtype", "auto"),
        ("tensor_parallel_size", 2), ("tensor_parallel_size", 1), ("model", "gemma-4-31b"),
        ("model", "gemma-3-27b"),
    ]),
    "quantization": ("build_quantization_explorer", [
        ("scheme", "fp8_e4m3"), ("scheme", "fp8_e5m2"), ("scheme", "fp8_per_token_head"),
        ("scheme", "bfloat16"), ("scheme", "int8_per_token_head"), ("head", 1), ("head", 2), ("head", 3),
        ("head", 0), ("rounding", "truncate"), ("rounding", "nearest"), ("outlier_strength", 10.0),
        ("outlier_strength", 30.0), ("outlier_strength", 20.0), ("context", 256), ("context", 1024),
        ("context", 512),
    ]),
    "admission": ("build_admission_explorer", [
        ("sliding_window", 512), ("sliding_window", 2048), ("sliding_window", 4096), ("sliding_window", 1024),
        ("max_num_batched_tokens", 1024), ("max_num_batched_tokens", 4096),
        ("max_num_batched_tokens", 2048), ("policy_b", "exact"), ("policy_b", "window_plus_chunk"),
        ("policy_b", "vllm"), ("workload", "chat burst"), ("workload", "long prompts"),
    ]),
    "block_map": ("build_block_map", [
        *[("step", s) for s in range(13, 41, 3)], ("pool_blocks", 384), ("pool_blocks", 512),
        ("prefix_caching", False), ("prefix_caching", True),
    ]),
    "kernel (reference)": ("build_kernel_explorer", [
        ("scheme", "fp8_e4m3"), ("scheme", "bfloat16"), ("scheme", "int8_per_token_head"),
        ("context", 32), ("context", 128), ("context", 64), ("query_len", 8), ("query_len", 1),
        ("sliding_window", 32), ("sliding_window", 0), ("outliers", True), ("outliers", False),
    ]),
    "serving dashboard": ("build_serving_dashboard", [
        ("kv_cache_dtype", "fp8"), ("kv_cache_dtype", "int8_per_token_head"), ("kv_cache_dtype", "auto"),
        ("kv_memory_gib", 24.0), ("kv_memory_gib", 8.0), ("kv_memory_gib", 16.0),
        ("workload", "long prompts"), ("workload", "chat burst"), ("policy", "exact"), ("policy", "vllm"),
    ]),
}


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation."""
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def bench_explorers(only: list[str] | None = None) -> list[dict]:
    import kvlab.widgets as widgets_module

    rows = []
    for name, (builder, sequence) in SEQUENCES.items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        explorer = getattr(widgets_module, builder)(debounce_s=0)
        build_s = time.perf_counter() - t0
        times, cpu, first, first_cpu = [], [], [], []
        for control, value in sequence:
            widget = explorer.controls[control]
            options = [o[1] if isinstance(o, tuple) else o for o in getattr(widget, "options", ())]
            if options and value == 0 and value not in options and None in options:
                value = None  # older explorers spelled "none" as None
            start, start_cpu = time.perf_counter(), time.process_time()
            widget.value = value
            times.append((time.perf_counter() - start) * 1e3)
            cpu.append((time.process_time() - start_cpu) * 1e3)
            first.append(explorer.first_view_s[0] * 1e3)
            first_cpu.append(explorer.first_view_s[1] * 1e3)
            if explorer.last_error:
                raise RuntimeError(f"{name}: setting {control}={value!r} failed: {explorer.last_error}")
        rows.append(dict(kind="interaction", name=name, n=len(times), median_ms=statistics.median(times),
                         p95_ms=percentile(times, 95), max_ms=max(times),
                         cpu_median_ms=statistics.median(cpu), cpu_p95_ms=percentile(cpu, 95),
                         cpu_max_ms=max(cpu), build_s=build_s,
                         first_median_ms=statistics.median(first), first_p95_ms=percentile(first, 95),
                         first_cpu_median_ms=statistics.median(first_cpu),
                         first_cpu_p95_ms=percentile(first_cpu, 95)))
    return rows


def bench_notebooks() -> list[dict]:
    from kvlab.lessons import run_notebook

    rows = []
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        run = run_notebook(path)
        rows.append(dict(kind="notebook", name=path.stem, seconds=run.seconds,
                         peak_rss_mb=run.peak_rss_bytes / 1e6, error=run.error or ""))
    return rows


def _meets(row: dict, prefix: str = "") -> bool:
    """The interaction targets, judged on CPU time (the wall clock also counts other processes):
    of the whole update, or with ``prefix="first_"`` of its first view."""
    return (row[f"{prefix}cpu_median_ms"] <= INTERACTION_TARGET_MS
            and row[f"{prefix}cpu_p95_ms"] <= INTERACTION_P95_TARGET_MS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-notebooks", action="store_true", help="only time the explorers")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "widgets_cpu.csv"))
    parser.add_argument("--label", default="", help="name of the version measured (a CSV column)")
    parser.add_argument("--append", action="store_true", help="add rows to --out instead of replacing it")
    parser.add_argument("--only", action="append", choices=sorted(SEQUENCES), metavar="EXPLORER",
                        help=f"time only this explorer (repeatable; one of {', '.join(sorted(SEQUENCES))})")
    args = parser.parse_args(argv)

    machine = dict(cpus=os.cpu_count(), load_1min=round(os.getloadavg()[0], 2), python=sys.version.split()[0])
    explorers = bench_explorers(args.only)
    notebooks = [] if args.skip_notebooks else bench_notebooks()

    print(f"CPU cores {machine['cpus']}, load average at start {machine['load_1min']}")
    print(f"\n{'explorer':<20}{'n':>4}{'median ms':>11}{'p95 ms':>9}{'max ms':>9}{'CPU med':>9}{'CPU p95':>9}"
          f"{'1st med':>9}{'1st p95':>9}{'build s':>9}  "
          f"target (CPU) ≤ {INTERACTION_TARGET_MS:.0f} ms median, "
          f"≤ {INTERACTION_P95_TARGET_MS:.0f} ms p95 (whole update; first view)")
    for r in explorers:
        ok = ("ok" if _meets(r) else "OVER") + "; " + ("ok" if _meets(r, "first_") else "OVER")
        print(f"{r['name']:<20}{r['n']:>4}{r['median_ms']:>11.1f}{r['p95_ms']:>9.1f}{r['max_ms']:>9.1f}"
              f"{r['cpu_median_ms']:>9.1f}{r['cpu_p95_ms']:>9.1f}{r['first_cpu_median_ms']:>9.1f}"
              f"{r['first_cpu_p95_ms']:>9.1f}{r['build_s']:>9.2f}  {ok}")
    if notebooks:
        print(f"\n{'notebook':<40}{'seconds':>9}{'peak RSS MB':>13}  target ≤ {NOTEBOOK_TARGET_S:.0f} s, "
              f"≤ {NOTEBOOK_TARGET_BYTES / 1e9:.1f} GB")
        for r in notebooks:
            ok = r["seconds"] <= NOTEBOOK_TARGET_S and r["peak_rss_mb"] * 1e6 <= NOTEBOOK_TARGET_BYTES
            status = "ok" if ok and not r["error"] else ("ERROR " + r["error"] if r["error"] else "OVER")
            print(f"{r['name']:<40}{r['seconds']:>9.1f}{r['peak_rss_mb']:>13.0f}  {status}")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = ["label", "kind", "name", "n", "median_ms", "p95_ms", "max_ms", "cpu_median_ms", "cpu_p95_ms",
              "cpu_max_ms", "first_median_ms", "first_p95_ms", "first_cpu_median_ms", "first_cpu_p95_ms",
              "first_view_meets_target", "build_s", "seconds", "peak_rss_mb", "error", "target",
              "meets_target", "cpus", "load_1min", "python"]
    machine["label"] = args.label
    append = args.append and out.exists()
    with out.open("a" if append else "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        if not append:
            w.writeheader()
        for r in explorers:
            target = (f"CPU median <= {INTERACTION_TARGET_MS:.0f} ms, "
                      f"p95 <= {INTERACTION_P95_TARGET_MS:.0f} ms")
            w.writerow({**r, **machine, "target": target, "meets_target": _meets(r),
                        "first_view_meets_target": _meets(r, "first_")})
        for r in notebooks:
            ok = r["seconds"] <= NOTEBOOK_TARGET_S and r["peak_rss_mb"] * 1e6 <= NOTEBOOK_TARGET_BYTES
            w.writerow({**r, **machine, "target": "<= 60 s and <= 1.5 GB",
                        "meets_target": ok and not r["error"]})
    print(f"\nwritten {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
