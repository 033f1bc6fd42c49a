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

    def __init__(self, blocks: Iterable[KVCacheBlock] = (), num_new: int = 0) -> None:
        """Queue ``blocks``, then ``num_new`` blocks that are created when first popped.

        The new blocks take the ids after ``blocks`` (``len(blocks)`` …). A pool's blocks are plain
        records, and a simulation often never reaches the end of a large pool, so instead of building
        them all up front one marker node stands for the run of blocks not created yet; they keep
        their place in the queue (after ``blocks``, before anything appended later).
        """
        self.head = KVCacheBlock(-1)
        self.tail = KVCacheBlock(-1)
        self.head.next_free = self.tail
        self.tail.prev_free = self.head
        self.num_free_blocks = 0
        self.created = list(blocks)  # every block made so far, in id order when ``blocks`` are 0 …
        self.append_n(self.created)
        self.num_not_created = num_new
        self.not_created: KVCacheBlock | None = None  # the marker, linked while num_not_created > 0
        if num_new > 0:
            self.not_created = KVCacheBlock(-2)
            self.append(self.not_created)
            self.num_free_blocks += num_new - 1  # the marker counts as the blocks it stands for

    def _create_next(self) -> KVCacheBlock:
        """Make the next block the marker stands for and link it just before the marker (the marker
        leaves the queue with its last block)."""
        marker = self.not_created
        block = KVCacheBlock(len(self.created))
        self.created.append(block)
        block.prev_free = marker.prev_free
        block.prev_free.next_free = block
        self.num_not_created -= 1
        if self.num_not_created:
            block.next_free = marker
            marker.prev_free = block
        else:
            block.next_free = marker.next_free
            block.next_free.prev_free = block
            marker.prev_free = marker.next_free = None
            self.not_created = None
        return block

    def create_all(self) -> list[KVCacheBlock]:
        """Make every block not created yet (in its place in the queue); returns all blocks."""
        while self.not_created is not None:
            self._create_next()
        return self.created

    def __len__(self) -> int:
        return self.num_free_blocks

    def popleft(self) -> KVCacheBlock:
        """Take the head block."""
        block = self.head.next_free
        if block is self.not_created:
            block = self._create_next()
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
        left = n
        while left:
            if block is self.not_created:
                # blocks never used before: create the ones needed, already out of the queue
                made = self._take_new(left)
                out += made
                left -= len(made)
                block = self.not_created or block.next_free
                continue
            out.append(block)
            nxt = block.next_free
            block.prev_free = block.next_free = None
            block = nxt
            left -= 1
        self.head.next_free = block
        block.prev_free = self.head
        self.num_free_blocks -= n
        return out

    def _take_new(self, n: int) -> list[KVCacheBlock]:
        """Create up to ``n`` of the blocks the marker stands for, outside the queue (``popleft_n``
        relinks the head); the marker is dropped with the last one but keeps its ``next_free``."""
        first = len(self.created)
        n = min(n, self.num_not_created)
        made = [KVCacheBlock(i) for i in range(first, first + n)]
        self.created += made
        self.num_not_created -= n
        if not self.num_not_created:
            self.not_created.prev_free = None
            self.not_created = None
        return made

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

    def block_ids(self) -> list[int]:
        """Ids of the free blocks from head to tail (the eviction order)."""
        out = []
        block = self.head.next_free
        while block is not self.tail:
            if block is self.not_created:
                first = len(self.created)
                out.extend(range(first, first + self.num_not_created))
            else:
                out.append(block.block_id)
            block = block.next_free
        return out
