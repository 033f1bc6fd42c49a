"""Groups of one spec are driven in lockstep, so the decode shortcut reads one of them.

The coordinator makes the same call on every group, and finds a prefix hit for all groups of one spec
together. So, for any request, the tables of groups that share a spec always have the same length, the
same null entries and the same count of cached blocks (their block ids differ). ``holds_room_for``
relies on that and checks one group per spec.

* By hand: block size 4, window 4; one full-attention group and two sliding-window groups of the same
  spec in a pool of 30 blocks. A 10-token prompt takes 3 blocks per group (ids 1-3, 4-6, 7-9). Decoding
  token by token with ``skipped = computed - 4 + 1`` tokens: token 110 (10 computed) skips 1 block and
  sheds it; 111 skips 2 and sheds the second; 112 needs a 4th block per group (ids 10, 11, 12); 113
  (13 computed) skips 2 blocks, both null already, and 4 blocks cover 14 tokens: nothing to do, so
  ``has_room`` is True. The shed test is asked of the first sliding group only, which answers for both.
* Over whole runs of gemma-3-27b (6 sliding-window groups and one full-attention group, window 512,
  8 GiB, prefix caching on; a run that stalls, one with preemptions and staggered arrivals), after
  every step the same-spec groups' tables agree entry for entry on length, nulls and cached blocks.
"""

from __future__ import annotations

import pytest

from kvlab.allocator import KVCacheManager, TokenRequest
from kvlab.allocator.managers import SlidingWindowManager
from kvlab.analysis import with_sliding_window
from kvlab.kvdata import workload
from kvlab.models import get_model
from kvlab.serving import EngineConfig, simulate
from kvlab.simulator.scheduler import Scheduler
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool, SlidingWindowSpec


def test_the_decode_shortcut_asks_one_group_per_spec(monkeypatch):
    asked = []
    original = SlidingWindowManager.sheds_blocks

    def recorded(self, table, num_computed_tokens):
        asked.append(self.group_id)
        return original(self, table, num_computed_tokens)

    monkeypatch.setattr(SlidingWindowManager, "sheds_blocks", recorded)
    full = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8)
    swa = SlidingWindowSpec(block_size=4, num_kv_heads=1, head_size=8, sliding_window=4)
    config = KVCacheConfig(
        (KVCacheGroup(("f",), full), KVCacheGroup(("s1",), swa), KVCacheGroup(("s2",), swa)),
        (KVCachePool(30, (0, 1, 2), full.page_size_bytes),),
    )
    manager = KVCacheManager(config, max_model_len=64, policy="uncapped")
    req = TokenRequest("a", list(range(100, 110)), hash_block_size=4)
    manager.allocate_slots(req, 10, full_sequence_must_fit=True)
    req.num_computed_tokens = 10
    assert manager.get_block_ids("a") == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    # each needs the general path: 110 sheds a block (asked of the first sliding group, which answers
    # for both), 111 fills a 3rd block to hash and 112 lacks a 4th (found before any shed test)
    for token, shed_tests in ((110, [1]), (111, []), (112, [])):
        req.append_tokens([token])
        asked.clear()
        assert manager.has_room(req, 1) is False, token
        assert asked == shed_tests, token
        manager.allocate_slots(req, 1)
        req.num_computed_tokens += 1
    assert manager.get_block_ids("a") == [[1, 2, 3, 10], [0, 0, 6, 11], [0, 0, 9, 12]]
    # token 113: 13 computed tokens skip 10, two blocks, both null already; 4 blocks cover 14 tokens
    req.append_tokens([113])
    asked.clear()
    assert manager.has_room(req, 1) is True
    assert asked == [1]  # every group would answer the same: one is asked


def _check_lockstep(coordinator) -> int:
    """Assert that groups of one spec hold tables of equal shape; return the tables compared."""
    compared = 0
    for _, gids in coordinator.attention_types:
        first = coordinator.managers[gids[0]]
        for gid in gids[1:]:
            other = coordinator.managers[gid]
            assert other.req_to_blocks.keys() == first.req_to_blocks.keys()
            assert other.num_cached_block == first.num_cached_block
            for rid, table in first.req_to_blocks.items():
                nulls = [b.is_null for b in table]
                assert [b.is_null for b in other.req_to_blocks[rid]] == nulls, (gid, rid)
                compared += 1
    return compared


@pytest.mark.parametrize("workload_name", ["long prompts", "chat burst"])
@pytest.mark.parametrize("policy", ["uncapped", "vllm"])
def test_same_spec_groups_stay_in_lockstep_over_whole_runs(monkeypatch, workload_name, policy):
    config = EngineConfig(with_sliding_window(get_model("gemma-3-27b"), 512), kv_cache_memory=8 * 2**30,
                          max_model_len=32768, max_num_batched_tokens=2048, policy=policy)
    compared = []
    step = Scheduler.step

    def checked(self, record):
        step(self, record)
        compared.append(_check_lockstep(self.manager.coordinator))

    monkeypatch.setattr(Scheduler, "step", checked)
    result = simulate(config, workload(workload_name, 32768), max_steps=3000)
    assert len(compared) == result.summary.steps > 10
    assert sum(compared) > 5 * result.summary.steps  # tables of 6 sliding groups compared at most steps
