"""A timed run followed step by step: the step-time model, the clock, idle gaps and the metrics.

Pool of 20 blocks of 4 tokens, ``max_num_seqs = 2``, 64 tokens per step. The step-time model is
``0.1 s + 1 ms per new token``. A (8-token prompt, 3 outputs) arrives at 0 s, B (8, 2) at 1 s.

==== ======= ======================================== ==========
step start   scheduled (new tokens, context)           duration
==== ======= ======================================== ==========
0    0.000   A prefill (8, 0); A's 1st token          0.108
1    0.108   A (1, 8); 2nd token                       0.101
2    0.209   A (1, 9); 3rd token, A finishes at 0.310  0.101
--   idle until B arrives: the clock jumps to 1.000
3    1.000   B prefill (8, 0); B's 1st token          0.108
4    1.108   B (1, 8); B finishes at 1.209             0.101
==== ======= ======================================== ==========

TTFT 0.108 s for both; TPOT A (0.310 - 0.108) / 2 = 0.101, B 0.101 / 1; end-to-end A 0.310, B 0.209;
wall 1.209 s: 5 output tokens -> 4.1356 tok/s, 16 prompt tokens -> 13.234 tok/s, 2 requests -> 1.6543/s.
"""

from __future__ import annotations

import dataclasses

import pytest

from kvlab.allocator import KVCacheManager
from kvlab.simulator import make_request
from kvlab.simulator.engine import run_simulation
from kvlab.simulator.scheduler import SchedulerConfig
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool

SPEC = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")
CONFIG = KVCacheConfig((KVCacheGroup(("l0",), SPEC),), (KVCachePool(20, (0,), SPEC.page_size_bytes),))


def _run(workload, caching=False):
    seen = []

    def step_time(chunks):
        seen.append(list(chunks))
        return 0.1 + 0.001 * sum(n for n, _ in chunks)

    manager = KVCacheManager(CONFIG, max_model_len=64, max_num_batched_tokens=64, enable_caching=caching)
    return run_simulation(manager, SchedulerConfig(64, 2, 64), workload, step_time=step_time), seen


def _timed(rid, prompt, outputs, at, prefix=None):
    spec = make_request(rid, prompt, outputs, 0, prefix, prompt if prefix else 0)
    return dataclasses.replace(spec, arrival_time_s=at)


def test_steps_and_the_idle_gap():
    result, seen = _run([_timed("A", 8, 3, 0.0), _timed("B", 8, 2, 1.0)])
    assert seen == [[(8, 0)], [(1, 8)], [(1, 9)], [(8, 0)], [(1, 8)]]
    starts = [rec.time_s for rec in result.timeline]
    durations = [rec.duration_s for rec in result.timeline]
    assert starts == pytest.approx([0.0, 0.108, 0.209, 1.0, 1.108], abs=1e-12)
    assert durations == pytest.approx([0.108, 0.101, 0.101, 0.108, 0.101], abs=1e-12)


def test_request_metrics():
    m = _run([_timed("A", 8, 3, 0.0), _timed("B", 8, 2, 1.0)])[0].metrics
    a, b = m.requests
    assert (a.request_id, b.request_id) == ("A", "B")
    assert (a.arrival_s, a.first_scheduled_s, a.first_token_s,
            a.finish_s) == pytest.approx((0, 0, 0.108, 0.310))
    assert (b.arrival_s, b.first_scheduled_s, b.first_token_s,
            b.finish_s) == pytest.approx((1, 1, 1.108, 1.209))
    assert (a.prompt_tokens, a.output_tokens, a.cached_tokens) == (8, 3, 0)
    assert (a.ttft_s, a.tpot_s, a.e2e_s, a.queueing_s) == pytest.approx((0.108, 0.101, 0.310, 0.0))
    assert (b.tpot_s, b.e2e_s) == pytest.approx((0.101, 0.209))


def test_run_metrics():
    m = _run([_timed("A", 8, 3, 0.0), _timed("B", 8, 2, 1.0)])[0].metrics
    assert (m.wall_time_s, m.finished, m.prompt_tokens, m.output_tokens) == (pytest.approx(1.209), 2, 16, 5)
    assert (m.output_tokens_per_s, m.prompt_tokens_per_s, m.requests_per_s) == pytest.approx(
        (5 / 1.209, 16 / 1.209, 2 / 1.209))
    assert (m.ttft.mean, m.ttft.p50) == pytest.approx((0.108, 0.108))
    assert (m.tpot.mean, m.itl.mean, m.itl.p99) == pytest.approx((0.101, 0.101, 0.101))
    assert (m.e2e.mean, m.queueing.mean, m.prefix_cache_hit_rate) == pytest.approx((0.2595, 0.0, 0.0))


def test_a_prefix_hit_is_counted_at_admission():
    """B repeats A's 8-token prompt after A finished, with caching on. The hit is capped below the
    whole prompt (the last token is recomputed): 7 tokens -> 1 whole block = 4 tokens. Queried: 8
    prompt tokens each (the token generated in the admitting step is not a query): 4 / 16 = 0.25."""
    result, seen = _run([_timed("A", 8, 1, 0.0, "p"), _timed("B", 8, 1, 1.0, "p")], caching=True)
    m = result.metrics
    assert [r.cached_tokens for r in m.requests] == [0, 4]
    assert m.prefix_cache_hit_rate == 0.25
    assert seen == [[(8, 0)], [(4, 4)]]
