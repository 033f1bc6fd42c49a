"""``kvlab simulate``'s time flags: GPU, weights, memory from the GPU, arrivals, sessions, metrics."""

from __future__ import annotations

import argparse
import math

from kvlab.cli.arg_types import token_count
from kvlab.hardware import GPU_NAMES
from kvlab.models import get_model
from kvlab.simulator import RunMetrics, SimulationResult, session_workload, with_poisson_arrivals
from kvlab.simulator.workload import RequestSpec
from kvlab.sizing.gpu_memory import WEIGHT_DTYPES, GPUMemoryEstimate
from kvlab.sizing.weight_bytes import MOE_KERNELS
from kvlab.timing import estimate_kv_cache_memory


def add_moe_kernel_argument(p: argparse.ArgumentParser) -> None:
    """Add ``--moe-kernel``: whose padding gpt-oss's MXFP4 experts get in the memory estimate."""
    p.add_argument(
        "--moe-kernel",
        default="marlin",
        choices=MOE_KERNELS,
        help="with --gpu, for MXFP4 experts (gpt-oss): the vLLM MoE kernel whose padding the weights get "
        "(marlin: vLLM <= 0.11 and GPUs without triton_kernels; triton: vLLM >= 0.12 on Hopper) "
        "(default marlin)",
    )


def add_timing_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--gpu``, ``--weight-dtype``, ``--gpu-memory-utilization``, ``--moe-kernel``, arrivals and
    sessions."""
    p.add_argument(
        "--gpu",
        default=None,
        help=f"time every step on this GPU (case-insensitive): {', '.join(GPU_NAMES)}; see `kvlab gpus`",
    )
    p.add_argument(
        "--weight-dtype", default="bf16", choices=WEIGHT_DTYPES, help="weights' dtype for the time model"
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=None,
        help="derive the KV-cache memory from the GPU's memory: utilization × memory − weights − "
        "activations (an estimate; needs --gpu; replaces --kv-cache-memory)",
    )
    add_moe_kernel_argument(p)
    p.add_argument("--max-concurrency", type=int, default=None, help="most requests in flight (closed loop)")
    p.add_argument(
        "--request-rate",
        type=float,
        default=None,
        help="Poisson arrivals, requests per second (needs --gpu); default all at 0 s",
    )
    p.add_argument("--sessions", type=int, default=None, help="multi-turn: number of sessions")
    p.add_argument("--turns", type=int, default=5, help="multi-turn: turns per session (default 5)")
    p.add_argument(
        "--session-context",
        type=token_count,
        default=65_000,
        help="multi-turn: document tokens each session starts with (default 65000)",
    )


def check_timing_arguments(args: argparse.Namespace) -> None:
    """Refuse flag combinations that need a time model without one, or that contradict each other."""
    if args.sessions is not None and args.trace:
        raise ValueError("--sessions builds its own requests: give either --sessions or --trace, not both")
    if args.gpu is None:
        for flag, value in (
            ("--gpu-memory-utilization", args.gpu_memory_utilization),
            ("--request-rate", args.request_rate),
        ):
            if value is not None:
                raise ValueError(f"{flag} needs --gpu (the GPU whose memory and speed it refers to)")


def kv_memory_from_gpu(args: argparse.Namespace) -> GPUMemoryEstimate | None:
    """With ``--gpu-memory-utilization``: the estimate, and ``args.kv_cache_memory`` set from it."""
    if args.gpu_memory_utilization is None:
        return None
    est = estimate_kv_cache_memory(
        args.gpu,
        get_model(args.model),
        args.weight_dtype,
        args.gpu_memory_utilization,
        args.tensor_parallel_size,
        args.max_num_batched_tokens,
        args.pipeline_parallel_size,
        args.moe_kernel,
    )
    args.kv_cache_memory = est.kv_cache_bytes
    return est


def timed_workload(args: argparse.Namespace, workload: list[RequestSpec] | None) -> list[RequestSpec]:
    """Sessions when ``--sessions`` is given; Poisson arrival times with ``--request-rate``."""
    if args.sessions is not None:
        answer = args.output_tokens if isinstance(args.output_tokens, int) else args.output_tokens[1]
        workload = session_workload(args.sessions, args.turns, args.session_context, output_tokens=answer)
    assert workload is not None
    if args.request_rate is not None:
        workload = with_poisson_arrivals(workload, args.request_rate, args.seed)
    return workload


def _ms(x: float) -> float | None:
    return None if math.isnan(x) else round(x * 1e3, 3)


def metrics_json(m: RunMetrics) -> dict:
    """The time results of a run as ``--json`` prints them (milliseconds, tokens/s)."""
    return {
        "wall_time_s": round(m.wall_time_s, 4),
        "output_tokens_per_s": round(m.output_tokens_per_s, 2),
        "prompt_tokens_per_s": round(m.prompt_tokens_per_s, 2),
        "requests_per_s": round(m.requests_per_s, 4),
        "mean_ttft_ms": _ms(m.ttft.mean),
        "p50_ttft_ms": _ms(m.ttft.p50),
        "p99_ttft_ms": _ms(m.ttft.p99),
        "mean_tpot_ms": _ms(m.tpot.mean),
        "p50_tpot_ms": _ms(m.tpot.p50),
        "p90_tpot_ms": _ms(m.tpot.p90),
        "p99_tpot_ms": _ms(m.tpot.p99),
        "mean_itl_ms": _ms(m.itl.mean),
        "p99_itl_ms": _ms(m.itl.p99),
        "mean_e2e_ms": _ms(m.e2e.mean),
        "mean_queueing_ms": _ms(m.queueing.mean),
        "prefix_cache_hit_rate": round(m.prefix_cache_hit_rate, 4),
    }


def print_timing(result: SimulationResult, est: GPUMemoryEstimate | None, warnings: list[str]) -> None:
    """The time part of the human-readable output."""
    if est is not None:
        print(est.describe())
    for w in warnings:
        print(f"warning: {w}")
    m = result.metrics
    if m is None:
        return
    j = metrics_json(m)
    print(
        f"wall time {m.wall_time_s:.2f} s   output {m.output_tokens_per_s:,.1f} tok/s   "
        f"prompt {m.prompt_tokens_per_s:,.1f} tok/s   {m.requests_per_s:.3f} req/s   "
        f"prefix cache hit rate {m.prefix_cache_hit_rate:.1%}"
    )
    print(f"TTFT ms  mean {j['mean_ttft_ms']}  p50 {j['p50_ttft_ms']}  p99 {j['p99_ttft_ms']}")
    print(
        f"TPOT ms  mean {j['mean_tpot_ms']}  p50 {j['p50_tpot_ms']}  p90 {j['p90_tpot_ms']}  "
        f"p99 {j['p99_tpot_ms']}"
    )
