"""Small allocator pieces checked against cases worked on paper: pool usage and prefix-cache reset, the
free queue's order, a chunked-local prefix hit, and the checks of a token request."""

from __future__ import annotations

import pytest

from kvlab.allocator import BlockPool, KVCacheManager, TokenRequest
from kvlab.allocator.free_queue import FreeBlockQueue, KVCacheBlock
from kvlab.allocator.managers import ChunkedLocalManager
from kvlab.sizing import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroup,
    KVCachePool,
)

H = [bytes([i]) * 4 for i in range(5)]  # five stand-in block hashes


def _manager(num_blocks=16):
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")
    pool = KVCachePool(num_blocks, (0,), spec.page_size_bytes)
    config = KVCacheConfig((KVCacheGroup(("l0",), spec),), (pool,))
    return KVCacheManager(config, max_model_len=64)


# -- pool -------------------------------------------------------------------------------------------
def test_pool_usage_counts_the_null_block_out():
    """5 blocks = the null block + 4 usable. Taking 1 leaves 3 free: usage 1 - 3/4 = 0.25; taking 2 more,
    1 - 1/4 = 0.75. A pool of only the null block has no usable block: usage 0."""
    pool = BlockPool(5)
    assert pool.get_usage() == 0.0
    pool.get_new_blocks(1)
    assert pool.get_usage() == 0.25
    pool.get_new_blocks(2)
    assert pool.get_usage() == 0.75
    assert BlockPool(1).get_usage() == 0.0


def test_prefix_cache_reset_waits_until_every_block_is_free():
    """Two blocks cached under H[0], H[1] and still held: reset refuses and keeps both hashes. Once
    both are freed, reset forgets them: no lookup hits and no block keeps a hash."""
    pool = BlockPool(5)
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(blocks, H, 0, 2, group_id=0)
    assert pool.reset_prefix_cache() is False
    assert pool.get_cached_block(H[0], [0]) == [blocks[0]]
    pool.free_blocks(reversed(blocks))
    assert pool.get_cached_block(H[1], [0]) == [blocks[1]]  # freed but still findable
    assert pool.reset_prefix_cache() is True
    assert pool.get_cached_block(H[0], [0]) is None and pool.get_cached_block(H[1], [0]) is None
    assert all(b.block_hash is None for b in pool.blocks)


def test_only_the_new_full_blocks_are_cached_and_never_the_null_block():
    """Blocks a, b, c (ids 1, 2, 3) of one request. ``num_cached=1, num_full=2`` caches b alone under
    H[1]; a stays unhashed. A table [null, c] cached for positions 0-1 gives c the key H[1] too and
    leaves the null block unhashed. A block that already has a hash is skipped and the next is cached."""
    pool = BlockPool(6)
    a, b, c = pool.get_new_blocks(3)
    pool.cache_full_blocks([a, b], H, 1, 2, group_id=0)
    assert a.block_hash is None and b.block_hash == (H[1], 0)
    assert pool.get_cached_block(H[0], [0]) is None
    pool.cache_full_blocks([pool.null_block, c], H, 0, 2, group_id=1)
    assert pool.null_block.block_hash is None and pool.get_cached_block(H[0], [1]) is None
    assert c.block_hash == (H[1], 1)
    pool.cache_full_blocks([b, a], H[1:], 0, 2, group_id=0)  # b already hashed: skipped, a cached
    assert b.block_hash == (H[1], 0) and a.block_hash == (H[2], 0)


def test_two_blocks_with_one_key_are_both_findable_and_evicted_one_by_one():
    """Two requests computed the same first block: a (id 1) and b (id 2) both get the key (H[0], 0).
    Freed after the other free blocks 3, 4, 5, they are reused in that order: popping 4 blocks evicts
    3, 4, 5 (no hash) and a, after which H[0] still finds b; popping one more evicts b and H[0] misses."""
    pool = BlockPool(6)
    a, b = pool.get_new_blocks(2)
    pool.cache_full_blocks([a], H, 0, 1, group_id=0)
    pool.cache_full_blocks([b], H, 0, 1, group_id=0)
    assert a.block_hash == b.block_hash == (H[0], 0)
    assert pool.get_cached_block(H[0], [0]) == [a]
    pool.free_blocks([a, b])
    assert pool.get_num_free_blocks() == 5
    assert [blk.block_id for blk in pool.get_new_blocks(4)] == [3, 4, 5, 1]
    assert a.block_hash is None and pool.get_cached_block(H[0], [0]) == [b]
    assert pool.get_new_blocks(1) == [b]
    assert b.block_hash is None and pool.get_cached_block(H[0], [0]) is None
    assert pool.cached == {}


