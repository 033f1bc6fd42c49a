"""A pool that will not be used again is unlinked, so that its blocks are freed by reference counting
as soon as it is dropped instead of waiting for (and costing) Python's cycle collector."""

from __future__ import annotations

import gc

from kvlab.allocator.block_pool import BlockPool
from kvlab.kvdata import workload
from kvlab.models import get_model
from kvlab.serving import EngineConfig, simulate

GIB = 2**30


def test_close_empties_the_queue_and_drops_every_link():
    pool = BlockPool(8)  # block 0 is the null block: 7 free
    taken = pool.get_new_blocks(3)
    assert [b.block_id for b in taken] == [1, 2, 3]
    pool.free_blocks(reversed(taken[1:]))  # 3 then 2 go back to the tail
    assert pool.free_queue.block_ids() == [4, 5, 6, 7, 3, 2]
    pool.close()
    assert pool.get_num_free_blocks() == 0 and pool.free_queue.block_ids() == []
    assert all(b.prev_free is None and b.next_free is None for b in pool.blocks)
    q = pool.free_queue
    assert q.head.next_free is q.tail and q.tail.prev_free is q.head


def test_a_whole_run_leaves_no_cyclic_garbage_behind():
    """llama-3.1-8b at 2 GiB: 1,024 blocks of 2 MiB (16 tokens × 32 layers × 8 KV heads × 128 × 2 × 2 B),
    1,023 usable; before the pools were closed, every block of the run's pool was cyclic garbage."""
    config = EngineConfig(get_model("llama-3.1-8b"), kv_cache_memory=2 * GIB, block_size=16,
                          max_model_len=8192, max_num_batched_tokens=2048)
    requests = workload("chat burst", 8192)
    gc.collect()
    gc.disable()
    try:
        result = simulate(config, requests, max_steps=3000)
        found = gc.collect()  # unreachable objects the run left for the cycle collector
    finally:
        gc.enable()
    assert result.timeline[0].pool_size == 1023
    assert result.summary.finished == len(requests)
    assert found < 50, f"{found} objects left for the cycle collector (the pool has 1,024 blocks)"
