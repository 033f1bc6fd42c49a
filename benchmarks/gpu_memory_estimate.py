"""kvlab's KV-memory estimate from the GPU against real vLLM start-ups that logged their split.

    python benchmarks/gpu_memory_estimate.py

For each public log that states the GPU's total (or the GPU), the utilization and the weights or
the "Available KV cache memory", kvlab estimates weights and KV memory the way ``kvlab capacity
--gpu`` does (``kvlab.timing.estimate_kv_cache_memory``) and prints the difference. The column
``kv_sheet_gib`` repeats the estimate with the data sheet's decimal GB as the GPU's memory (what
kvlab used before it read CUDA's total), to show what that figure cost. Nothing here is fitted: the
estimate's activation term is an assumption (``max_num_batched_tokens × hidden × 36 B + 1 GiB``)
and vLLM's sampler pass over ``max_num_seqs`` logits, CUDA graphs and allocator slack are not
modelled, which is most of what the gpt-oss rows miss.

Writes ``benchmarks/results/gpu_memory_estimate.csv``.
"""

from __future__ import annotations

import csv
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvlab.hardware import get_gpu  # noqa: E402
from kvlab.models import get_model  # noqa: E402
from kvlab.timing import estimate_kv_cache_memory  # noqa: E402

GIB = 2**30

#: (label, source, model, gpu, total GiB logged or None, utilization, max_num_batched_tokens,
#:  MoE kernel, logged weights GiB or None, logged available KV GiB or None)
LOGS = [
    (
        "gpt-oss-120b vLLM 0.11.2, 1 GPU (80 GB), Marlin MXFP4",
        "https://github.com/tonghuikang/blog/blob/034b47cfaf722bbf5ae60d05552b1dac14492489/"
        "_posts/2025-12-28-vllm-logs.md",
        "gpt-oss-120b",
        "h100-sxm",
        None,
        0.96,
        8192,
        "marlin",
        65.97,
        8.99,
    ),
    (
        "gpt-oss-120b vLLM 0.10.1, H100, Marlin MXFP4",
        "https://github.com/vllm-project/vllm/issues/23278",
        "gpt-oss-120b",
        "h100-sxm",
        None,
        0.9,
        8192,
        "marlin",
        65.9651,
        -2.14,
    ),
    (
        "gpt-oss-120b vLLM 0.11 line, H100 80GB HBM3, --max-num-batched-tokens 1024",
        "https://github.com/vllm-project/vllm/issues/27508",
        "gpt-oss-120b",
        "h100-sxm",
        None,
        0.95,
        1024,
        "marlin",
        None,
        1.71,
    ),
    (
        "gpt-oss-120b vLLM 0.14.1, H100, Triton MXFP4",
        "https://github.com/vllm-project/vllm/issues/33155",
        "gpt-oss-120b",
        "h100-sxm",
        None,
        0.9,
        8192,
        "triton",
        64.38,
        None,
    ),
    (
        "Llama-3-8B (8.03e9 weights) vLLM V0, total 79.22 GiB",
        "https://github.com/vllm-project/vllm/pull/10511",
        "llama-3.1-8b",
        "h100-sxm",
        79.22,
        0.9,
        8192,
        "marlin",
        14.96,
        53.29,
    ),
    (
        "Llama-3.1-8B vLLM V0, RTX 3090, max_model_len 20000 (batched tokens = 20000)",
        "https://github.com/vllm-project/vllm/issues/10517",
        "llama-3.1-8b",
        "rtx-3090",
        None,
        0.9,
        20000,
        "marlin",
        14.99,
        3.81,
    ),
]


def estimate(model, gpu, util: float, tokens: int, kernel: str):
    return estimate_kv_cache_memory(gpu, model, "bf16", util, 1, tokens, 1, kernel)


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    rows = []
    for label, url, name, gpu_name, total, util, tokens, kernel, w_log, kv_log in LOGS:
        model = get_model(name)
        gpu = get_gpu(gpu_name)
        if total is not None:
            gpu = dataclasses.replace(gpu, memory_bytes=round(total * GIB))
        sheet = dataclasses.replace(gpu, memory_bytes=gpu.vendor_memory_bytes)
        est = estimate(model, gpu, util, tokens, kernel)
        try:
            kv_sheet = estimate(model, sheet, util, tokens, kernel).kv_cache_bytes / GIB
        except ValueError:
            kv_sheet = None  # the weights do not fit the data-sheet figure
        w, kv = est.weight_bytes / GIB, est.kv_cache_bytes / GIB
        rows.append(
            {
                "log": label,
                "source": url,
                "gpu_total_gib": round(gpu.memory_bytes / GIB, 2),
                "utilization": util,
                "weights_logged_gib": w_log,
                "weights_kvlab_gib": round(w, 2),
                "weights_diff_gib": None if w_log is None else round(w - w_log, 2),
                "kv_logged_gib": kv_log,
                "kv_kvlab_gib": round(kv, 2),
                "kv_diff_gib": None if kv_log is None else round(kv - kv_log, 2),
                "kv_sheet_gib": None if kv_sheet is None else round(kv_sheet, 2),
                "rest_logged_gib": None
                if None in (w_log, kv_log)
                else round(util * gpu.memory_bytes / GIB - w_log - kv_log, 2),
                "rest_kvlab_gib": round(est.activation_bytes / GIB, 2),
            }
        )
    head = [
        "log",
        "total",
        "util",
        "W log",
        "W kvlab",
        "KV log",
        "KV kvlab",
        "KV diff",
        "KV (sheet GB)",
        "rest log",
        "rest kvlab",
    ]
    print(" | ".join(head))
    for r in rows:
        print(
            " | ".join(
                [
                    r["log"],
                    fmt(r["gpu_total_gib"]),
                    f"{r['utilization']:.2f}",
                    fmt(r["weights_logged_gib"]),
                    fmt(r["weights_kvlab_gib"]),
                    fmt(r["kv_logged_gib"]),
                    fmt(r["kv_kvlab_gib"]),
                    fmt(r["kv_diff_gib"]),
                    "refused" if r["kv_sheet_gib"] is None else fmt(r["kv_sheet_gib"]),
                    fmt(r["rest_logged_gib"]),
                    fmt(r["rest_kvlab_gib"]),
                ]
            )
        )
    out = ROOT / "benchmarks/results/gpu_memory_estimate.csv"
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
