"""The cache manager's settings: defaults, what each is passed on as, and each refusal word for word.

One full-attention group (blocks of 4 tokens, 6 blocks); the values below are read off the constructor's
documented defaults (8,192 batched tokens, in-flight tokens = batched tokens, skip on scheduled tokens,
no async scheduling) and the rule that frees lag a step only when ``skip_on='processed'`` and async
scheduling are both on.
"""

from __future__ import annotations

import pytest

from kvlab.allocator import KVCacheManager
from kvlab.simulator import make_request
from kvlab.simulator.arrivals import ArrivalQueue
from kvlab.simulator.engine import run_simulation
from kvlab.simulator.scheduler import SchedulerConfig
from kvlab.simulator.workload import RequestSpec
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool

SPEC = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")
CONFIG = KVCacheConfig((KVCacheGroup(("l0",), SPEC),), (KVCachePool(6, (0,), SPEC.page_size_bytes),))


def _manager(**kw):
    return KVCacheManager(CONFIG, **{"max_model_len": 64, **kw})


def test_defaults():
    m = _manager()
    assert (m.max_model_len, m.max_num_batched_tokens, m.in_flight_tokens) == (64, 8192, 8192)
    assert (m.skip_on, m.async_scheduling, m.enable_caching) == ("scheduled", False, True)
    assert m.last_gate is None
    (budget,) = m.budgets
    assert (budget.max_model_len, budget.max_num_batched_tokens, budget.in_flight_tokens) == (64, 8192, 8192)
    assert budget.lagged_skip is False


def test_in_flight_tokens_and_the_lagged_free_rule():
    """in_flight_tokens given explicitly is passed on; frees lag only for processed + async."""
    m = _manager(max_num_batched_tokens=32, in_flight_tokens=96)
    assert (m.max_num_batched_tokens, m.in_flight_tokens) == (32, 96)
    assert (m.budgets[0].max_num_batched_tokens, m.budgets[0].in_flight_tokens) == (32, 96)
    lag = {
        (skip_on, a): _manager(skip_on=skip_on, async_scheduling=a).budgets[0].lagged_skip
        for skip_on in ("scheduled", "processed")
        for a in (False, True)
    }
    assert lag == {("scheduled", False): False, ("scheduled", True): False,
                   ("processed", False): False, ("processed", True): True}
    m = _manager(skip_on="processed", async_scheduling=True)
    assert (m.skip_on, m.async_scheduling) == ("processed", True)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"max_model_len": 0}, "max_model_len must be >= 1, got 0"),
        ({"max_num_batched_tokens": 0}, "max_num_batched_tokens must be >= 1, got 0"),
        ({"skip_on": "x"}, "skip_on must be one of 'scheduled', 'processed'; got 'x'"),
        ({"in_flight_tokens": 0}, "in_flight_tokens must be >= 1, got 0"),
    ],
)
def test_manager_refusals(kw, message):
    with pytest.raises(ValueError) as err:
        _manager(**kw)
    assert str(err.value) == message


