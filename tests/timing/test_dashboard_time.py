"""The serving dashboard's time rows are the timed run of :func:`kvlab.serving.simulate`."""

from __future__ import annotations

from kvlab.kvdata import workload
from kvlab.serving import EngineConfig, simulate
from kvlab.simulator import steps_to_seconds
from kvlab.widgets import build_serving_dashboard
from kvlab.widgets.serving_dashboard import SECONDS_PER_STEP


def test_the_summary_shows_the_timed_run_on_the_chosen_gpu():
    d = build_serving_dashboard(debounce_s=0)
    d.controls["gpu"].value = "l40s"
    c = d.controls
    cfg = EngineConfig(
        c["model"].value,
        kv_cache_memory=c["kv_memory_gib"].value * 2**30,
        kv_cache_dtype=c["kv_cache_dtype"].value,
        max_model_len=c["max_model_len"].value,
        max_num_batched_tokens=c["max_num_batched_tokens"].value,
        tensor_parallel_size=c["tensor_parallel_size"].value,
        profile=c["profile"].value,
        policy=c["policy"].value,
    )
    requests = steps_to_seconds(workload(c["workload"].value, cfg.max_model_len), SECONDS_PER_STEP)
    m = simulate(cfg, requests, gpu="l40s").metrics
    text = d.summary.value
    assert "wall time on l40s (model)" in text and f"{m.wall_time_s:.2f} s" in text
    assert f"{m.tpot.mean * 1e3:,.1f} / {m.tpot.p99 * 1e3:,.1f} ms" in text
    trace = d.figures["time"].data[0]
    assert sum(trace.y) * 0.25 == sum(
        sum(r.scheduled.values()) for r in simulate(cfg, requests, gpu="l40s").timeline
    )
