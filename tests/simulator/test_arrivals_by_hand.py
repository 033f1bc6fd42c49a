"""The arrival queue by hand: release order, the concurrency cap, dependents and their think time."""

from __future__ import annotations

import pytest

from kvlab.simulator.arrivals import ArrivalQueue
from kvlab.simulator.workload import RequestSpec


def _r(rid, step=0, at=None, after=None, think=0.0):
    return RequestSpec(rid, step, ((1, 4),), 1, arrival_time_s=at, after=after, think_time_s=think)


def _ids(specs):
    return [s.request_id for s in specs]


def test_steps_release_in_order_under_a_cap():
    """Arrivals at steps 0, 0, 2, 5; at most 2 in the engine. At step 0 with 0 inside: a, b; at step 2
    with 1 inside: c; at step 5 with 2 inside: nothing until one leaves."""
    q = ArrivalQueue([_r("a"), _r("b"), _r("c", 2), _r("d", 5)], timed=False, max_concurrency=2)
    assert _ids(q.release(0, 0)) == ["a", "b"]
    assert _ids(q.release(1, 2)) == []
    assert _ids(q.release(2, 1)) == ["c"]
    assert _ids(q.release(5, 2)) == [] and q.next_arrival() == 5.0 and not q.exhausted
    assert _ids(q.release(6, 1)) == ["d"] and q.exhausted and q.next_arrival() is None


def test_dependents_come_a_step_or_a_think_time_later():
    """Untimed: b (after a) is due the step after a finishes: a finishes at step 3, b is due at 4.
    Timed: c (after a, think 2.5 s) is due 2.5 s after a finishes at 1.0 s, at 3.5 s."""
    q = ArrivalQueue([_r("a"), _r("b", after="a")], timed=False)
    assert _ids(q.release(0, 0)) == ["a"] and q.next_arrival() is None
    q.finished("a", 3)
    assert q.next_arrival() == 4 and _ids(q.release(3, 0)) == [] and _ids(q.release(4, 0)) == ["b"]
    t = ArrivalQueue([_r("a", at=0.5), _r("c", after="a", think=2.5)], timed=True)
    assert _ids(t.release(0.4, 0)) == [] and _ids(t.release(0.5, 0)) == ["a"]
    t.finished("a", 1.0)
    assert t.next_arrival() == 3.5


def test_timed_runs_read_seconds():
    """A timed request without a time arrives at 0 s; one with only an arrival step is refused."""
    q = ArrivalQueue([_r("a"), _r("b", at=0.25)], timed=True)
    assert q.next_arrival() == 0.0 and _ids(q.release(0.0, 0)) == ["a"] and q.next_arrival() == 0.25
    with pytest.raises(ValueError) as err:
        ArrivalQueue([_r("s", step=3)], timed=True)
    assert str(err.value) == (
        "request s arrives at step 3, but a run with a step-time model needs arrival_time_s (seconds)")
