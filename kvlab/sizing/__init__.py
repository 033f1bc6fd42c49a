"""KV-cache sizing as vLLM does it: layer specs, hybrid grouping, pool size, concurrency, log lines.

* :mod:`~kvlab.sizing.specs`: per-layer specs (full, sliding window, chunked local) and their page
  size (bytes per block per layer, quantization scales included);
* :mod:`~kvlab.sizing.grouping`: :func:`group_layers` (page unification, group size, strided split);
* :mod:`~kvlab.sizing.capacity`: :func:`plan_kv_cache` (blocks, concurrency, both "GPU KV cache
  size" formulas, startup errors with the estimated maximum model length, auto-fit);
* :mod:`~kvlab.sizing.window_pools`: TensorRT-LLM's one pool per window size;
* :mod:`~kvlab.sizing.profiles`: the version-dependent choices (``vllm-0.20``, ``vllm-0.21``,
  ``vllm-0.33``);
* :func:`parse_memory`: ``"11.54GiB"`` → bytes.
"""

from kvlab.sizing.cache_config import KVCacheConfig, KVCachePool, KVCacheTensor
from kvlab.sizing.capacity import (
    KVCachePlan,
    blocks_per_request,
    bytes_per_block,
    estimate_max_model_len,
    kv_cache_tokens_concurrency,
    kv_cache_tokens_per_group,
    max_concurrency,
    plan_kv_cache,
)
from kvlab.sizing.grouping import Grouping, KVCacheGroup, group_layers, promote_to_full, unify_page_sizes
from kvlab.sizing.memory_units import format_gib, parse_memory
from kvlab.sizing.profiles import PROFILE_NAMES, PROFILES, Profile, get_profile
from kvlab.sizing.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    GroupSpec,
    SlidingWindowSpec,
    UniformTypeSpecs,
    cdiv,
)
from kvlab.sizing.window_pools import plan_window_pools, window_groups, window_pool_shares

__all__ = [
    "PROFILES",
    "PROFILE_NAMES",
    "AttentionSpec",
    "ChunkedLocalAttentionSpec",
    "FullAttentionSpec",
    "GroupSpec",
    "Grouping",
    "KVCacheConfig",
    "KVCacheGroup",
    "KVCachePlan",
    "KVCachePool",
    "KVCacheTensor",
    "Profile",
    "SlidingWindowSpec",
    "UniformTypeSpecs",
    "blocks_per_request",
    "bytes_per_block",
    "cdiv",
    "estimate_max_model_len",
    "format_gib",
    "get_profile",
    "group_layers",
    "kv_cache_tokens_concurrency",
    "kv_cache_tokens_per_group",
    "max_concurrency",
    "parse_memory",
    "plan_kv_cache",
    "plan_window_pools",
    "promote_to_full",
    "unify_page_sizes",
    "window_groups",
    "window_pool_shares",
]
