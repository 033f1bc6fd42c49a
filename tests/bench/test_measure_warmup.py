"""The benchmark's warm-up runs for a minimum time as well as a minimum count (``kvlab.bench.measure``).

Checked on the CPU with the GPU synchronisation replaced by a no-op: the step is a counter, and the
clock is read around the call.
"""

from __future__ import annotations

import time

import torch

from kvlab.bench import measure


def test_warm_up_lasts_the_minimum_time(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(measure, "MIN_WARMUP_S", 0.05)
    calls = []
    start = time.perf_counter()
    measure._warm_up(lambda: calls.append(1), count=3)
    elapsed = time.perf_counter() - start
    assert elapsed >= 0.05
    assert len(calls) > 3  # three fast steps take far less than 50 ms: time, not count, ended it


def test_warm_up_runs_at_least_the_count(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(measure, "MIN_WARMUP_S", 0.0)
    calls = []
    measure._warm_up(lambda: (calls.append(1), time.sleep(0.002)), count=7)
    assert len(calls) == 7
