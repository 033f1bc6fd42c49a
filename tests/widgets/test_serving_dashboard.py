"""The what-if dashboard shows the capacity and the run that :mod:`kvlab.serving` computes."""

from __future__ import annotations

import pytest

from kvlab.kvdata import workload
from kvlab.serving import EngineConfig, capacity, simulate
from kvlab.widgets import build_serving_dashboard
from kvlab.widgets.serving_dashboard import DASHBOARD_DTYPES
from tests.widgets.figure_checks import assert_well_formed

GIB = 2**30


@pytest.fixture
def dashboard():
    return build_serving_dashboard(debounce_s=0)


def _config(d, dtype=None):
    c = d.controls
    return EngineConfig(
        c["model"].value, kv_cache_memory=c["kv_memory_gib"].value * GIB,
        kv_cache_dtype=dtype or c["kv_cache_dtype"].value, max_model_len=c["max_model_len"].value,
        max_num_batched_tokens=c["max_num_batched_tokens"].value,
        tensor_parallel_size=c["tensor_parallel_size"].value, profile=c["profile"].value,
        policy=c["policy"].value,
    )


def test_dtype_bars_are_the_capacity_of_each_dtype(dashboard):
    dashboard.controls["kv_memory_gib"].value = 12.0
    bars = next(t for t in dashboard.figures["dtypes"].data if t.type == "bar")
    shown = dict(zip(bars.x, bars.y, strict=True))
    assert set(shown) == set(DASHBOARD_DTYPES)
    for dtype in DASHBOARD_DTYPES:
        assert shown[dtype] == pytest.approx(capacity(_config(dashboard, dtype)).max_concurrency, rel=1e-12)
    assert shown["fp8"] > shown["int8_per_token_head"] > shown["auto"]  # scales cost a little


def test_queues_and_pool_follow_the_simulation(dashboard):
    dashboard.controls["workload"].value = "long prompts"
    cfg = _config(dashboard)
    result = simulate(cfg, workload("long prompts", cfg.max_model_len), max_steps=5000)
    running = next(t for t in dashboard.figures["queues"].data if t.name == "running")
    assert max(running.y) == result.summary.peak_running and len(running.x) == result.summary.steps
    used = next(t for t in dashboard.figures["pool"].data if t.name == "blocks in use")
    assert max(used.y) == result.summary.peak_blocks_in_use
    assert f"{result.summary.steps:,}" in dashboard.summary.value


def test_a_dtype_that_does_not_fit_is_marked_and_reported(dashboard):
    dashboard.controls["kv_memory_gib"].value = 2.0
    marks = next(t for t in dashboard.figures["dtypes"].data if t.name == "would not start")
    assert "auto" in marks.x
    assert dashboard.status.level == "error" and "would not start" in dashboard.status.message


def test_every_figure_is_labelled(dashboard):
    for name, fig in dashboard.figures.items():
        assert_well_formed(fig, name)
