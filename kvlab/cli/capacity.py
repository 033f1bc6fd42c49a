"""``kvlab capacity``: groups, blocks, concurrency and vLLM's log lines for one configuration."""

from __future__ import annotations

import argparse
import json

from kvlab.cli.engine_args import add_engine_arguments, engine_config, print_table
from kvlab.cli.timing_args import add_moe_kernel_argument, kv_memory_from_gpu
from kvlab.hardware import GPU_NAMES
from kvlab.quantization import get_scheme
from kvlab.serving import capacity
from kvlab.serving.breakdown import request_bytes
from kvlab.sizing.gpu_memory import WEIGHT_DTYPES, GPUMemoryEstimate

#: vLLM's default ``--gpu-memory-utilization`` (vllm/config/cache.py: ``gpu_memory_utilization = 0.9``).
VLLM_DEFAULT_UTILIZATION = 0.9


def memory_from_gpu(args: argparse.Namespace) -> GPUMemoryEstimate | None:
    """With ``--gpu``: vLLM's budget estimated from the GPU (``args`` updated); the utilization
    defaults to vLLM's 0.9."""
    if args.gpu is None and args.gpu_memory_utilization is None:
        return None
    if args.gpu is None:
        raise ValueError(f"--gpu-memory-utilization needs --gpu (one of {', '.join(GPU_NAMES)})")
    if args.gpu_memory_utilization is None:
        args.gpu_memory_utilization = VLLM_DEFAULT_UTILIZATION
    return kv_memory_from_gpu(args)


def run(args: argparse.Namespace) -> int:
    estimate = memory_from_gpu(args)
    config = engine_config(args)
    plan = capacity(config)
    hybrid = config.hybrid_block_choice()
    hybrid_lines = list(hybrid.log_lines) if hybrid else []
    per_request = request_bytes(config)
    origin_note = (
        "" if config.kv_cache_dtype == "fp8_ds_mla" else get_scheme(config.kv_cache_dtype).origin_note
    )
    groups = [
        {
            "kind": g.kind,
            "block_size": g.block_size,
            "num_layers": len(g.layer_names),
            "layers": list(g.layer_names),
            "page_bytes": g.page_size_bytes,
            "blocks_per_request": r,
        }
        for g, r in zip(plan.config.groups, plan.blocks_per_request, strict=True)
    ]
    if args.json:
        print(
            json.dumps(
                {
                    "model": config.model_kv.name,
                    "profile": plan.profile.name,
                    "kv_cache_dtype": config.kv_cache_dtype,
                    "kv_cache_dtype_note": origin_note,
                    "max_model_len": plan.max_model_len,
                    "num_groups": len(groups),
                    "bytes_per_block": plan.bytes_per_block,
                    "num_blocks": plan.num_blocks,
                    "kv_cache_tokens": plan.kv_cache_tokens,
                    "kv_cache_tokens_per_group_formula": plan.kv_cache_tokens_per_group,
                    "kv_cache_tokens_concurrency_formula": plan.kv_cache_tokens_concurrency,
                    "blocks_per_request": plan.blocks_per_max_request,
                    "max_concurrency": round(plan.max_concurrency, 4),
                    "padding_layers": plan.grouping.padding_layers,
                    "groups": groups,
                    "log_lines": hybrid_lines + list(plan.log_lines),
                    "request_bytes": per_request.as_dict(),
                    "kv_cache_memory_bytes": config.kv_cache_memory,
                    "kv_cache_memory_source": "estimate" if estimate else "given",
                    "kv_cache_memory_estimate": estimate.describe() if estimate else None,
                    "pipeline_stages": [
                        {
                            "stage": st.index,
                            "num_layers": len(st.layer_names),
                            "bytes_per_block": st.bytes_per_block,
                            "kv_cache_memory_bytes": st.available_bytes,
                            "blocks_fit": st.blocks_fit,
                        }
                        for st in plan.stages
                    ],
                },
                indent=2,
            )
        )
        return 0
    print(
        f"{config.model_kv.name}  TP={config.tensor_parallel_size}  PP={config.pipeline_parallel_size}  "
        f"kv_cache_dtype={config.kv_cache_dtype}  "
        f"profile={plan.profile.name}  max_model_len={plan.max_model_len:,}"
    )
    print_table(
        [
            [
                str(i),
                g["kind"],
                str(g["block_size"]),
                str(g["num_layers"]),
                f"{g['page_bytes']:,}",
                f"{g['blocks_per_request']:,}",
            ]
            for i, g in enumerate(groups)
        ],
        ["group", "kind", "block", "layers", "page B", "blocks/request"],
    )
    source = estimate.describe() if estimate else "given (exact: as a vLLM log's 'Available KV cache memory')"
    if config.pipeline_stage_memory:
        print("KV-cache memory      given per pipeline stage (below)")
    else:
        print(f"KV-cache memory      {config.kv_cache_memory / 2**30:.2f} GiB per GPU, {source}")
    for st in plan.stages:
        print(
            f"pipeline stage {st.index:<5} {len(st.layer_names)} layers with a cache, "
            f"{st.bytes_per_block:,} B per block, {st.available_bytes / 2**30:.2f} GiB: "
            f"{st.blocks_fit:,} blocks fit"
        )
    print(f"bytes per block      {plan.bytes_per_block:,}" + (" (tightest stage)" if plan.stages else ""))
    print(f"num_blocks           {plan.num_blocks:,} (block 0 is the null block)")
    print(f"blocks per request   {plan.blocks_per_max_request:,} (max_model_len={plan.max_model_len:,})")
    print(f"max concurrency      {plan.max_concurrency:.2f}")
    print(
        f"KV cache tokens      {plan.kv_cache_tokens_per_group:,} (<= v0.20 formula), "
        f"{plan.kv_cache_tokens_concurrency:,} (>= v0.21 formula)"
    )
    print(
        "bytes per request    "
        + ", ".join(f"{k} {v / 2**30:.3f} GiB" for k, v in per_request.as_dict().items() if v)
        + f" (one request of {per_request.max_model_len:,} tokens)"
    )
    for line in [*hybrid_lines, *plan.log_lines]:
        print(f"log: {line}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capacity", help="KV-cache groups, blocks and max concurrency, as vLLM sizes them")
    add_engine_arguments(p)
    p.add_argument(
        "--gpu",
        default=None,
        help=f"estimate the KV-cache memory on this GPU (replaces --kv-cache-memory): {', '.join(GPU_NAMES)}",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=None,
        help="with --gpu: KV memory = utilization x GPU memory - weights - activations (an estimate that "
        "replaces --kv-cache-memory; default 0.9, vLLM's)",
    )
    p.add_argument(
        "--weight-dtype", default="bf16", choices=WEIGHT_DTYPES, help="weights' dtype (default bf16)"
    )
    add_moe_kernel_argument(p)
    p.set_defaults(func=run)
