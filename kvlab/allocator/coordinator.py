"""The coordinator: the pools and one manager per group, driven together (spec §1.4, §3.2).

With one group it is vLLM's unitary coordinator; with several it searches prefix hits to a fixed
point: each attention type (full attention first) shrinks the candidate length until all agree,
aligned to the scheduler block size (lcm of the group block sizes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kvlab.allocator.block_pool import BlockPool
from kvlab.allocator.free_queue import KVCacheBlock
from kvlab.allocator.hashing import group_block_hashes
from kvlab.allocator.managers import MANAGER_BY_KIND, SingleTypeManager
from kvlab.allocator.state_manager import state_manager_class
from kvlab.sizing.capacity import KVCacheConfig


class KVCacheCoordinator:
    """Pools and managers of one :class:`KVCacheConfig`.

    Args:
        config: groups and pools.
        enable_caching: prefix caching on or off.
        prepend_unhashed: free-queue placement of unhashed blocks ([new] True).
    """

    def __init__(
        self, config: KVCacheConfig, enable_caching: bool = True, prepend_unhashed: bool = False
    ) -> None:
        if not config.groups:
            raise ValueError("the KV-cache config has no groups")
        self.config = config
        self.enable_caching = enable_caching
        self.pools = [BlockPool(p.num_blocks, enable_caching, prepend_unhashed) for p in config.pools]
        self.group_pool = [config.pool_of_group(gid) for gid in range(len(config.groups))]
        self.managers: list[SingleTypeManager] = [
            (state_manager_class(g.spec) if g.kind == "mamba" else MANAGER_BY_KIND[g.kind])(
                g.spec, self.pools[self.group_pool[gid]], gid, enable_caching
            )
            for gid, g in enumerate(config.groups)
        ]
        sizes = [g.block_size for g in config.groups]
        self.hash_block_size = math.gcd(*sizes)
        self.scheduler_block_size = math.lcm(*sizes)
        # attention types: groups with equal specs are searched together, full attention first
        types: dict[object, list[int]] = {}
        for gid, g in enumerate(config.groups):
            types.setdefault(g.spec, []).append(gid)
        self.attention_types = sorted(
            types.items(), key=lambda item: config.groups[item[1][0]].kind != "full"
        )
        # attention groups only (no state group): ``holds_room_for`` can answer from the tables
        self.attention_only = all(g.kind in MANAGER_BY_KIND for g in config.groups)
        # full attention only: a running request's tables never shed blocks
        self.all_full_attention = all(g.kind == "full" for g in config.groups)
        # what ``holds_room_for`` reads, looked up once (it runs for every running request on every
        # decode step): one manager per attention type, since groups of one spec are driven in
        # lockstep (the same calls, and hits found together), so their tables always have the same
        # length, the same nulls and the same count of cached blocks; then the tables, those counts,
        # the block size and the shed test (None: full attention never sheds)
        self._room_checks = [
            (m.req_to_blocks, m.num_cached_block, m.block_size, None if m.kind == "full" else m.sheds_blocks)
            for m in (self.managers[gids[0]] for _, gids in self.attention_types)
        ]

    # -- prefix hits --------------------------------------------------------------------------------
    def find_longest_cache_hit(
        self, block_hashes: Sequence, max_length: int
    ) -> tuple[list[list[KVCacheBlock]], int]:
        """Hit blocks per group and the hit length (tokens) for a prefix of at most ``max_length`` tokens."""
        groups = self.config.groups
        align = self.scheduler_block_size
        hit = (max_length // align) * align
        found: list[list[KVCacheBlock]] = [[] for _ in groups]
        while True:
            length = hit
            for spec, gids in self.attention_types:
                manager = self.managers[gids[0]]
                hashes = group_block_hashes(block_hashes, spec.block_size // self.hash_block_size)
                blocks = type(manager).find_longest_cache_hit(hashes, length, gids, manager.pool, spec)
                for gid, table in zip(gids, blocks, strict=True):
                    found[gid] = table
                length = min(length, (len(blocks[0]) * spec.block_size // align) * align)
            if length == hit:
                break
            hit = length
        return [table[: hit // g.block_size] for table, g in zip(found, groups, strict=True)], hit

    # -- per-group operations -----------------------------------------------------------------------
    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[Sequence[KVCacheBlock]],
        total_computed_tokens: int,
        required_blocks: Sequence[int | None] | None = None,
    ) -> list[int]:
        """Blocks each group must take (see :meth:`SingleTypeManager.get_num_blocks_to_allocate`)."""
        required = required_blocks or [None] * len(self.managers)
        return [
            m.get_num_blocks_to_allocate(request_id, num_tokens, hits, total_computed_tokens, req)
            for m, hits, req in zip(self.managers, new_computed_blocks, required, strict=True)
        ]

    def holds_room_for(
        self,
        request_id: str,
        num_tokens: int,
        num_cacheable_tokens: int,
        num_processed_tokens: int | None = None,
    ) -> bool:
        """True if ``allocate_slots`` for this running request would change nothing.

        That is the case when every table already covers ``num_tokens`` tokens, no group sheds a
        block at ``num_processed_tokens`` (see :meth:`SingleTypeManager.sheds_blocks`), and, with
        caching, no block becomes full among the first ``num_cacheable_tokens`` tokens. Most decode
        steps are like this (15 of 16 at block size 16: a sliding-window table sheds a block, and
        needs one, once every 16 tokens), so the simulator skips the general path for them.
        With ``num_processed_tokens=None`` (not known) only full-attention groups, which never shed,
        can answer True.
        """
        if not (self.all_full_attention if num_processed_tokens is None else self.attention_only):
            return False
        caching = self.enable_caching
        for tables, cached_counts, block_size, sheds in self._room_checks:
            table = tables.get(request_id)
            num_cached = cached_counts.get(request_id)
            if table is None or num_cached is None:
                return False  # not running yet: the general path adopts hits and allocates
            if -(-num_tokens // block_size) > len(table):
                return False
            if caching and num_cacheable_tokens // block_size > num_cached:
                return False
            if sheds is not None and num_processed_tokens is not None and sheds(table, num_processed_tokens):
                return False
        return True

    def pool_needs(self, per_group: Sequence[int]) -> list[int]:
        """Sum ``per_group`` blocks by pool."""
        needs = [0] * len(self.pools)
        for gid, n in enumerate(per_group):
            needs[self.group_pool[gid]] += n
        return needs

    def fits(self, per_group: Sequence[int], reserved_blocks: int = 0) -> bool:
        """True if every pool has the blocks ``per_group`` asks of it."""
        return all(
            need <= pool.get_num_free_blocks() - reserved_blocks
            for need, pool in zip(self.pool_needs(per_group), self.pools, strict=True)
        )

    def save_new_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: Sequence[Sequence[KVCacheBlock]],
        total_computed_tokens: int,
    ) -> None:
        for m, hits in zip(self.managers, new_computed_blocks, strict=True):
            m.save_new_computed_blocks(request_id, hits, total_computed_tokens)

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[list[KVCacheBlock]]:
        return [m.allocate_new_blocks(request_id, num_tokens) for m in self.managers]

    def cache_blocks(self, request_id: str, block_hashes: Sequence, num_tokens: int) -> None:
        for m in self.managers:
            m.cache_blocks(
                request_id, group_block_hashes(block_hashes, m.block_size // self.hash_block_size), num_tokens
            )

    def new_step_starts(self) -> None:
        """Tell the managers a scheduling step begins (state groups forget this step's cached pages)."""
        for m in self.managers:
            if hasattr(m, "new_step_starts"):
                m.new_step_starts()

    def hit_cached_this_step(self, new_computed_blocks: Sequence[Sequence[KVCacheBlock]]) -> bool:
        """True when a state group's hit was cached during the step being scheduled: its contents are
        not written yet, so the request waits one step (as vLLM's ``MambaManager`` makes it)."""
        return any(
            m.hit_cached_this_step(hits)
            for m, hits in zip(self.managers, new_computed_blocks, strict=True)
            if hasattr(m, "hit_cached_this_step")
        )

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        for m in self.managers:
            m.remove_skipped_blocks(request_id, num_computed_tokens)

    def free(self, request_id: str) -> None:
        for m in self.managers:
            m.free(request_id)

    def get_blocks(self, request_id: str) -> list[list[KVCacheBlock]]:
        """The request's block table in every group (nulls included)."""
        return [list(m.req_to_blocks.get(request_id, ())) for m in self.managers]
