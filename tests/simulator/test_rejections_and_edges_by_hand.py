"""A rejected request, empty metrics and workload edges, by hand."""

from __future__ import annotations

import math
import random

from kvlab.allocator import KVCacheManager
from kvlab.simulator import make_request
from kvlab.simulator.engine import run_simulation
from kvlab.simulator.metrics import run_metrics
from kvlab.simulator.scheduler import SchedulerConfig
from kvlab.simulator.sessions import session_workload, with_poisson_arrivals
from kvlab.simulator.timeline import Rejection
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool

SPEC = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")
CONFIG = KVCacheConfig((KVCacheGroup(("l0",), SPEC),), (KVCachePool(20, (0,), SPEC.page_size_bytes),))


def test_a_prompt_longer_than_max_model_len_is_rejected():
    """max_model_len 16: "big" (20-token prompt) is rejected on arrival; "ok" (8 + 2) runs: prefill and
    its 1st token at step 0, the 2nd at step 1. Its 2 prompt blocks are the peak recorded (it finishes
    in the step that would need a 3rd, and finished requests free their blocks before the record)."""
    manager = KVCacheManager(CONFIG, max_model_len=16, max_num_batched_tokens=64, enable_caching=False)
    r = run_simulation(manager, SchedulerConfig(64, 2, 16),
                       [make_request("ok", 8, 2), make_request("big", 20, 1)])
    assert r.rejections == [Rejection("big", "prompt of 20 tokens exceeds max_model_len=16")]
    assert (r.timeline[0].arrived, r.timeline[0].rejected) == (["ok", "big"], ["big"])
    s = r.summary
    assert (s.steps, s.finished, s.rejected, s.unfinished, s.step_cap_reached) == (2, 1, 1, 0, False)
    assert (s.peak_running, s.peak_blocks_in_use, s.stalled) == (1, 2, None)


def test_metrics_of_nothing():
    """No finished request: wall time 0, rates undefined (nan), hit rate 0 with nothing queried."""
    m = run_metrics([], [], 0.0, 0, 0)
    assert (m.wall_time_s, m.finished, m.prefix_cache_hit_rate) == (0.0, 0, 0.0)
    assert math.isnan(m.output_tokens_per_s) and math.isnan(m.requests_per_s)


def test_workload_edges():
    """Sessions start together unless a gap is given; a rate below 1 request/s is allowed."""
    assert [r.arrival_time_s for r in session_workload(2, 1, 10)] == [0.0, 0.0]
    w = with_poisson_arrivals([make_request("a", 4, 1), make_request("b", 4, 1)], 0.5, seed=1)
    assert w[1].arrival_time_s == random.Random(1).expovariate(0.5)
