"""The allocator's configuration: KV-cache groups, the block pools they draw from, and the raw
tensors behind them (spec §1.2)."""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.sizing.grouping import Grouping, KVCacheGroup
from kvlab.sizing.specs import UniformTypeSpecs


@dataclass(frozen=True)
class KVCacheTensor:
    """One raw allocation: ``size_bytes`` shared by the listed layers (one per group)."""

    size_bytes: int
    shared_by: tuple[str, ...]


@dataclass(frozen=True)
class KVCachePool:
    """One set of block ids (0 … ``num_blocks - 1``, block 0 being the null block) and the groups
    that draw from it. vLLM has one pool for all groups; TensorRT-LLM one per window size."""

    num_blocks: int
    group_ids: tuple[int, ...]
    bytes_per_block: int


@dataclass(frozen=True)
class KVCacheConfig:
    """The allocator's configuration: groups, pools and the tensors behind them.

    Attributes:
        groups: the KV-cache groups (one block table each per request).
        pools: block pools; each group belongs to exactly one.
        tensors: raw allocations (classic layout: tensor ``i`` is shared by the ``i``-th layer of
            every group, ``page × num_blocks`` bytes).
    """

    groups: tuple[KVCacheGroup, ...]
    pools: tuple[KVCachePool, ...]
    tensors: tuple[KVCacheTensor, ...] = ()

    @property
    def num_blocks(self) -> int:
        """Blocks over all pools (null blocks included)."""
        return sum(p.num_blocks for p in self.pools)

    def pool_of_group(self, group_id: int) -> int:
        """Index of the pool group ``group_id`` draws from."""
        for i, pool in enumerate(self.pools):
            if group_id in pool.group_ids:
                return i
        raise ValueError(f"group_id {group_id} belongs to no pool")


def classic_tensors(grouping: Grouping, num_blocks: int) -> tuple[KVCacheTensor, ...]:
    """The tensors of the classic layout (§1.2)."""
    groups = grouping.groups
    if len(groups) == 1 and isinstance(groups[0].spec, UniformTypeSpecs):
        return tuple(
            KVCacheTensor(spec.page_size_bytes * num_blocks, (name,)) for name, spec in groups[0].spec.specs
        )
    if len(groups) == 1:
        g = groups[0]
        return tuple(KVCacheTensor(g.page_size_bytes * num_blocks, (name,)) for name in g.layer_names)
    page = max(g.page_size_bytes for g in groups)
    return tuple(
        KVCacheTensor(page * num_blocks, tuple(g.layer_names[i] for g in groups if i < len(g.layer_names)))
        for i in range(grouping.group_size)
    )


__all__ = ["KVCacheConfig", "KVCachePool", "KVCacheTensor", "classic_tensors"]
