"""The shortcut of ``allocate_slots`` for running requests whose tables already have room.

Most decode steps need no new block and fill no block (15 of 16 at block size 16), so
``KVCacheCoordinator.holds_room_for`` lets ``allocate_slots`` return at once. These tests check by
hand when the shortcut applies, and that whole simulations are step-for-step the same with the
shortcut switched off (the general path is the reference).
"""

from __future__ import annotations

import dataclasses

import pytest

from kvlab.allocator import KVCacheManager, TokenRequest
from kvlab.allocator.coordinator import KVCacheCoordinator
from kvlab.serving import EngineConfig, simulate
from kvlab.simulator import synthetic_workload
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool, SlidingWindowSpec


def full_config(num_blocks: int) -> KVCacheConfig:
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8)
    return KVCacheConfig(
        (KVCacheGroup(("f",), spec),), (KVCachePool(num_blocks, (0,), spec.page_size_bytes),)
    )


class CountingCoordinator:
    """Counts calls of the general path's first query (``get_num_blocks_to_allocate``)."""

    def __init__(self, coordinator: KVCacheCoordinator) -> None:
        self.calls = 0
        original = coordinator.get_num_blocks_to_allocate

        def counted(*args, **kwargs):
            self.calls += 1
            return original(*args, **kwargs)

        coordinator.get_num_blocks_to_allocate = counted


def test_decode_steps_by_hand():
    """Block size 4, 9 usable blocks, a 6-token prompt (ids 1, 2 taken; block 0 of the table hashed).

    * token 7: table covers cdiv(7, 4) = 2 blocks, 7 // 4 = 1 full block is already cached
      -> shortcut, nothing allocated, 7 free blocks, 1 hash;
    * token 8: still 2 blocks, but 8 // 4 = 2 full blocks > 1 cached -> general path hashes block 1
      (2 hashes), nothing allocated;
    * token 9: cdiv(9, 4) = 3 blocks > 2 -> general path allocates block 3 (6 free).
    """
    manager = KVCacheManager(full_config(10), max_model_len=64, policy="uncapped")
    counter = CountingCoordinator(manager.coordinator)
    req = TokenRequest("a", list(range(100, 106)), hash_block_size=4)
    admitted = manager.allocate_slots(req, 6, full_sequence_must_fit=True)
    assert [[b.block_id for b in g] for g in admitted] == [[1, 2]]
    assert manager.num_free_blocks() == 7 and len(manager.block_pool.cached) == 1
    req.num_computed_tokens = 6

    expected = [  # (new token, general path used, new block ids, free blocks, hashes)
        (106, False, [], 7, 1),
        (107, True, [], 7, 2),
        (108, True, [3], 6, 2),
    ]
    for token, general, new_ids, free, hashes in expected:
        req.append_tokens([token])
        before = counter.calls
        new = manager.allocate_slots(req, 1)
        req.num_computed_tokens += 1
        assert (counter.calls > before) == general, f"token {token}"
        assert [[b.block_id for b in g] for g in new] == [new_ids]
        assert manager.num_free_blocks() == free
        assert len(manager.block_pool.cached) == hashes
    assert manager.get_block_ids("a") == [[1, 2, 3]]


def test_no_shortcut_for_sliding_window_groups():
    """A sliding-window group may free blocks at any step, so the shortcut never applies."""
    full = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8)
    swa = SlidingWindowSpec(block_size=4, num_kv_heads=1, head_size=8, sliding_window=4)
    config = KVCacheConfig(
        (KVCacheGroup(("f",), full), KVCacheGroup(("s",), swa)),
        (KVCachePool(20, (0, 1), full.page_size_bytes),),
    )
    manager = KVCacheManager(config, max_model_len=64, policy="uncapped")
    assert not manager.coordinator.all_full_attention
    req = TokenRequest("a", list(range(10)), hash_block_size=4)
    manager.allocate_slots(req, 10, full_sequence_must_fit=True)
    req.num_computed_tokens = 10
    req.append_tokens([10])
    assert not manager.coordinator.holds_room_for("a", 11, 11)
    manager.allocate_slots(req, 1)
    # the window (4 tokens back from 11) no longer needs table block 0 -> it became the null block
    assert manager.get_block_ids("a")[1][0] == 0


def timeline_rows(result) -> list:
    return [dataclasses.astuple(r) for r in result.timeline]


@pytest.mark.parametrize(
    "overrides, workload",
    [
        (dict(kv_cache_memory="1GiB"), synthetic_workload(60, (100, 1500), (5, 300), seed=11)),
        (
            dict(kv_cache_memory="1GiB", async_scheduling=True),
            synthetic_workload(60, (100, 1500), (5, 300), seed=12),
        ),
        (
            dict(kv_cache_memory="1GiB", enable_prefix_caching=False),
            synthetic_workload(60, (100, 1500), (5, 300), seed=13),
        ),
        (
            dict(kv_cache_memory="2GiB", speculative_config={"method": "ngram", "num_speculative_tokens": 3}),
            synthetic_workload(40, (100, 1500), (5, 300), shared_prefix_tokens=80, seed=14),
        ),
    ],
    ids=["preempting", "async", "no-caching", "lookahead-shared-prefix"],
)
def test_simulations_identical_without_the_shortcut(monkeypatch, overrides, workload):
    config = EngineConfig("llama-3.1-8b", max_model_len=2048, **overrides)
    fast = simulate(config, workload, gpu="h100")
    monkeypatch.setattr(KVCacheCoordinator, "holds_room_for", lambda self, *a: False)
    general = simulate(config, workload, gpu="h100")
    assert fast.summary == general.summary
    assert timeline_rows(fast) == timeline_rows(general)
    assert fast.metrics == general.metrics
    assert fast.summary.steps > 300  # long enough that most steps were decode steps
