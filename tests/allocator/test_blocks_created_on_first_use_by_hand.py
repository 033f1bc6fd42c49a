"""The free queue creates a pool's blocks when they are first popped; the queue's order, its count and
the blocks handed out are those of a queue built with every block up front (worked by hand below)."""

from __future__ import annotations

from kvlab.allocator import BlockPool
from kvlab.allocator.free_queue import FreeBlockQueue, KVCacheBlock


def test_queue_of_new_blocks_creates_them_in_id_order_as_they_are_popped():
    """5 new blocks: the order is 0 1 2 3 4 before any exists. Popping 2 makes 0 and 1 only; block 7
    appended at the tail goes after the 3 not made yet (2 3 4 7); one prepended goes first (9 2 3 4 7).
    Popping 3 then takes 9, 2, 3 (2 and 3 made now): 4 7 left, with 4 still not made."""
    q = FreeBlockQueue(num_new=5)
    assert q.block_ids() == [0, 1, 2, 3, 4] and len(q) == 5 and q.created == []
    assert [b.block_id for b in q.popleft_n(2)] == [0, 1]
    assert [b.block_id for b in q.created] == [0, 1]
    q.append(KVCacheBlock(7))
    assert q.block_ids() == [2, 3, 4, 7] and len(q) == 4
    q.prepend_n([KVCacheBlock(9)])
    popped = q.popleft_n(3)
    assert [b.block_id for b in popped] == [9, 2, 3]
    assert all(b.prev_free is None and b.next_free is None for b in popped)
    assert q.block_ids() == [4, 7] and len(q) == 2 and len(q.created) == 4
    assert q.popleft().block_id == 4 and q.not_created is None
    assert q.block_ids() == [7] and len(q) == 1


def test_pool_blocks_are_all_made_on_demand_in_their_queue_places():
    """A pool of 6: block 0 is the null block, made at construction. Taking 2 blocks makes 1 and 2 and
    frees them to the tail: queue 3 4 5 2 1 (freed tail-first as given). Reading ``pool.blocks`` makes
    3, 4, 5 without changing that order."""
    pool = BlockPool(6)
    assert pool.null_block.block_id == 0 and len(pool.free_queue.created) == 1
    taken = pool.get_new_blocks(2)
    pool.free_blocks(reversed(taken))
    assert pool.free_queue.block_ids() == [3, 4, 5, 2, 1]
    assert [b.block_id for b in pool.blocks] == [0, 1, 2, 3, 4, 5]
    assert pool.free_queue.block_ids() == [3, 4, 5, 2, 1] and pool.get_num_free_blocks() == 5