def test_manager_usage_and_reset():
    """16 blocks = 15 usable. Request x of 8 tokens in blocks of 4 holds 2: usage 2/15. While it holds
    them the prefix cache cannot be reset; after it is freed, reset works and the same prompt (plus one
    token) finds no hit where it found 8 tokens before."""
    manager = _manager()
    x = TokenRequest("x", [1, 2, 3, 4, 5, 6, 7, 8], hash_block_size=4)
    assert manager.allocate_slots(x, 8) is not None
    assert manager.usage() == pytest.approx(2 / 15)
    assert manager.reset_prefix_cache() is False
    manager.free(x)
    assert manager.usage() == 0.0
    again = TokenRequest("y", [1, 2, 3, 4, 5, 6, 7, 8, 9], hash_block_size=4)
    assert manager.get_computed_blocks(again)[1] == 8
    assert manager.reset_prefix_cache() is True
    assert manager.get_computed_blocks(again)[1] == 0


def test_an_unknown_request_has_an_empty_table_in_every_group():
    assert _manager().get_blocks("nobody") == [[]]
    assert _manager().get_block_ids("nobody") == [[]]


# -- free queue ---------------------------------------------------------------------------------------
def test_free_queue_order_after_pop_append_and_remove():
    """Blocks 0..3 free in order. Pop the head (0), append it back (it goes last: 1 2 3 0), remove 2
    from the middle (1 3 0), append 2 (1 3 0 2)."""
    blocks = [KVCacheBlock(i) for i in range(4)]
    queue = FreeBlockQueue(blocks)
    assert queue.popleft() is blocks[0]
    queue.append(blocks[0])
    assert queue.block_ids() == [1, 2, 3, 0] and len(queue) == 4
    queue.remove(blocks[2])
    assert queue.block_ids() == [1, 3, 0] and len(queue) == 3
    queue.append(blocks[2])
    assert queue.block_ids() == [1, 3, 0, 2] and queue.num_free_blocks == 4
    queue.remove(blocks[2])  # the block just appended is linked both ways: removable again
    assert queue.block_ids() == [1, 3, 0]
    queue.append(blocks[2])
    assert [b.block_id for b in queue.popleft_n(4)] == [1, 3, 0, 2]
    with pytest.raises(ValueError, match="the free queue is empty"):
        queue.popleft()


def test_a_block_describes_itself():
    block = KVCacheBlock(3)
    assert repr(block) == "KVCacheBlock(id=3, ref=0, hashed=False)"
    block.ref_cnt, block.block_hash = 2, (H[0], 0)
    assert repr(block) == "KVCacheBlock(id=3, ref=2, hashed=True)"


# -- chunked local prefix hit ---------------------------------------------------------------------------
def _chunked_hit(max_length, cached_positions, group_ids=(0,)):
    """Blocks of 2 tokens, chunks of 4 tokens (2 blocks). Blocks at ``cached_positions`` of the hash
    chain H[0..4] are cached in every group of ``group_ids``."""
    spec = ChunkedLocalAttentionSpec(block_size=2, num_kv_heads=1, head_size=8, attention_chunk_size=4)
    pool = BlockPool(16)
    for gid in group_ids:
        blocks = pool.get_new_blocks(5)
        for i in cached_positions:
            pool.cache_full_blocks(blocks, H, i, i + 1, gid)
    hits = ChunkedLocalManager.find_longest_cache_hit(H, max_length, list(group_ids), pool, spec)
    return [[b.block_hash[0] if not b.is_null else None for b in table] for table in hits]


def test_chunked_local_hit_starts_at_the_current_chunk():
    """max_length 10: the current chunk starts at token 8 = block 4, so blocks 0-3 are nulls and block 4
    (H[4]) must be cached: hit [null x 4, H4]. Without H[4] cached: the 4 nulls alone."""
    assert _chunked_hit(10, [4]) == [[None, None, None, None, H[4]]]
    assert _chunked_hit(10, [0, 1, 2, 3]) == [[None, None, None, None]]


def test_chunked_local_hit_stops_at_max_length_and_at_the_first_miss():
    """max_length 7: chunk start 4 = block 2; at most 7 // 2 = 3 blocks, so only block 2 is looked up:
    [null, null, H2] even though H3 is cached too. max_length 10 with H2, H3 cached but H4 not: the
    current chunk (block 4) misses, so the hit is the nulls of blocks 0-3."""
    assert _chunked_hit(7, [2, 3]) == [[None, None, H[2]]]
    assert _chunked_hit(10, [2, 3]) == [[None, None, None, None]]


def test_chunked_local_hit_needs_every_group():
    """Two groups: H[4] cached in both gives a hit in both; the tables are built per group."""
    assert _chunked_hit(10, [4], group_ids=(0, 1)) == [[None] * 4 + [H[4]], [None] * 4 + [H[4]]]


