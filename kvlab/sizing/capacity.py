"""How many blocks fit, how many a request needs, and what vLLM logs about it (spec §2.1, §2.3–2.5).

All memory is per GPU (per worker); with tensor parallelism every worker holds the same layers with
its share of the KV heads, so the minimum over workers is the common value. With pipeline
parallelism each stage holds some of the layers: one block id costs each stage only its own layers'
pages, and the pool has as many blocks as the tightest stage holds (:mod:`kvlab.sizing.pipeline`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kvlab.sizing.cache_config import KVCacheConfig, KVCachePool, classic_tensors
from kvlab.sizing.grouping import Grouping, KVCacheGroup, group_layers
from kvlab.sizing.memory_units import format_gib
from kvlab.sizing.pipeline import PipelineStage, plan_stages
from kvlab.sizing.profiles import Profile, get_profile
from kvlab.sizing.specs import AttentionSpec
from kvlab.validation import require_positive_int


def bytes_per_block(grouping: Grouping) -> int:
    """Bytes one block id costs on one GPU: the largest ``Σ page`` over the groups.

    Equals the classic ``page × group_size`` for unified pages (the largest group has
    ``group_size`` layers) and ``Σ page`` over layers for a uniform-type group.
    """
    return max((g.bytes_per_block for g in grouping.groups), default=0)


def blocks_per_request(
    groups: tuple[KVCacheGroup, ...], max_model_len: int, in_flight_tokens: int
) -> list[int]:
    """Blocks one ``max_model_len`` request holds at its peak, per group (§2.4: R is their sum)."""
    return [g.spec.max_blocks_per_request(max_model_len, in_flight_tokens) for g in groups]


def needed_bytes(
    grouping: Grouping, max_model_len: int, in_flight_tokens: int, per_block: int | None = None
) -> int:
    """Bytes one ``max_model_len`` request needs: ``bytes_per_block × R`` (``per_block``: the bytes
    per block id of the tightest pipeline stage; default the whole model's)."""
    block = bytes_per_block(grouping) if per_block is None else per_block
    return block * sum(blocks_per_request(grouping.groups, max_model_len, in_flight_tokens))


def estimate_max_model_len(
    grouping: Grouping,
    available_bytes: int,
    max_model_len: int,
    in_flight_tokens: int,
    per_block: int | None = None,
) -> int:
    """Largest length in ``[1, max_model_len]`` whose request fits in ``available_bytes`` (0 if none).

    Binary search, as vLLM does for its startup error and for ``max_model_len = -1``.
    """
    lo, hi, best = 1, max_model_len, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if needed_bytes(grouping, mid, in_flight_tokens, per_block) <= available_bytes:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def max_concurrency(num_blocks: int, blocks_per_max_request: int) -> float:
    """``num_blocks / R``: how many ``max_model_len`` requests the pool holds at once."""
    return num_blocks / blocks_per_max_request if blocks_per_max_request else 0.0


def kv_cache_tokens_per_group(num_blocks: int, groups: tuple[KVCacheGroup, ...]) -> int:
    """The ≤ v0.20 "GPU KV cache size" (tokens): ``(num_blocks // num_groups) × min block size``.

    Not a capacity: for hybrid models it badly under-reports.
    """
    if not groups:
        return 0
    return (num_blocks // len(groups)) * min(g.block_size for g in groups)


def kv_cache_tokens_concurrency(concurrency: float, max_model_len: int) -> int:
    """The ≥ v0.21 "GPU KV cache size" (tokens): ``int(max_concurrency × max_model_len)``."""
    return int(concurrency * max_model_len)


@dataclass(frozen=True)
class KVCachePlan:
    """Everything vLLM decides at startup about the KV cache of one configuration.

    Attributes:
        config: the allocator configuration (groups, pool, tensors).
        grouping: how layers were grouped (padding, warnings).
        max_model_len: L (tokens), after auto-fit.
        in_flight_tokens: T (tokens) used by the SWA footprint.
        bytes_per_block: bytes one block id costs on one GPU.
        num_blocks: blocks in the pool, null block included.
        blocks_per_request: per group, blocks one L-token request needs at its peak.
        max_concurrency: ``num_blocks / R``.
        kv_cache_tokens_per_group: the ≤ v0.20 log value (tokens).
        kv_cache_tokens_concurrency: the ≥ v0.21 log value (tokens).
        kv_cache_tokens: the log value of the chosen profile (tokens).
        log_lines: the lines vLLM would print.
        stages: with pipeline parallelism, each stage's layers, block cost and fit (``()`` without).
    """

    config: KVCacheConfig
    grouping: Grouping
    profile: Profile
    max_model_len: int
    in_flight_tokens: int
    bytes_per_block: int
    num_blocks: int
    blocks_per_request: tuple[int, ...]
    max_concurrency: float
    kv_cache_tokens_per_group: int
    kv_cache_tokens_concurrency: int
    kv_cache_tokens: int
    log_lines: tuple[str, ...]
    stages: tuple[PipelineStage, ...] = ()

    @property
    def blocks_per_max_request(self) -> int:
        """R: blocks one ``max_model_len`` request needs over all groups."""
        return sum(self.blocks_per_request)


def plan_kv_cache(
    specs: Mapping[str, AttentionSpec],
    available_bytes: int,
    *,
    max_model_len: int,
    max_position_embeddings: int | None = None,
    in_flight_tokens: int,
    profile: str | Profile = "vllm-0.33",
    disable_hybrid: bool = False,
    num_gpu_blocks_override: int | None = None,
    stages: Sequence[Collection[str]] | None = None,
    stage_available_bytes: Sequence[int] | None = None,
) -> KVCachePlan:
    """Group the layers, size the pool and run vLLM's startup checks (§2.2–2.5).

    Args:
        specs: ``{layer: spec}`` on one GPU.
        available_bytes: KV-cache memory of one GPU (bytes).
        max_model_len: L (tokens), or ``-1`` to auto-fit the longest length that fits.
        max_position_embeddings: upper bound for auto-fit (tokens); defaults to ``max_model_len``.
        in_flight_tokens: T (tokens), see :meth:`Profile.in_flight_tokens`.
        profile: the vLLM version to imitate.
        disable_hybrid: promote sliding/chunked layers to full attention.
        num_gpu_blocks_override: use this many blocks whatever the memory.
        stages: with pipeline parallelism, the layer names of each stage (every layer of ``specs``
            on exactly one stage); ``available_bytes`` is then the memory of one GPU of each stage.
        stage_available_bytes: with ``stages``, the memory of one GPU of each stage when they
            differ (bytes); ``available_bytes`` is then ignored.

    Raises:
        ValueError: no memory, a request of ``max_model_len`` tokens does not fit (the message gives
            the estimated maximum model length), or bad arguments.
        NotImplementedError: pages that cannot be unified under a classic profile.
    """
    prof = get_profile(profile)
    if isinstance(available_bytes, bool) or not isinstance(available_bytes, int):
        raise ValueError(f"available memory must be an integer number of bytes, got {available_bytes!r}")
    if available_bytes <= 0:
        raise ValueError(
            f"No available memory for the cache blocks ({available_bytes} B). "
            "Try increasing the KV-cache memory (gpu_memory_utilization) when initializing the engine."
        )
    require_positive_int(in_flight_tokens, "in_flight_tokens")
    if num_gpu_blocks_override is not None:
        require_positive_int(num_gpu_blocks_override, "num_gpu_blocks_override")
    grouping = group_layers(specs, pad_pages=prof.pad_pages, disable_hybrid=disable_hybrid)
    if not grouping.groups:
        raise ValueError("the model has no attention layers, so it has no KV cache to size")
    per_block = bytes_per_block(grouping)
    stage_plans: tuple[PipelineStage, ...] = ()
    tensor_grouping, where = grouping, ""
    if stages is not None and len(stages) > 1:
        # the stage that holds the fewest blocks sets the fit check, the estimate and the pool
        memories = list(stage_available_bytes or [available_bytes] * len(stages))
        for memory in memories:
            require_positive_int(memory, "KV-cache memory of a pipeline stage")
        stage_plans, tight, tensor_grouping = plan_stages(grouping, stages, memories)
        per_block, available_bytes = stage_plans[tight].bytes_per_block, memories[tight]
        where = f" on pipeline stage {tight} (the stage that holds the fewest blocks)"
    if available_bytes < 2 * per_block and num_gpu_blocks_override is None:
        raise ValueError(
            f"{format_gib(available_bytes)} of KV-cache memory{where} holds fewer than 2 blocks of "
            f"{format_gib(per_block)} (block 0 is the null block, so at least one more is needed). "
            "Increase the KV-cache memory."
        )
    fit_bytes = available_bytes - (per_block if prof.reserve_null_block_in_fit else 0)

    if max_model_len == -1:
        upper = max_position_embeddings or 0
        require_positive_int(upper, "max_position_embeddings (needed to auto-fit max_model_len=-1)")
        max_model_len = estimate_max_model_len(grouping, fit_bytes, upper, in_flight_tokens, per_block)
        if max_model_len == 0:
            raise ValueError(
                f"max_model_len=-1 cannot auto-fit: not even a 1-token request fits in "
                f"{format_gib(available_bytes)} of KV-cache memory"
            )
    require_positive_int(max_model_len, "max_model_len")

    needed = needed_bytes(grouping, max_model_len, in_flight_tokens, per_block)
    if needed > fit_bytes:
        estimate = estimate_max_model_len(grouping, fit_bytes, max_model_len, in_flight_tokens, per_block)
        hint = (
            f" Based on the available memory, the estimated maximum model length is {estimate}."
            if estimate
            else ""
        )
        raise ValueError(
            f"a request of max_model_len={max_model_len} tokens needs {format_gib(needed)} of KV cache"
            f"{where}, more "
            f"than the {format_gib(fit_bytes)} available.{hint} Increase the KV-cache memory or decrease "
            "max_model_len."
        )

    num_blocks = available_bytes // per_block
    if num_gpu_blocks_override is not None:
        num_blocks = num_gpu_blocks_override
    per_request = tuple(blocks_per_request(grouping.groups, max_model_len, in_flight_tokens))
    concurrency = max_concurrency(num_blocks, sum(per_request))
    tokens_groups = kv_cache_tokens_per_group(num_blocks, grouping.groups)
    tokens_conc = kv_cache_tokens_concurrency(concurrency, max_model_len)
    tokens = tokens_groups if prof.log_formula == "per_group" else tokens_conc
    size_line = f"GPU KV cache size: {tokens:,} tokens"
    conc_line = f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x"
    lines = (f"{size_line}, {conc_line}",) if prof.combined_log_line else (size_line, conc_line)
    config = KVCacheConfig(
        groups=grouping.groups,
        pools=(KVCachePool(num_blocks, tuple(range(len(grouping.groups))), per_block),),
        tensors=classic_tensors(tensor_grouping, num_blocks),
    )
    return KVCachePlan(
        config=config,
        grouping=grouping,
        profile=prof,
        max_model_len=max_model_len,
        in_flight_tokens=in_flight_tokens,
        bytes_per_block=per_block,
        num_blocks=num_blocks,
        blocks_per_request=per_request,
        max_concurrency=concurrency,
        kv_cache_tokens_per_group=tokens_groups,
        kv_cache_tokens_concurrency=tokens_conc,
        kv_cache_tokens=tokens,
        log_lines=lines + grouping.warnings,
        stages=stage_plans,
    )
