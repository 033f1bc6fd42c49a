"""What a benchmark run measures."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kvlab.quantization.schemes import VLLM_SCHEME_NAMES
from kvlab.validation import require_choice, require_positive_int

#: Schemes benchmarked by default: each distinct storage format once (``auto`` is bfloat16 here and
#: ``fp8`` is ``fp8_e4m3``).
DEFAULT_SCHEMES: tuple[str, ...] = (
    "bfloat16", "float16", "fp8_e4m3", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head",
)


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark run.

    Attributes:
        schemes: kv-cache dtypes to measure.
        batches: decode batch sizes (sequences).
        contexts: decode context lengths (tokens per sequence, the new token included).
        num_q_heads, num_kv_heads, head_size, block_size: attention shape.
        query_dtype: dtype of the queries (and of the K/V the model produced).
        prefill: prefill cases of one sequence, ``(new tokens, total length)``: a chunk over earlier
            context, and a whole prompt from an empty cache.
        write_tokens: token counts of the cache-write cases.
        sdpa: measure the two torch SDPA baselines (default dispatch, flash forced) on every attention
            shape, as rows of their own and as columns of the kvlab rows.
        repeats: graph replays timed per case (the median is reported).
        l2_multiple: inputs smaller than this many times the L2 cache are rotated over copies.
        seed: seeds K/V and queries.
    """

    schemes: tuple[str, ...] = DEFAULT_SCHEMES
    batches: tuple[int, ...] = (1, 16, 64)
    contexts: tuple[int, ...] = (1024, 8192, 32768)
    num_q_heads: int = 32
    num_kv_heads: int = 8
    head_size: int = 128
    block_size: int = 16
    query_dtype: torch.dtype = torch.bfloat16
    prefill: tuple[tuple[int, int], ...] = ((2048, 8192), (8192, 8192))
    write_tokens: tuple[int, ...] = (64, 16384)
    sdpa: bool = True
    repeats: int = 20
    l2_multiple: int = 4
    seed: int = 0
    rounding: str = field(default="nearest")

    def __post_init__(self) -> None:
        for s in self.schemes:
            require_choice(s, VLLM_SCHEME_NAMES, "schemes")  # low-bit ones: benchmarks/lowbit_bench.py
        for name in ("batches", "contexts", "write_tokens"):
            for v in getattr(self, name):
                require_positive_int(v, name)
        for name in ("num_q_heads", "num_kv_heads", "head_size", "block_size", "repeats", "l2_multiple"):
            require_positive_int(getattr(self, name), name)
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError(f"num_q_heads ({self.num_q_heads}) must be a multiple of "
                             f"num_kv_heads ({self.num_kv_heads})")
        for chunk, total in self.prefill:
            require_positive_int(chunk, "prefill new tokens")
            if chunk > total:
                raise ValueError(f"a prefill case's new tokens ({chunk}) cannot exceed its length ({total})")
        require_choice(self.query_dtype, (torch.bfloat16, torch.float16), "query_dtype")
