"""Blocks and the free queue: an intrusive doubly-linked list with O(1) removal from the middle.

A free block that still carries a hash stays findable by the prefix cache; taking it from the queue
(``remove``) is how a prefix hit revives it, and popping it from the head is how it is evicted.
"""

from __future__ import annotations

from collections.abc import Iterable


class KVCacheBlock:
    """One block id of a pool.

    Attributes:
        block_id: 0 … num_blocks - 1 (0 is the null block).
        ref_cnt: number of request block tables holding it.
        block_hash: ``(chained hash, group id)`` once the block is full and cached, else ``None``.
        is_null: True for the placeholder of skipped positions (never freed, never cached).
    """

    __slots__ = ("block_id", "ref_cnt", "block_hash", "prev_free", "next_free", "is_null")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: tuple | None = None
        self.prev_free: KVCacheBlock | None = None
        self.next_free: KVCacheBlock | None = None
        self.is_null = False

    def __repr__(self) -> str:
        return f"KVCacheBlock(id={self.block_id}, ref={self.ref_cnt}, hashed={self.block_hash is not None})"


class FreeBlockQueue:
    """Free blocks, head = next to be reused (evicted), tail = most recently freed.

    Fake head and tail nodes keep every operation branch-free; ``popleft``, ``remove`` and
    ``append`` are O(1), the ``_n`` variants O(n).
    """

    def __init__(self, blocks: Iterable[KVCacheBlock]) -> None:
        self.head = KVCacheBlock(-1)
        self.tail = KVCacheBlock(-1)
        self.head.next_free = self.tail
        self.tail.prev_free = self.head
        self.num_free_blocks = 0
        self.append_n(list(blocks))

    def __len__(self) -> int:
        return self.num_free_blocks

    def popleft(self) -> KVCacheBlock:
        """Take the head block."""
        block = self.head.next_free
        if block is self.tail:
            raise ValueError("no free block to pop: the free queue is empty")
        self.remove(block)
        return block

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Take ``n`` blocks from the head, in queue order."""
        if n > self.num_free_blocks:
            raise ValueError(f"cannot pop {n} blocks: only {self.num_free_blocks} are free")
        out = []
        block = self.head.next_free
        for _ in range(n):
            out.append(block)
            nxt = block.next_free
            block.prev_free = block.next_free = None
            block = nxt
        self.head.next_free = block
        block.prev_free = self.head
        self.num_free_blocks -= n
        return out

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink ``block`` from wherever it is in the queue."""
        if block.prev_free is None or block.next_free is None:
            raise ValueError(f"block {block.block_id} is not in the free queue")
        block.prev_free.next_free = block.next_free
        block.next_free.prev_free = block.prev_free
        block.prev_free = block.next_free = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        """Put ``block`` at the tail (reused last)."""
        last = self.tail.prev_free
        last.next_free = block
        block.prev_free = last
        block.next_free = self.tail
        self.tail.prev_free = block
        self.num_free_blocks += 1

    def append_n(self, blocks: list[KVCacheBlock]) -> None:
        """Put ``blocks`` at the tail, keeping their order."""
        if not blocks:
            return
        prev = self.tail.prev_free
        for block in blocks:
            block.prev_free = prev
            prev.next_free = block
            prev = block
        prev.next_free = self.tail
        self.tail.prev_free = prev
        self.num_free_blocks += len(blocks)

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        """Put ``blocks`` at the head, keeping their order (``blocks[0]`` becomes the head)."""
        if not blocks:
            return
        first = self.head.next_free
        prev = self.head
        for block in blocks:
            block.prev_free = prev
            prev.next_free = block
            prev = block
        prev.next_free = first
        first.prev_free = prev
        self.num_free_blocks += len(blocks)

    def unlink_all(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Empty the queue by dropping every link of ``blocks`` (all of the pool's) and of its ends.

        The links of a doubly-linked list are reference cycles: without this, a pool that is no
        longer used waits for Python's cycle collector, which has to walk every block (2-5 ms for a
        pool of 6,553 blocks); unlinked, the blocks are freed as soon as the pool is.
        """
        for block in blocks:
            block.prev_free = block.next_free = None
        self.head.next_free = self.tail
        self.tail.prev_free = self.head
        self.num_free_blocks = 0

    def block_ids(self) -> list[int]:
        """Ids of the free blocks from head to tail (the eviction order)."""
        out = []
        block = self.head.next_free
        while block is not self.tail:
            out.append(block.block_id)
            block = block.next_free
        return out