W = [make_request("A", 8, 4)]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: run_simulation(_manager(), SchedulerConfig(64, 2, 64), W, max_steps=0),
         "max_steps must be >= 1, got 0"),
        (lambda: run_simulation(_manager(), SchedulerConfig(64, 2, 64), W, detail="all"),
         "detail must be one of 'ids', 'counts'; got 'all'"),
        (lambda: run_simulation(_manager(), SchedulerConfig(64, 2, 64), []),
         "workload must contain at least one request"),
        (lambda: run_simulation(_manager(), SchedulerConfig(64, 2, 64), W + W),
         "workload request ids must be unique"),
        (lambda: run_simulation(_manager(), SchedulerConfig(64, 2, 64), W, max_concurrency=0),
         "max_concurrency must be >= 1, got 0"),
        (lambda: ArrivalQueue([RequestSpec("a", 0, ((1, 4),), 1, after="b")], timed=True),
         "request a comes after 'b', which is not another request"),
        (lambda: ArrivalQueue([RequestSpec("a", 0, ((1, 4),), 1, after="a")], timed=True),
         "request a comes after 'a', which is not another request"),
        (lambda: SchedulerConfig(0, 4, 64), "max_num_batched_tokens must be >= 1, got 0"),
        (lambda: SchedulerConfig(64, 0, 64), "max_num_seqs must be >= 1, got 0"),
        (lambda: SchedulerConfig(64, 4, 0), "max_model_len must be >= 1, got 0"),
        (lambda: SchedulerConfig(64, 4, 64, mamba_align_block_size=0),
         "mamba_align_block_size must be >= 1, got 0"),
    ],
)
def test_simulation_refusals(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message


def test_arrival_queue_keeps_its_settings():
    q = ArrivalQueue([RequestSpec("a", 0, ((1, 4),), 1), RequestSpec("b", 0, ((1, 4),), 1, after="a")],
                     timed=True, max_concurrency=3)
    assert (q.timed, q.max_concurrency) == (True, 3)


def test_coordinator_defaults_and_its_refusal():
    """Caching on and freed unhashed blocks appended (not prepended) unless asked; a config without
    groups has nothing to manage."""
    from kvlab.allocator.coordinator import KVCacheCoordinator

    c = KVCacheCoordinator(CONFIG)
    assert (c.pools[0].enable_caching, c.pools[0].prepend_unhashed,
            c.managers[0].enable_caching) == (True, False, True)
    assert c.managers[0].group_id == 0
    off = KVCacheCoordinator(CONFIG, enable_caching=False, prepend_unhashed=True)
    assert (off.pools[0].enable_caching, off.pools[0].prepend_unhashed, off.managers[0].enable_caching) == (
        False, True, False)
    m = _manager(enable_caching=False, prepend_unhashed=True)
    assert (m.coordinator.pools[0].enable_caching, m.coordinator.pools[0].prepend_unhashed) == (False, True)
    assert _manager().coordinator.pools[0].prepend_unhashed is False
    with pytest.raises(ValueError) as err:
        KVCacheCoordinator(KVCacheConfig((), ()))
    assert str(err.value) == "the KV-cache config has no groups"


def test_allocating_nothing_is_refused():
    from kvlab.allocator.request import TokenRequest

    with pytest.raises(ValueError) as err:
        _manager().allocate_slots(TokenRequest("r", [1, 2, 3], 4), 0)
    assert str(err.value) == "allocate_slots needs num_new_tokens > 0 or prefix-hit tokens to adopt"


def test_the_gate_record_of_an_admission():
    """A 6-token request in blocks of 4 needs ceil(6 / 4) = 2 of the 5 free blocks: admitted, and the
    gate record names the request, the policy and the numbers. A 20-token request needs exactly the 5
    free blocks, which is enough; 21 tokens need 6, which is not."""
    from kvlab.allocator.request import TokenRequest

    m = _manager(max_num_batched_tokens=64)
    assert m.allocate_slots(TokenRequest("r", list(range(6)), 4), 6, full_sequence_must_fit=True) is not None
    gate = m.last_gate
    assert (gate.request_id, gate.policy, gate.per_group, gate.per_pool_need, gate.per_pool_free,
            gate.admitted) == ("r", "uncapped", (2,), (2,), (5,), True)
    edge = _manager(max_num_batched_tokens=64)
    assert edge.allocate_slots(TokenRequest("e", list(range(20)), 4), 20,
                               full_sequence_must_fit=True) is not None
    assert (edge.last_gate.per_pool_need, edge.last_gate.admitted) == ((5,), True)
    over = _manager(max_num_batched_tokens=64)
    assert over.allocate_slots(TokenRequest("o", list(range(21)), 4), 21, full_sequence_must_fit=True) is None
    assert (over.last_gate.request_id, over.last_gate.per_pool_need,
            over.last_gate.admitted) == ("o", (6,), False)
