"""Runs that can never finish stop with a stall report, checked against cases worked out by hand.

Pool: one full-attention group, blocks of 4 tokens, 6 blocks of which 5 are usable (block 0 is the
null block): room for 20 tokens. No prefix caching, ``max_num_seqs = 2``, ``max_model_len = 64``.
"""

from __future__ import annotations

import pytest

from kvlab.allocator import KVCacheManager
from kvlab.simulator import make_request
from kvlab.simulator.engine import run_simulation
from kvlab.simulator.scheduler import SchedulerConfig
from kvlab.simulator.timeline import StallReport
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool

SPEC = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")
CONFIG = KVCacheConfig((KVCacheGroup(("l0",), SPEC),), (KVCachePool(6, (0,), SPEC.page_size_bytes),))


def _run(workload, policy="uncapped", batched=64):
    manager = KVCacheManager(CONFIG, max_model_len=64, max_num_batched_tokens=batched, enable_caching=False,
                             policy=policy)
    return run_simulation(manager, SchedulerConfig(batched, 2, 64), workload)


@pytest.mark.parametrize("policy", ["uncapped", "exact"])
@pytest.mark.parametrize("batched", [64, 8])
def test_a_prompt_larger_than_the_pool_stalls_at_once(policy, batched):
    """A 40-token prompt needs ceil(40 / 4) = 10 blocks; the pool has 5. The gate refuses it at step 0
    with nothing running: the run stops after 1 step, the request unfinished."""
    s = _run([make_request("big", 40, 1)], policy, batched).summary
    assert s.stalled == StallReport(0, "big", 10, 5,
                                    "admission gate asks 10 blocks of the pool, which has 5 usable blocks")
    assert (s.steps, s.finished, s.rejected, s.unfinished) == (1, 0, 0, 1)
    assert (s.peak_running, s.peak_blocks_in_use, s.preemptions, s.step_cap_reached) == (0, 0, 0, False)


def test_a_request_that_outgrows_the_pool_while_running_alone():
    """8-token prompt, 20 outputs. After step k it has computed 8 + k tokens; step 13 would compute token
    21, which needs a 6th block (21 > 5 x 4). It is the only request, so preempting it frees nothing
    for itself: one preemption, then the stall at step 13 (14 steps run)."""
    s = _run([make_request("grow", 8, 20)]).summary
    assert s.stalled == StallReport(
        13, "grow", 6, 5,
        "needs 6 blocks of the pool for its next 1 tokens while running alone; that pool has 5 usable blocks",
    )
    assert (s.steps, s.finished, s.unfinished, s.preemptions) == (14, 0, 1, 1)
    assert (s.peak_running, s.peak_blocks_in_use, s.step_cap_reached) == (1, 5, False)


def test_two_requests_that_fit_finish_without_a_stall():
    """A (8-token prompt, 4 outputs) and B (4, 2): at most 11 + 5 = 16 tokens, 3 + 2 = 5 blocks."""
    s = _run([make_request("A", 8, 4), make_request("B", 4, 2)]).summary
    assert s.stalled is None
    assert (s.finished, s.unfinished, s.rejected, s.step_cap_reached, s.peak_running) == (2, 0, 0, False, 2)
