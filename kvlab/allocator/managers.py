"""One manager per KV-cache group: its block tables, prefix hits and freeing (spec §1.4, §3.2–3.4, §3.6).

* :class:`FullAttentionManager` keeps every block; hits are the leading run of cached blocks.
* :class:`SlidingWindowManager` replaces blocks that left the window with the null block; hits are
  searched right to left for ``cdiv(W - 1, B)`` contiguous cached blocks.
* :class:`ChunkedLocalManager` nulls the blocks of finished chunks.

A table holds null blocks only as a prefix, and only sliding/chunked tables hold them.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.allocator.block_pool import BlockPool
from kvlab.allocator.free_queue import KVCacheBlock
from kvlab.sizing.specs import GroupSpec, cdiv, chunk_of, window_of


class SingleTypeManager:
    """Block tables of one group.

    Args:
        spec: the group's spec.
        pool: the pool the group draws from.
        group_id: index of the group (part of the cache key).
        enable_caching: hash full blocks and look up prefix hits.
    """

    kind = "base"
    #: True when the manager's tables hold nulls only as a prefix (sliding window, chunked local), so
    #: the blocks to shed are one slice; a state group's tables can hold nulls between pages.
    nulls_only_as_prefix = False

    def __init__(self, spec: GroupSpec, pool: BlockPool, group_id: int, enable_caching: bool = True) -> None:
        self.spec = spec
        self.block_size = spec.block_size
        self.pool = pool
        self.group_id = group_id
        self.enable_caching = enable_caching
        self.null_block = pool.null_block
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        self.num_cached_block: dict[str, int] = {}  # also marks a request as running
        self.num_blocks_in_use = 0  # distinct non-null blocks held by this group's tables

    # -- footprint ----------------------------------------------------------------------------------
    def num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Leading tokens no future query needs (0 for full attention)."""
        return self.spec.num_skipped_tokens(num_computed_tokens)

    def blocks_required(self, num_tokens: int, required_blocks: int | None = None) -> int:
        """Blocks a table needs for ``num_tokens`` tokens: ``cdiv(num_tokens, B)``, or an admission
        policy's absolute need ``required_blocks`` when one is given."""
        return cdiv(num_tokens, self.block_size) if required_blocks is None else required_blocks

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock],
        total_computed_tokens: int,
        required_blocks: int | None = None,
    ) -> int:
        """Free blocks this group must take to hold ``num_tokens`` tokens (§3.3).

        ``required_blocks`` replaces ``cdiv(num_tokens, B)`` (an admission policy's absolute need).
        Hit blocks that are free (ref count 0) count, because adopting them removes them from the
        free queue.
        """
        required = self.blocks_required(num_tokens, required_blocks)
        table = self.req_to_blocks.get(request_id, ())
        if request_id in self.num_cached_block:
            return max(required - len(table), 0)
        skipped = self.num_skipped_tokens(total_computed_tokens) // self.block_size
        new = max(required - max(skipped, len(new_computed_blocks) + len(table)), 0)
        evictable = sum(1 for b in new_computed_blocks[skipped:] if b.ref_cnt == 0 and not b.is_null)
        return new + evictable

    # -- allocation ---------------------------------------------------------------------------------
    def save_new_computed_blocks(
        self, request_id: str, new_computed_blocks: Sequence[KVCacheBlock], total_computed_tokens: int
    ) -> None:
        """Adopt prefix-hit blocks for a new request: skipped positions become nulls, the rest are touched."""
        if request_id in self.num_cached_block:
            if new_computed_blocks:
                raise ValueError(f"request {request_id!r} is running; it cannot adopt prefix hits")
            return
        table = self.req_to_blocks.setdefault(request_id, [])
        skipped = min(
            self.num_skipped_tokens(total_computed_tokens) // self.block_size, len(new_computed_blocks)
        )
        hits = list(new_computed_blocks[skipped:])
        self.num_blocks_in_use += self.pool.touch(hits)
        table.extend([self.null_block] * skipped)
        table.extend(hits)
        self.num_cached_block[request_id] = len(table)

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[KVCacheBlock]:
        """Append fresh blocks so the table covers ``num_tokens`` tokens."""
        table = self.req_to_blocks.setdefault(request_id, [])
        n = self.blocks_required(num_tokens) - len(table)
        if n <= 0:
            return []
        blocks = self.pool.get_new_blocks(n)
        self.num_blocks_in_use += n
        table.extend(blocks)
        return blocks

    def cache_blocks(self, request_id: str, block_hashes: Sequence, num_tokens: int) -> None:
        """Hash the full blocks among the first ``num_tokens`` tokens (hashes at this group's size)."""
        if not self.enable_caching:
            return
        num_full = min(num_tokens // self.block_size, len(block_hashes))
        num_cached = self.num_cached_block.get(request_id, 0)
        if num_full <= num_cached:
            return
        self.pool.cache_full_blocks(
            self.req_to_blocks[request_id], block_hashes, num_cached, num_full, self.group_id
        )
        self.num_cached_block[request_id] = num_full

    def num_blocks_to_skip(self, table: Sequence[KVCacheBlock], num_computed_tokens: int) -> int:
        """Leading entries of ``table`` no future query needs, nulls included:
        ``min(skipped tokens // B, len(table))`` (0 for full attention)."""
        skipped_tokens = self.num_skipped_tokens(num_computed_tokens)
        return min(skipped_tokens // self.block_size, len(table)) if skipped_tokens > 0 else 0

    def sheds_blocks(self, table: Sequence[KVCacheBlock], num_computed_tokens: int) -> bool:
        """True if :meth:`remove_skipped_blocks` would free a block of ``table``: its last skipped
        entry is not the null block yet (a table holds nulls only as a prefix).

        The same test as ``k > 0 and not table[k - 1].is_null`` with ``k =``
        :meth:`num_blocks_to_skip`, written out: it runs for every group on every decode step.
        """
        k = self.num_skipped_tokens(num_computed_tokens) // self.block_size
        if k <= 0:
            return False
        return not table[(k if k < len(table) else len(table)) - 1].is_null if table else False

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        """Replace blocks no future query needs by the null block and free them (tail-first, §3.4)."""
        table = self.req_to_blocks.get(request_id)
        if not table:
            return
        k = self.num_blocks_to_skip(table, num_computed_tokens)
        if k == 0 or table[k - 1].is_null:
            return  # nothing sheds (see sheds_blocks)
        if self.nulls_only_as_prefix:
            # the blocks to shed are table[first:k], after the leading nulls: found by bisection and
            # replaced as one slice (a prefill chunk sheds about a hundred per group)
            first, hi = 0, k - 1
            while first < hi:
                mid = (first + hi) // 2
                if table[mid].is_null:
                    first = mid + 1
                else:
                    hi = mid
            removed = table[first:k]
            removed.reverse()
            table[first:k] = [self.null_block] * (k - first)
        else:
            removed = []
            for i in range(k - 1, -1, -1):
                if table[i].is_null:
                    break
                removed.append(table[i])
                table[i] = self.null_block
        self.num_blocks_in_use -= self.pool.free_blocks(removed)

    def free(self, request_id: str) -> None:
        """Free every block of the request, deepest first; nulls are dropped (§3.6)."""
        table = self.req_to_blocks.pop(request_id, [])
        self.num_cached_block.pop(request_id, None)
        self.num_blocks_in_use -= self.pool.free_blocks(reversed(table))

    def num_blocks_held(self, request_id: str) -> int:
        """Non-null blocks in the request's table."""
        return sum(1 for b in self.req_to_blocks.get(request_id, ()) if not b.is_null)

    # -- prefix hits --------------------------------------------------------------------------------
    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: Sequence,
        max_length: int,
        group_ids: Sequence[int],
        pool: BlockPool,
        spec: GroupSpec,
    ) -> list[list[KVCacheBlock]]:
        """Cached blocks (one list per group in ``group_ids``) of the longest usable prefix of at most
        ``max_length`` tokens. ``block_hashes`` are at ``spec.block_size``."""
        raise NotImplementedError


class FullAttentionManager(SingleTypeManager):
    """Full attention: the hit is the leading run of cached blocks."""

    kind = "full"

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, group_ids, pool, spec):
        hits: list[list[KVCacheBlock]] = [[] for _ in group_ids]
        for block_hash in block_hashes[: max_length // spec.block_size]:
            cached = pool.get_cached_block(block_hash, group_ids)
            if cached is None:
                break
            for table, block in zip(hits, cached, strict=True):
                table.append(block)
        return hits


class SlidingWindowManager(SingleTypeManager):
    """Sliding window: only the last ``cdiv(W - 1, B)`` blocks before the hit point must be cached."""

    kind = "sliding_window"
    nulls_only_as_prefix = True

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, group_ids, pool, spec):
        needed = cdiv(window_of(spec) - 1, spec.block_size)
        max_blocks = min(max_length // spec.block_size, len(block_hashes))
        hits = [[pool.null_block] * max_blocks for _ in group_ids]
        run = 0
        for i in range(max_blocks - 1, -1, -1):
            cached = pool.get_cached_block(block_hashes[i], group_ids)
            if cached is None:
                run = 0
                continue
            for table, block in zip(hits, cached, strict=True):
                table[i] = block
            run += 1
            if run >= needed:
                return [table[: i + run] for table in hits]
        # no full window found: the leading run from block 0 is still a hit
        return [table[:run] for table in hits]


class ChunkedLocalManager(SingleTypeManager):
    """Chunked local attention: blocks of finished chunks are nulls; the current chunk must hit."""

    kind = "chunked_local"
    nulls_only_as_prefix = True

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, group_ids, pool, spec):
        chunk = chunk_of(spec)
        first = ((max_length // chunk) * chunk) // spec.block_size
        max_blocks = min(max_length // spec.block_size, len(block_hashes))
        hits = [[pool.null_block] * min(first, max_blocks) for _ in group_ids]
        for i in range(first, max_blocks):
            cached = pool.get_cached_block(block_hashes[i], group_ids)
            if cached is None:
                break
            for table, block in zip(hits, cached, strict=True):
                table.append(block)
        return hits


MANAGER_BY_KIND: dict[str, type[SingleTypeManager]] = {
    "full": FullAttentionManager,
    "sliding_window": SlidingWindowManager,
    "chunked_local": ChunkedLocalManager,
}
