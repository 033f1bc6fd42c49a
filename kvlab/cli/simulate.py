"""``kvlab simulate``: serve a synthetic workload, sessions or a JSON trace and print the summary;
with ``--gpu`` every step is timed and the summary gains TTFT, TPOT, throughputs and wall time."""

from __future__ import annotations

import argparse
import dataclasses
import json
import warnings

from kvlab.cli.engine_args import add_engine_arguments, engine_config, print_table
from kvlab.cli.timing_args import (
    add_timing_arguments,
    check_timing_arguments,
    kv_memory_from_gpu,
    metrics_json,
    print_timing,
    timed_workload,
)
from kvlab.serving import simulate
from kvlab.simulator import load_trace, synthetic_workload
from kvlab.timing import PureRooflineWarning


def _length(text: str) -> int | tuple[int, int]:
    try:
        if ":" in text:
            lo, hi = text.split(":", 1)
            return int(lo), int(hi)
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or LOW:HIGH tokens, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    check_timing_arguments(args)
    estimate = kv_memory_from_gpu(args)
    config = engine_config(args)
    if args.trace:
        workload = load_trace(args.trace)
    elif args.sessions is not None:
        workload = None
    else:
        workload = synthetic_workload(
            args.num_requests,
            args.prompt_tokens,
            args.output_tokens,
            args.arrival_rate,
            args.shared_prefix_tokens,
            args.seed,
        )
    workload = timed_workload(args, workload)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PureRooflineWarning)
        result = simulate(
            config,
            workload,
            max_steps=args.max_steps,
            detail="counts",
            gpu=args.gpu,
            weight_dtype=args.weight_dtype,
            max_concurrency=args.max_concurrency,
            progress=not args.json,
        )
    notes = [str(w.message) for w in caught]
    s = result.summary
    stalled = dataclasses.asdict(s.stalled) if s.stalled else None
    if args.json:
        print(
            json.dumps(
                {
                    **(metrics_json(result.metrics) if result.metrics else {}),
                    **({"kv_cache_memory_estimate_bytes": estimate.kv_cache_bytes} if estimate else {}),
                    "warnings": notes,
                    "policy": result.policy,
                    "profile": config.profile,
                    "requests": len(workload),
                    "steps": s.steps,
                    "finished": s.finished,
                    "rejected": s.rejected,
                    "unfinished": s.unfinished,
                    "preemptions": s.preemptions,
                    "peak_running": s.peak_running,
                    "peak_blocks_in_use": s.peak_blocks_in_use,
                    "pool_blocks": result.timeline[0].pool_size if result.timeline else 0,
                    "stalled": stalled,
                    "step_cap_reached": s.step_cap_reached,
                    "rejections": [dataclasses.asdict(r) for r in result.rejections],
                },
                indent=2,
            )
        )
        return 0
    print(
        f"{config.model_kv.name}  TP={config.tensor_parallel_size}  profile={config.profile}  "
        f"policy={result.policy}  requests={len(workload)}"
    )
    print_table(
        [
            [k, str(v)]
            for k, v in (
                ("steps", s.steps),
                ("finished", s.finished),
                ("rejected", s.rejected),
                ("unfinished", s.unfinished),
                ("preemptions", s.preemptions),
                ("peak running", s.peak_running),
                ("peak blocks in use", s.peak_blocks_in_use),
                ("step cap reached", s.step_cap_reached),
            )
        ],
        ["summary", "value"],
    )
    print_timing(result, estimate, notes)
    if s.stalled:
        print(
            f"STALLED at step {s.stalled.step}: request {s.stalled.request_id} "
            f"needs {s.stalled.need} blocks, "
            f"pool has {s.stalled.pool_size} usable blocks ({s.stalled.reason})"
        )
    for r in result.rejections:
        print(f"rejected {r.request_id}: {r.reason}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="simulate serving a workload: admissions, preemptions, stalls")
    add_engine_arguments(p)
    p.add_argument(
        "--trace", default=None, help="JSON trace file (see kvlab.simulator.workload for the schema)"
    )
    p.add_argument("--num-requests", type=int, default=16, help="synthetic: number of requests (default 16)")
    p.add_argument(
        "--prompt-tokens", type=_length, default=4096, help="synthetic: N or LOW:HIGH (default 4096)"
    )
    p.add_argument(
        "--output-tokens", type=_length, default=128, help="synthetic: N or LOW:HIGH (default 128)"
    )
    p.add_argument(
        "--arrival-rate",
        type=float,
        default=None,
        help="synthetic: mean arrivals per step (Poisson); default all at step 0",
    )
    p.add_argument(
        "--shared-prefix-tokens", type=int, default=0, help="synthetic: tokens every prompt shares"
    )
    p.add_argument("--seed", type=int, default=0, help="synthetic: random seed (default 0)")
    p.add_argument("--max-steps", type=int, default=200_000, help="hard step cap (default 200000)")
    add_timing_arguments(p)
    p.set_defaults(func=run)