# -- token request -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["", 5, None])
def test_a_request_id_must_be_a_non_empty_string(bad):
    with pytest.raises(ValueError, match=f"request_id must be a non-empty string, got {bad!r}$"):
        TokenRequest(bad, [1, 2, 3])


def test_the_hash_block_size_is_named_when_wrong():
    with pytest.raises(ValueError, match=r"^hash_block_size must be >= 1, got 0$"):
        TokenRequest("r", [1, 2, 3], hash_block_size=0)
    request = TokenRequest("r", [1, 2, 3, 4, 5], hash_block_size=2)
    assert request.hash_block_size == 2 and len(request.block_hashes) == 2


# -- refusals name what was wrong -------------------------------------------------------------------------
def test_queue_refusals_name_the_numbers():
    """A queue of 4 blocks cannot pop 5; a block never queued cannot be removed; an empty queue (made
    from no blocks at all) has nothing to pop. A fresh block is unlinked and not the null block."""
    fresh = KVCacheBlock(7)
    assert fresh.prev_free is None and fresh.next_free is None and fresh.is_null is False
    queue = FreeBlockQueue([KVCacheBlock(i) for i in range(4)])
    with pytest.raises(ValueError, match=r"^cannot pop 5 blocks: only 4 are free$"):
        queue.popleft_n(5)
    with pytest.raises(ValueError, match=r"^block 7 is not in the free queue$"):
        queue.remove(fresh)
    with pytest.raises(ValueError, match=r"^no free block to pop: the free queue is empty$"):
        FreeBlockQueue([]).popleft()


def test_pool_refusals_name_the_numbers(monkeypatch):
    """With the simulated-pool limit lowered to 10 blocks, 10 are allowed and 11 refused with the whole
    advice; 0 blocks, taking 5 of 3 free blocks and freeing a free block are refused by number."""
    import kvlab.allocator.block_pool as block_pool

    monkeypatch.setattr(block_pool, "MAX_SIMULATED_BLOCKS", 10)
    assert BlockPool(10).num_usable_blocks == 9
    with pytest.raises(ValueError) as refused:
        BlockPool(11)
    assert str(refused.value) == (
        "a pool of 11 blocks is too large to simulate: kvlab keeps one object per block and allows at most "
        "10 blocks per pool (about 0.4 GB); use less KV-cache memory (--kv-cache-memory), a larger block "
        "size (--block-size) or a fixed pool (num_gpu_blocks_override, --num-gpu-blocks-override)"
    )
    with pytest.raises(ValueError, match=r"^num_blocks must be >= 1, got 0$"):
        BlockPool(0)
    pool = BlockPool(4)
    assert pool.enable_caching is True and BlockPool(4, enable_caching=False).enable_caching is False
    with pytest.raises(ValueError, match=r"^cannot get 5 blocks: only 3 are free$"):
        pool.get_new_blocks(5)
    (a,) = pool.get_new_blocks(1)
    pool.free_blocks([a])
    with pytest.raises(ValueError, match=r"^block 1 freed more often than allocated$"):
        pool.free_blocks([a])


def test_the_null_block_is_skipped_not_a_stop():
    """A table [null, a]: touching it takes a reference on a only (1 block revived from the free queue);
    freeing it releases a only. The null block is never counted."""
    pool = BlockPool(4)
    (a,) = pool.get_new_blocks(1)
    pool.free_blocks([a])
    assert pool.touch([pool.null_block, a]) == 1 and a.ref_cnt == 1
    assert pool.get_num_free_blocks() == 2
    assert pool.free_blocks([pool.null_block, a]) == 1 and a.ref_cnt == 0
    assert pool.get_num_free_blocks() == 3


def test_three_blocks_with_one_key_leave_one_by_one():
    """a, b, c (ids 1, 2, 3) all cached under (H[0], 0), then freed after blocks 4, 5. Reuse order is
    4, 5, a, b, c: after a is evicted H[0] finds b (b and c remain), after b it finds c, after c nothing."""
    pool = BlockPool(6)
    trio = pool.get_new_blocks(3)
    for block in trio:
        pool.cache_full_blocks([block], H, 0, 1, group_id=0)
    pool.free_blocks(trio)
    assert [blk.block_id for blk in pool.get_new_blocks(3)] == [4, 5, 1]
    assert pool.get_cached_block(H[0], [0]) == [trio[1]]
    assert pool.get_new_blocks(1) == [trio[1]]
    assert pool.get_cached_block(H[0], [0]) == [trio[2]]
    assert pool.get_new_blocks(1) == [trio[2]]
    assert pool.get_cached_block(H[0], [0]) is None and pool.cached == {}
