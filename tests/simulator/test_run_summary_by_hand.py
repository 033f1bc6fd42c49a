"""What a run records, on the preemption case of ``test_preemption_by_hand.py`` (worked there step by
step): 6 blocks of 4 tokens (5 usable), ``max_num_seqs = 2``; A (8-token prompt, 4 outputs), B (8, 4),
C (4, 1), all at step 0.

Per step (running / waiting, blocks in use = 5 - free): 0: [A, B] / [C], 4; 1: B preempted, [A] /
[B, C], 3; 2: same, 3; 3: A finishes, [] / [B, C], 0; 4: B and C admitted, C finishes at once, [B] / [],
3; 5: [B], 3; 6: B finishes, 0. Peak running counts requests that finished in the step: 2 (steps 0, 4).
"""

from __future__ import annotations

from kvlab.allocator import KVCacheManager
from kvlab.simulator import make_request
from kvlab.simulator.engine import run_simulation
from kvlab.simulator.scheduler import SchedulerConfig
from kvlab.simulator.timeline import SimulationSummary
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool

SPEC = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")
CONFIG = KVCacheConfig((KVCacheGroup(("l0",), SPEC),), (KVCachePool(6, (0,), SPEC.page_size_bytes),))


def _run(**kw):
    manager = KVCacheManager(CONFIG, max_model_len=64, max_num_batched_tokens=64, enable_caching=False)
    workload = [make_request("A", 8, 4), make_request("B", 8, 4), make_request("C", 4, 1)]
    return run_simulation(manager, SchedulerConfig(64, 2, 64), workload, **kw)


def test_summary_and_per_step_record():
    r = _run()
    assert r.summary == SimulationSummary(steps=7, finished=3, rejected=0, unfinished=0, preemptions=1,
                                          peak_running=2, peak_blocks_in_use=4, stalled=None,
                                          step_cap_reached=False)
    assert (r.finished_ids, r.policy, r.group_kinds, r.metrics) == (["A", "C", "B"], "uncapped", ("full",),
                                                                    None)
    rows = [(x.num_running, x.num_waiting, x.running, x.waiting, x.blocks_in_use, x.free_blocks)
            for x in r.timeline]
    assert rows == [
        (2, 1, ["A", "B"], ["C"], (4,), 1),
        (1, 2, ["A"], ["B", "C"], (3,), 2),
        (1, 2, ["A"], ["B", "C"], (3,), 2),
        (0, 2, [], ["B", "C"], (0,), 5),
        (1, 0, ["B"], [], (3,), 2),
        (1, 0, ["B"], [], (3,), 2),
        (0, 0, [], [], (0,), 5),
    ]
    assert [x.finished for x in r.timeline] == [[], [], [], ["A"], ["C"], [], ["B"]]
    assert all(x.block_states is None for x in r.timeline)  # not recorded unless asked


def test_counts_only_leave_the_id_lists_empty():
    r = _run(detail="counts")
    assert [(x.num_running, x.num_waiting, x.running, x.waiting) for x in r.timeline[:2]] == [
        (2, 1, [], []), (1, 2, [], [])]


def test_the_step_cap():
    """Stopped after 3 steps (0-2): nobody has finished, the cap (not a stall) is reported."""
    s = _run(max_steps=3).summary
    assert (s.steps, s.finished, s.unfinished, s.preemptions, s.stalled,
            s.step_cap_reached) == (3, 0, 3, 1, None, True)


def test_one_request_at_a_time():
    """max_concurrency = 1: A runs steps 0-3, B 4-7, C is admitted and finishes at step 8; B alone
    needs 12 tokens = 3 blocks, so nothing is preempted."""
    r = _run(max_concurrency=1)
    assert [(x.step, x.admitted, x.finished) for x in r.timeline] == [
        (0, ["A"], []), (1, [], []), (2, [], []), (3, [], ["A"]), (4, ["B"], []), (5, [], []), (6, [], []),
        (7, [], ["B"]), (8, ["C"], ["C"])]
    s = r.summary
    assert (s.steps, s.finished, s.preemptions, s.peak_running, s.peak_blocks_in_use) == (9, 3, 0, 1, 3)


def test_block_states_when_recorded():
    """Step 0: block 0 is the null block, A holds blocks 1-2, B 3-4 (handed out lowest id first),
    5 is free."""
    states = _run(record_blocks=True).timeline[0].block_states
    assert [(s.block_id, s.is_null, s.is_free, s.owners, s.ref_cnt) for s in states] == [
        (0, True, False, (), 0), (1, False, False, ("A",), 1), (2, False, False, ("A",), 1),
        (3, False, False, ("B",), 1), (4, False, False, ("B",), 1), (5, False, True, (), 0)]
    assert {s.pool for s in states} == {0} and {s.group for s in states if s.owners} == {0}
