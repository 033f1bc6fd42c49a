"""``kvlab gpus``: the GPU profiles and the efficiencies the step-time model uses."""

from __future__ import annotations

import argparse
import dataclasses
import json

from kvlab.cli.engine_args import print_table
from kvlab.hardware import GPU_PROFILES
from kvlab.timing import Efficiencies


def run(args: argparse.Namespace) -> int:
    eff = Efficiencies.from_table()
    if args.json:
        print(
            json.dumps(
                {
                    "gpus": [dataclasses.asdict(g) for g in GPU_PROFILES.values()],
                    "efficiencies": [
                        dict(zip(["part", "scheme", "value", "latency", "source"], r, strict=True))
                        for r in eff.rows()
                    ],
                },
                indent=2,
            )
        )
        return 0
    rows = [
        [
            g.name,
            g.description,
            f"{g.bf16_flops / 1e12:,.0f}",
            "-" if g.fp8_flops is None else f"{g.fp8_flops / 1e12:,.0f}",
            "-" if g.fp4_flops is None else f"{g.fp4_flops / 1e12:,.0f}",
            f"{g.memory_bandwidth / 1e9:,.0f}",
            f"{g.memory_bytes / 2**30:,.2f}",
            "-" if g.vendor_memory_bytes is None else f"{g.vendor_memory_bytes / 1e9:,.0f}",
            "-" if g.interconnect_bandwidth is None else f"{g.interconnect_bandwidth / 1e9:,.0f}",
        ]
        for g in GPU_PROFILES.values()
    ]
    print_table(
        rows, ["name", "GPU", "BF16 TFLOP/s", "FP8", "FP4", "GB/s", "CUDA GiB", "sheet GB", "link GB/s"]
    )
    print(
        "dense tensor-core peaks from the vendors' spec sheets; CUDA GiB is the total CUDA reports (what "
        "vLLM's gpu_memory_utilization multiplies), read off public logs "
        "(sources: kvlab.hardware.GPU_PROFILES)"
    )
    print()
    print_table(eff.rows(), ["step part", "kv dtype", "efficiency", "latency", "source"])
    print("efficiencies are fractions of the spec-sheet peak; edit them with kvlab.timing.Efficiencies")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gpus", help="list the GPU profiles and the step-time model's efficiencies")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=run)
