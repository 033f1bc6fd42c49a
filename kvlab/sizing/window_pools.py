"""TensorRT-LLM's layout: one block pool per attention-window size (spec §4.5).

Memory is split up front (``calculateWindowSizeToShare`` in ``kvCacheManager.cpp``): window ``w``
gets the share ``c_w × w / Σ_v c_v × v``, where ``c_w`` is the bytes per token of all layers with
window ``w`` (full-attention layers count with window ``max_model_len``). Its pool then holds
``ceil(floor(memory × share / c_w) / block_size)`` blocks (``calculateMaxNumBlocks``). There is no
shared pool across window sizes and no page unification: every pool uses the base block size.

kvlab keeps block 0 of every pool as a null block, as its vLLM-style managers expect, so each pool
has one usable block less than TensorRT-LLM would.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvlab.sizing.capacity import KVCacheConfig, KVCachePool
from kvlab.sizing.grouping import KVCacheGroup
from kvlab.sizing.specs import AttentionSpec, UniformTypeSpecs, cdiv, window_of


def window_groups(specs: Mapping[str, AttentionSpec]) -> list[KVCacheGroup]:
    """One group per window size (full attention first), layers in layer order."""
    by_window: dict[int | None, list[tuple[str, AttentionSpec]]] = {}
    for name, spec in specs.items():
        by_window.setdefault(window_of(spec), []).append((name, spec))
    groups = []
    for window in sorted(by_window, key=lambda w: (w is not None, w or 0)):
        members = by_window[window]
        names = tuple(name for name, _ in members)
        if all(spec == members[0][1] for _, spec in members):
            groups.append(KVCacheGroup(names, members[0][1]))
        else:
            groups.append(KVCacheGroup(names, UniformTypeSpecs(tuple(members))))
    return groups


def window_pool_shares(groups: list[KVCacheGroup], max_model_len: int) -> list[float]:
    """Fraction of the memory each window's pool gets (sums to 1)."""
    weights = []
    for g in groups:
        per_token = g.bytes_per_block / g.block_size
        window = window_of(g.spec) or max_model_len
        weights.append(per_token * window)
    total = sum(weights)
    return [w / total for w in weights]


def plan_window_pools(
    specs: Mapping[str, AttentionSpec], available_bytes: int, max_model_len: int
) -> KVCacheConfig:
    """The per-window pools TensorRT-LLM would build from ``available_bytes`` (one GPU)."""
    if available_bytes <= 0:
        raise ValueError(f"No available memory for the cache blocks ({available_bytes} B)")
    groups = window_groups(specs)
    pools = []
    for gid, (g, share) in enumerate(zip(groups, window_pool_shares(groups, max_model_len), strict=True)):
        per_token = g.bytes_per_block // g.block_size
        max_tokens = int(available_bytes * share / per_token)
        pools.append(KVCachePool(max(cdiv(max_tokens, g.block_size), 1), (gid,), g.bytes_per_block))
    return KVCacheConfig(groups=tuple(groups), pools=tuple(pools))
