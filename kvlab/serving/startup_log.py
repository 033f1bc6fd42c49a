"""Compare kvlab with a real vLLM start-up log: the lines it prints from "Available KV cache memory".

vLLM prints the KV-cache memory of a worker rounded to two decimals of a GiB, so the exact byte
count is only known to within ±0.005 GiB (±5.4 MB). :func:`predict_from_logged_memory` sizes the
pool at both ends of that interval and returns every block count, "GPU KV cache size" and
"Maximum concurrency" that some memory inside it would give; a log line *matches* when its value is
among them. :func:`predict_from_blocks` does the same for a known block count.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.serving.config import EngineConfig
from kvlab.sizing.capacity import (
    KVCachePlan,
    estimate_max_model_len,
    kv_cache_tokens_concurrency,
    kv_cache_tokens_per_group,
    max_concurrency,
)

GIB = 2**30
_ROOMY = 2**50  # memory for a plan that always fits: bytes per block and R do not depend on it


@dataclass(frozen=True)
class LoggedPrediction:
    """What kvlab expects a log to say, for every memory that rounds to the logged value.

    Attributes:
        num_blocks: the possible block counts (null block included).
        kv_cache_tokens: the possible "GPU KV cache size" values (tokens) under the profile's formula.
        concurrency: the possible "Maximum concurrency" values, formatted as vLLM does (``"4.33"``).
        blocks_per_request: R, blocks one ``max_model_len`` request needs.
        block_size: the smallest group block size (tokens).
        needed_gib: GiB one ``max_model_len`` request needs (what vLLM's start-up error quotes).
        max_model_len_estimates: the "estimated maximum model length" values over the memory range.
    """

    num_blocks: tuple[int, ...]
    kv_cache_tokens: tuple[int, ...]
    concurrency: tuple[str, ...]
    blocks_per_request: int
    block_size: int
    needed_gib: float
    max_model_len_estimates: tuple[int, ...] = ()

    def matches(self, tokens: int | None, concurrency: str | None) -> bool:
        """True when each given value is one kvlab predicts (``None`` = the log lacks the line)."""
        return self.pairs_with(tokens, concurrency) != ()

    def pairs_with(self, tokens: int | None, concurrency: str | None) -> tuple[int, ...]:
        """The block counts whose size *and* concurrency both equal the logged ones."""
        return tuple(
            n
            for n, t, c in zip(self.num_blocks, self.kv_cache_tokens, self.concurrency, strict=True)
            if (tokens is None or t == tokens) and (concurrency is None or c == concurrency)
        )


def _roomy_plan(config: EngineConfig) -> KVCachePlan:
    roomy = config.replace(kv_cache_memory=_ROOMY, num_gpu_blocks_override=None, pipeline_stage_memory=None)
    return roomy.plan()


def predict_from_blocks(config: EngineConfig, num_blocks: tuple[int, ...] | range) -> LoggedPrediction:
    """kvlab's log values for each of ``num_blocks`` (``config.kv_cache_memory`` is ignored)."""
    plan = _roomy_plan(config)
    groups, r, length = plan.config.groups, plan.blocks_per_max_request, plan.max_model_len
    blocks = tuple(num_blocks)
    per_group = plan.profile.log_formula == "per_group"
    tokens = tuple(
        kv_cache_tokens_per_group(n, groups)
        if per_group
        else kv_cache_tokens_concurrency(max_concurrency(n, r), length)
        for n in blocks
    )
    return LoggedPrediction(
        num_blocks=blocks,
        kv_cache_tokens=tokens,
        concurrency=tuple(f"{max_concurrency(n, r):.2f}" for n in blocks),
        blocks_per_request=r,
        block_size=min(g.block_size for g in groups),
        needed_gib=plan.bytes_per_block * r / GIB,
    )


def predict_from_logged_memory(config: EngineConfig, available_gib: float) -> LoggedPrediction:
    """kvlab's values for a worker that logged ``Available KV cache memory: {available_gib} GiB``.

    ``config.kv_cache_memory`` is ignored: the pool is sized for every byte count that rounds to
    ``available_gib`` (two decimals). The estimated maximum model length (vLLM's start-up error) is
    given for both ends of the range.
    """
    lo = int((available_gib - 0.005) * GIB)
    hi = int((available_gib + 0.005) * GIB)
    plan = _roomy_plan(config)
    per_block = plan.bytes_per_block
    pred = predict_from_blocks(config, range(max(lo // per_block, 1), hi // per_block + 1))
    fit = plan.profile.reserve_null_block_in_fit
    estimates = tuple(
        estimate_max_model_len(plan.grouping, m - (per_block if fit else 0), plan.max_model_len,
                               plan.in_flight_tokens, per_block)
        for m in (lo, hi)
    )
    return LoggedPrediction(**{**pred.__dict__, "max_model_len_estimates": estimates})
