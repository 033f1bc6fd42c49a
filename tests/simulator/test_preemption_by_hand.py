"""Preemption in the scheduler, on a pool small enough to follow step by step (spec §3.7).

The engine: one full-attention group, blocks of 4 tokens, 6 blocks of which 5 are usable (block 0 is the
null block), no prefix caching, the ``uncapped`` gate, ``max_num_seqs = 2``, 64 tokens per step.
Requests, all arriving at step 0: A (8-token prompt, 4 outputs), B (8, 4), C (4, 1).

==== ===========================================================================================
step what happens (free blocks after the step)
==== ===========================================================================================
0    A admitted (8 tokens -> 2 blocks), B admitted (2 blocks); C waits (max_num_seqs). Both generate
     their 1st token. Free 5 - 4 = 1.
1    A decodes token 9 -> needs a 3rd block, takes the last free one. B needs a 3rd block too, none
     is free: the *last* running request (B itself) is preempted, its 2 blocks freed, its computed
     tokens reset to 0, and it goes to the *head* of the waiting queue: [B, C]. No admission in a
     step with a preemption. Free 2.
2    A decodes (10 tokens, 3 blocks). Head B now has 9 tokens (8 + 1 generated) -> gate asks
     ``cdiv(9, 4) = 3`` > 2 free: refused, and C behind it waits too (head-of-line). Free 2.
3    A decodes its 4th output and finishes; its 3 blocks return. Free 5.
4    B admitted: recomputes all 9 tokens (3 blocks), C admitted (1 block) and finishes at once
     (1 output): its block returns. Free 5 - 3 = 2.
5-6  B decodes its 3rd and 4th outputs (11 tokens, still 3 blocks) and finishes at step 6. Free 2, 5.
==== ===========================================================================================

Tokens scheduled for B: 8 (step 0) + 9 (recompute, step 4) + 1 + 1 = 19.
"""

from __future__ import annotations

from kvlab.allocator import KVCacheManager
from kvlab.simulator import make_request
from kvlab.simulator.engine import run_simulation
from kvlab.simulator.scheduler import SchedulerConfig
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool


def _run():
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")
    config = KVCacheConfig((KVCacheGroup(("l0",), spec),), (KVCachePool(6, (0,), spec.page_size_bytes),))
    manager = KVCacheManager(config, max_model_len=64, max_num_batched_tokens=64, enable_caching=False)
    workload = [make_request("A", 8, 4), make_request("B", 8, 4), make_request("C", 4, 1)]
    return run_simulation(manager, SchedulerConfig(64, 2, 64), workload)


def test_the_last_running_request_is_the_preemption_victim():
    result = _run()
    assert [(rec.step, rec.preempted) for rec in result.timeline if rec.preempted] == [(1, ["B"])]
    assert result.summary.preemptions == 1


def test_a_preempted_request_goes_back_to_the_head_of_the_queue():
    timeline = _run().timeline
    assert timeline[1].waiting == ["B", "C"]
    admitted = [(rec.step, rec.admitted) for rec in timeline if rec.admitted]
    assert admitted == [(0, ["A", "B"]), (4, ["B", "C"])]
    assert [rec.free_blocks for rec in timeline] == [1, 2, 2, 5, 2, 2, 5]


def test_a_preempted_request_recomputes_from_token_zero():
    result = _run()
    scheduled_b = [rec.scheduled.get("B", 0) for rec in result.timeline]
    assert scheduled_b == [8, 0, 0, 0, 9, 1, 1]
    assert result.finished_ids == ["A", "C", "B"]
    assert result.summary.steps == 7
