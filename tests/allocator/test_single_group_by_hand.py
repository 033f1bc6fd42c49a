"""One group's block table followed by hand (pool of 10 blocks, 9 usable, blocks of 4 tokens).

Sliding window 8: the next token attends to the last 7 computed ones, so ``n`` computed tokens make
the first ``n - 7`` unneeded. 16 tokens take blocks 1-4; at 16 computed tokens 9 are unneeded, the
2 whole blocks before token 9 are freed tail-first (blocks 2 then 1) and become the null block (id 0);
at 20 tokens 13 are unneeded, 3 whole blocks: only block 3 is left to free (the walk stops at the null).
"""

from __future__ import annotations

import pytest

from kvlab.allocator.block_pool import BlockPool
from kvlab.allocator.managers import FullAttentionManager, SlidingWindowManager
from kvlab.sizing.specs import FullAttentionSpec, SlidingWindowSpec

SHAPE = dict(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")


def test_sliding_window_frees_tail_first():
    pool = BlockPool(10)
    m = SlidingWindowManager(SlidingWindowSpec(**SHAPE, sliding_window=8), pool, 0)
    assert [b.block_id for b in m.allocate_new_blocks("r", 16)] == [1, 2, 3, 4]
    assert m.allocate_new_blocks("r", 16) == [] and m.num_blocks_in_use == 4
    assert m.num_skipped_tokens(16) == 9
    m.remove_skipped_blocks("r", 16)
    assert [b.block_id for b in m.req_to_blocks["r"]] == [0, 0, 3, 4]
    assert (m.num_blocks_in_use, m.num_blocks_held("r"), pool.get_num_free_blocks()) == (2, 2, 7)
    m.remove_skipped_blocks("r", 20)
    assert [b.block_id for b in m.req_to_blocks["r"]] == [0, 0, 0, 4]
    assert (m.num_blocks_in_use, m.num_blocks_held("r"), pool.get_num_free_blocks()) == (1, 1, 8)
    m.free("r")
    m.free("nobody")  # freeing a request without blocks is a no-op
    assert (m.req_to_blocks, m.num_blocks_in_use, pool.get_num_free_blocks()) == ({}, 0, 9)


def test_full_blocks_are_hashed_once():
    """10 tokens in blocks of 4: 2 full blocks get hashes, the partial third does not; a second call
    with the same tokens changes nothing. A running request cannot adopt prefix hits."""
    m = FullAttentionManager(FullAttentionSpec(**SHAPE), BlockPool(10), 0)
    m.allocate_new_blocks("z", 10)
    m.cache_blocks("z", [b"a", b"b", b"c"], 10)
    assert [b.block_hash is not None for b in m.req_to_blocks["z"]] == [True, True, False]
    assert m.num_cached_block == {"z": 2}
    m.cache_blocks("z", [b"a", b"b", b"c"], 10)
    assert m.num_cached_block == {"z": 2}
    with pytest.raises(ValueError) as err:
        m.save_new_computed_blocks("z", [m.req_to_blocks["z"][0]], 4)
    assert str(err.value) == "request 'z' is running; it cannot adopt prefix hits"
    m.save_new_computed_blocks("z", [], 4)  # nothing to adopt: allowed
    off = FullAttentionManager(FullAttentionSpec(**SHAPE), BlockPool(10), 0, enable_caching=False)
    off.allocate_new_blocks("z", 8)
    off.cache_blocks("z", [b"a", b"b"], 8)
    assert [b.block_hash for b in off.req_to_blocks["z"]] == [None, None] and off.num_cached_block == {}
