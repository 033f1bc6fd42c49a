"""The engine flags shared by ``kvlab capacity``, ``budget`` and ``simulate`` (vLLM's names)."""

from __future__ import annotations

import argparse

from kvlab.admission.policies import POLICY_NAMES
from kvlab.cli.arg_types import max_model_len, token_count
from kvlab.quantization import SCHEME_NAMES, get_scheme
from kvlab.serving.config import EngineConfig
from kvlab.sizing.profiles import PROFILE_NAMES


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--model``, ``--kv-cache-memory`` and the vLLM engine flags to a sub-command."""
    p.add_argument("--model", required=True, help="preset name (e.g. gemma-4-31b) or path to a config.json")
    p.add_argument(
        "--kv-cache-memory",
        default="16GiB",
        help="KV-cache memory of one GPU: 16GiB, 11.54GiB, 16GB, 16G, 12e9 (bytes) … A number without a "
        "unit is bytes and must be at least 1 MiB (default 16GiB)",
    )
    p.add_argument(
        "--kv-cache-dtype",
        default="auto",
        choices=(*SCHEME_NAMES, "fp8_ds_mla"),
        metavar="DTYPE",
        help=f"KV-cache dtype: {', '.join(SCHEME_NAMES)}, fp8_ds_mla (MLA models only) (default auto)",
    )
    p.add_argument(
        "--speculative-config",
        default=None,
        help='speculative decoding as JSON, e.g. \'{"method": "mtp", "num_speculative_tokens": 2}\' '
        "(methods: mtp, eagle, eagle3, draft_model with \"model\", ngram, suffix)",
    )
    p.add_argument(
        "--decode-context-parallel-size",
        "-dcp",
        type=int,
        default=1,
        help="GPUs of the TP group a request's tokens are spread over (full attention / MLA; default 1)",
    )
    p.add_argument(
        "--mamba-cache-mode",
        default="none",
        choices=("none", "align", "all"),
        help="state prefix caching of hybrid Mamba / linear-attention models (default none)",
    )
    p.add_argument("--block-size", type=int, default=16, help="tokens per block (default 16)")
    p.add_argument(
        "--max-model-len",
        type=max_model_len,
        default=None,
        help="max tokens per request, as vLLM reads it: 131072, 32k (=32,000), 128K (=131,072), 1M; "
        "-1 or auto: the longest that fits. Default: the model's max_position_embeddings, shortened "
        "to the longest that fits (with a note) when the KV-cache memory cannot hold it",
    )
    p.add_argument(
        "--max-num-batched-tokens", type=token_count, default=8192,
        help="token budget per step (default 8192)",
    )
    p.add_argument("--max-num-seqs", type=int, default=256, help="most running requests (default 256)")
    p.add_argument(
        "--tensor-parallel-size", "-tp", type=int, default=1, help="GPUs the KV heads are split over"
    )
    p.add_argument(
        "--pipeline-parallel-size", "-pp", type=int, default=1,
        help="pipeline stages the layers are split over, as vLLM splits them (default 1); "
        "--kv-cache-memory is then the memory of one GPU of each stage",
    )
    p.add_argument(
        "--pp-layer-partition", default=None, metavar="N,N,...",
        help="layers per pipeline stage, like vLLM's VLLM_PP_LAYER_PARTITION (e.g. 16,32)",
    )
    p.add_argument(
        "--pp-stage-memory", default=None, metavar="MEM,MEM,...",
        help="KV-cache memory of one GPU of each pipeline stage when they differ (e.g. 3.18GiB,24GiB); "
        "replaces --kv-cache-memory",
    )
    p.add_argument("--profile", default="vllm-0.33", choices=PROFILE_NAMES, help="vLLM version imitated")
    p.add_argument(
        "--policy", default=None, choices=POLICY_NAMES, help="admission policy (default: the profile's own)"
    )
    p.add_argument(
        "--num-gpu-blocks-override", type=int, default=None, help="blocks in the pool whatever the memory"
    )
    p.add_argument(
        "--disable-hybrid-kv-cache-manager",
        action="store_true",
        help="allocate sliding-window layers like full attention",
    )
    p.add_argument(
        "--no-enable-prefix-caching",
        dest="enable_prefix_caching",
        action="store_false",
        help="turn prefix caching off",
    )
    p.add_argument("--json", action="store_true", help="print a JSON object")


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The :class:`EngineConfig` the parsed flags describe (ValueError on bad values).

    Without ``--max-model-len`` the model's full context is used when it fits; when it does not,
    the longest length that fits is used instead and ``args.notes`` gets a line saying so, which
    ``kvlab`` prints on stderr once the command has succeeded (vLLM itself would
    refuse to start), so that the first command a user types shows numbers rather than an error.
    """
    config = _engine_config(args, args.max_model_len)
    # fp8_ds_mla is an MLA cache layout, not a scheme of the registry (EngineConfig checks it)
    origin = "" if args.kv_cache_dtype == "fp8_ds_mla" else get_scheme(args.kv_cache_dtype).origin_note
    if origin:
        args.notes = [*getattr(args, "notes", []), f"note: {args.kv_cache_dtype} is a {origin} value "
                      "(vLLM has no KV-cache format below 8 bits); its bytes are sized by vLLM's rules"]
    full = config.model_kv.max_position_embeddings
    if args.max_model_len is None and full:
        config = config.replace(max_model_len=-1)
        fitted = config.plan().max_model_len
        if fitted < full:
            args.notes = [
                *getattr(args, "notes", []),
                f"note: {config.model_kv.name}'s full context of {full:,} tokens does not fit in this "
                f"KV-cache memory; using max_model_len={fitted:,}, the longest that fits (vLLM would "
                "refuse to start: pass --max-model-len or more --kv-cache-memory)",
            ]
    return config


def _engine_config(args: argparse.Namespace, max_len: int | None) -> EngineConfig:
    return EngineConfig(
        model=args.model,
        kv_cache_memory=args.kv_cache_memory,
        kv_cache_dtype=args.kv_cache_dtype,
        block_size=args.block_size,
        max_model_len=max_len,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_num_seqs=args.max_num_seqs,
        tensor_parallel_size=args.tensor_parallel_size,
        profile=args.profile,
        policy=args.policy,
        enable_prefix_caching=args.enable_prefix_caching,
        disable_hybrid_kv_cache_manager=args.disable_hybrid_kv_cache_manager,
        num_gpu_blocks_override=args.num_gpu_blocks_override,
        speculative_config=getattr(args, "speculative_config", None),
        mamba_cache_mode=getattr(args, "mamba_cache_mode", "none"),
        decode_context_parallel_size=getattr(args, "decode_context_parallel_size", 1),
        pipeline_parallel_size=getattr(args, "pipeline_parallel_size", 1),
        pipeline_layer_partition=getattr(args, "pp_layer_partition", None),
        pipeline_stage_memory=getattr(args, "pp_stage_memory", None),
    )


def print_table(rows: list[list[str]], header: list[str]) -> None:
    """Print rows as left-aligned columns under ``header``."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
