"""Predicted vs measured step times: the step-time model checked against real steps on a GPU.

    python benchmarks/timing_validation.py [benchmarks/results/timing_steps_<device>.csv]

Reads the steps and GEMM timings written by ``benchmarks/timing_validation_gpu.py``, predicts every
step with :class:`kvlab.timing.StepTimeModel` for the same synthetic model (no per-step overhead:
the steps were replayed as CUDA graphs) twice — with textbook GEMM efficiencies (0.70 of peak
FLOP/s, 0.85 of bandwidth), and with GEMM efficiencies fitted to the separate GEMM-only timings
(kvlab's defaults) — and writes
``benchmarks/results/timing_validation_<device>.csv`` and an HTML plot beside it.
Target: median absolute error <= 15 %, worst <= 30 %.
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvlab.models.model import LayerKV, ModelKV  # noqa: E402
from kvlab.timing import Efficiencies, StepTimeModel  # noqa: E402
from kvlab.timing.kernel_fit import fit_gemm_efficiency, gpu_of_device  # noqa: E402

LAYERS, HIDDEN, QH, KVH, HEAD, INTER = 4, 4096, 32, 8, 128, 14336
PARAMS = LAYERS * (HIDDEN * (QH + 2 * KVH) * HEAD + QH * HEAD * HIDDEN + HIDDEN * 2 * INTER + INTER * HIDDEN)
MODEL = ModelKV(
    "synthetic-llama-4-layers",
    tuple(LayerKV(f"layers.{i}", "full", KVH, HEAD) for i in range(LAYERS)),
    131072,
    num_attention_heads=QH,
    num_parameters=PARAMS,
)


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def chunks_of(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in part.split("x")) for part in text.split(";")]


def main() -> None:
    results = ROOT / "benchmarks" / "results"
    steps_path = Path(sys.argv[1]) if len(sys.argv) > 1 else sorted(results.glob("timing_steps_*.csv"))[-1]
    tag = steps_path.stem.removeprefix("timing_steps_")
    steps = read(steps_path)
    gemm = read(steps_path.with_name(f"timing_gemm_{tag}.csv"))
    gpu = gpu_of_device(steps[0]["device"])
    compute, memory = fit_gemm_efficiency(
        [int(r["tokens"]) for r in gemm],
        [float(r["measured_us"]) * 1e-6 for r in gemm],
        PARAMS,
        PARAMS * 2,
        gpu,
    )
    print(
        f"{gpu.name}: GEMM efficiencies fitted to {len(gemm)} GEMM-only timings: "
        f"compute {compute:.3f}, memory {memory:.3f} (assumed: 0.700, 0.850)"
    )
    variants = {
        "assumed": Efficiencies.from_table(step_overhead_s=0.0, gemm_compute=0.70, gemm_memory=0.85),
        "fitted_gemm": Efficiencies.from_table(step_overhead_s=0.0, gemm_compute=compute, gemm_memory=memory),
    }
    rows = []
    for r in steps:
        chunks = chunks_of(r["chunks"])
        measured = float(r["measured_us"])
        row = {
            "scheme": r["scheme"],
            "sequences": len(chunks),
            "tokens": int(r["tokens"]),
            "kind": "decode"
            if all(n == 1 for n, _ in chunks)
            else ("prefill" if len(chunks) == 1 else "mixed"),
            "context": max(c for _, c in chunks),
            "measured_us": measured,
        }
        for name, eff in variants.items():
            model = StepTimeModel(gpu, MODEL, r["scheme"], efficiencies=eff)
            pred = model(chunks) * 1e6
            row[f"predicted_us_{name}"] = round(pred, 2)
            row[f"error_{name}"] = round(pred / measured - 1, 4)
        rows.append(row)
    out = results / f"timing_validation_{tag}.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(
        f"{'scheme':20} {'kind':8} {'seqs':>4} {'ctx':>6} {'measured':>10} {'assumed':>10} {'err':>7} "
        f"{'fitted':>10} {'err':>7}"
    )
    for r in rows:
        print(
            f"{r['scheme']:20} {r['kind']:8} {r['sequences']:4d} {r['context']:6d} {r['measured_us']:10.1f} "
            f"{r['predicted_us_assumed']:10.1f} {r['error_assumed']:+7.1%} "
            f"{r['predicted_us_fitted_gemm']:10.1f} {r['error_fitted_gemm']:+7.1%}"
        )
    for name in variants:
        errs = [abs(r[f"error_{name}"]) for r in rows]
        print(
            f"{name:12s}: median |error| {statistics.median(errs):.1%} (target <= 15%), "
            f"worst {max(errs):.1%} (target <= 30%) over {len(errs)} steps"
        )
    print(f"wrote {out.relative_to(ROOT)}")
    try:
        from kvlab.plots.timing import validation_figure
    except ImportError:
        return
    fig = validation_figure(rows)
    html = out.with_suffix(".html")
    fig.write_html(html, include_plotlyjs="cdn")
    print(f"wrote {html.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
