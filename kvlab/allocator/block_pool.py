"""The block pool: every block id, the free queue, ref counts and the prefix-cache map (spec §1.3).

Block 0 is popped at construction as the *null block*: a placeholder for positions a sliding-window
or chunked-local group no longer needs. It is never freed, never cached and its ref count is not
kept, so ``num_blocks - 1`` blocks are usable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvlab.allocator.free_queue import FreeBlockQueue, KVCacheBlock
from kvlab.validation import require_positive_int

#: Most blocks one simulated pool may have. Each block is a Python object (about 190 B), so this bounds
#: a pool at roughly 0.4 GB of host memory; sizing (``kvlab capacity``) has no such limit.
MAX_SIMULATED_BLOCKS = 2_000_000


class BlockPool:
    """All blocks of one pool.

    Args:
        num_blocks: blocks including the null block (≥ 1).
        enable_caching: keep full blocks findable by their hash (prefix caching).
        prepend_unhashed: [new] freed blocks without a hash go to the head of the free queue
            (reused first); [classic] (False) every freed block goes to the tail.
    """

    def __init__(self, num_blocks: int, enable_caching: bool = True, prepend_unhashed: bool = False) -> None:
        self.num_blocks = require_positive_int(num_blocks, "num_blocks")
        if num_blocks > MAX_SIMULATED_BLOCKS:
            raise ValueError(
                f"a pool of {num_blocks:,} blocks is too large to simulate: kvlab keeps one object per "
                f"block and allows at most {MAX_SIMULATED_BLOCKS:,} blocks per pool (about 0.4 GB); "
                "use less KV-cache memory (--kv-cache-memory), a larger block size (--block-size) or "
                "a fixed pool (num_gpu_blocks_override, --num-gpu-blocks-override)"
            )
        self.enable_caching = enable_caching
        self.prepend_unhashed = prepend_unhashed
        self.blocks = [KVCacheBlock(i) for i in range(num_blocks)]
        self.free_queue = FreeBlockQueue(self.blocks)
        # (hash, group id) -> block, or {block_id: block} when several blocks carry the same key
        self.cached: dict[tuple, KVCacheBlock | dict[int, KVCacheBlock]] = {}
        self.null_block = self.free_queue.popleft()
        self.null_block.is_null = True

    # -- state -------------------------------------------------------------------------------------
    @property
    def num_usable_blocks(self) -> int:
        """Blocks that can ever hold KV: ``num_blocks - 1``."""
        return self.num_blocks - 1

    def get_num_free_blocks(self) -> int:
        """Blocks in the free queue (cached ones included: they are eviction candidates)."""
        return self.free_queue.num_free_blocks

    def get_usage(self) -> float:
        """``1 - free / usable``, in [0, 1]."""
        return 1.0 - self.get_num_free_blocks() / self.num_usable_blocks if self.num_usable_blocks else 0.0

    # -- prefix cache ------------------------------------------------------------------------------
    def get_cached_block(self, block_hash: object, group_ids: Sequence[int]) -> list[KVCacheBlock] | None:
        """One cached block per group for ``block_hash``, or ``None`` if any group misses."""
        found = []
        for gid in group_ids:
            entry = self.cached.get((block_hash, gid))
            if entry is None:
                return None
            found.append(entry if isinstance(entry, KVCacheBlock) else next(iter(entry.values())))
        return found

    def cache_full_blocks(
        self,
        blocks: Sequence[KVCacheBlock],
        block_hashes: Sequence,
        num_cached: int,
        num_full: int,
        group_id: int,
    ) -> None:
        """Give ``blocks[num_cached:num_full]`` their hash and make them findable (nulls skipped).

        A prefill chunk caches about a hundred blocks per group in one call, so the loop walks the two
        slices together and finds or inserts each key with one ``setdefault``.
        """
        cached = self.cached
        for block, block_hash in zip(
            blocks[num_cached:num_full], block_hashes[num_cached:num_full], strict=True
        ):
            if block.is_null or block.block_hash is not None:
                continue
            key = (block_hash, group_id)
            block.block_hash = key
            entry = cached.setdefault(key, block)
            if entry is block:
                continue
            if isinstance(entry, KVCacheBlock):  # a second block with this key (same prefix, computed twice)
                cached[key] = {entry.block_id: entry, block.block_id: block}
            else:
                entry[block.block_id] = block

    def reset_prefix_cache(self) -> bool:
        """Forget every hash; refused (False) unless every usable block is free."""
        if self.get_num_free_blocks() != self.num_usable_blocks:
            return False
        self.cached.clear()
        for block in self.blocks:
            block.block_hash = None
        return True

    def close(self) -> None:
        """The pool will not be used again: unlink its free queue so that its blocks are freed with it,
        without the cycle collector (:meth:`FreeBlockQueue.unlink_all`). It then has no free block."""
        self.free_queue.unlink_all(self.blocks)

    # -- allocation ---------------------------------------------------------------------------------
    def get_new_blocks(self, n: int) -> list[KVCacheBlock]:
        """Pop ``n`` blocks from the head of the free queue, evicting their old hashes; ref count 1.

        Eviction is lazy: a cached free block keeps its hash until it is reused here. A prefill chunk
        takes about a hundred blocks per group, most of them cached, so the hashes are dropped in this
        one loop rather than by a method call per block.

        Raises:
            ValueError: ``n`` is more than the free blocks.
        """
        if n > self.get_num_free_blocks():
            raise ValueError(f"cannot get {n} blocks: only {self.get_num_free_blocks()} are free")
        blocks = self.free_queue.popleft_n(n)
        cached = self.cached
        for block in blocks:
            block.ref_cnt = 1
            key = block.block_hash
            if key is None:
                continue
            block.block_hash = None
            entry = cached.get(key)
            if entry is block:
                del cached[key]
            elif isinstance(entry, dict):  # one of several blocks cached under this key
                entry.pop(block.block_id, None)
                if len(entry) == 1:
                    cached[key] = next(iter(entry.values()))
                elif not entry:
                    del cached[key]
        return blocks

    def touch(self, blocks: Iterable[KVCacheBlock]) -> int:
        """Take a reference on prefix-hit blocks (a free one leaves the free queue); nulls skipped.

        Returns the number of blocks that were free (now back in use).
        """
        revived = 0
        for block in blocks:
            if block.is_null:
                continue
            if block.ref_cnt == 0:
                self.free_queue.remove(block)
                revived += 1
            block.ref_cnt += 1
        return revived

    def free_blocks(self, ordered: Iterable[KVCacheBlock]) -> int:
        """Drop one reference on each block; blocks reaching 0 go back to the free queue.

        Callers pass a request's blocks tail-first so that its deepest block is evicted first.
        Returns the number of blocks that became free.
        """
        released = []
        for block in ordered:
            if block.is_null:
                continue
            block.ref_cnt -= 1
            if block.ref_cnt < 0:
                raise ValueError(f"block {block.block_id} freed more often than allocated")
            if block.ref_cnt == 0:
                released.append(block)
        if self.prepend_unhashed:
            self.free_queue.prepend_n([b for b in released if b.block_hash is None])
            self.free_queue.append_n([b for b in released if b.block_hash is not None])
        else:
            self.free_queue.append_n(released)
        return len(released)
