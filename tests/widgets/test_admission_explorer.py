"""The admission explorer draws what :func:`kvlab.serving.simulate` and the admission gate compute."""

from __future__ import annotations

import pytest

from kvlab.kvdata import workload
from kvlab.serving import admission_need, simulate
from kvlab.simulator import steps_to_seconds
from kvlab.widgets.admission_explorer import MAX_STEPS, admission_config, build_admission_explorer
from tests.widgets.figure_checks import assert_well_formed


@pytest.fixture
def explorer():
    return build_admission_explorer(debounce_s=0)


def _config(explorer, policy_key):
    v = {k: w.value for k, w in explorer.controls.items()}
    return admission_config(
        v["model"], v["sliding_window"], kv_memory_gib=v["kv_memory_gib"], kv_cache_dtype=v["kv_cache_dtype"],
        block_size=v["block_size"], max_model_len=v["max_model_len"],
        max_num_batched_tokens=v["max_num_batched_tokens"], profile=v["profile"], policy=v[policy_key],
    )


def _simulate(explorer, policy_key):
    cfg = _config(explorer, policy_key)
    requests = workload(explorer.controls["workload"].value, cfg.max_model_len)
    return simulate(cfg, requests, max_steps=MAX_STEPS)


def _panel_traces(fig, panel: int, **match):
    ref = "y" if panel == 0 else f"y{panel + 1}"
    return [t for t in fig.data
            if (t.yaxis or "y") == ref and all(getattr(t, k) == v for k, v in match.items())]


def _stacked_total(fig, panel: int) -> list[int]:
    groups = [t for t in _panel_traces(fig, panel) if t.stackgroup]
    return [sum(vals) for vals in zip(*(t.y for t in groups), strict=True)]


@pytest.mark.parametrize("panel,policy_key", [(0, "policy_a"), (1, "policy_b")])
def test_blocks_peak_equals_the_simulators(explorer, panel, policy_key):
    result = _simulate(explorer, policy_key)
    total = _stacked_total(explorer.figures["blocks"], panel)
    assert max(total) == result.summary.peak_blocks_in_use
    assert len(total) == result.summary.steps
    pool = _panel_traces(explorer.figures["blocks"], panel, name="pool (usable blocks)")[0]
    assert set(pool.y) == {result.timeline[0].pool_size}


def test_uncapped_stalls_under_vllm_0_20_and_the_capped_gate_does_not(explorer):
    a, b = _simulate(explorer, "policy_a"), _simulate(explorer, "policy_b")
    assert a.summary.stalled is not None and b.summary.stalled is None
    banner = explorer.banners.value
    assert "STALLED" in banner and a.summary.stalled.request_id in banner
    assert f"{a.summary.stalled.need:,}" in banner and f"{a.summary.stalled.pool_size:,}" in banner
    assert f"all {b.summary.finished} requests finished" in banner
    assert explorer.status.level == "note" and "stalled" in explorer.status.message
    # the stalled request's gate need exceeds the whole pool, the capped need fits it
    refused = _panel_traces(explorer.figures["gate"], 0, name="need (refused)")[0]
    assert max(refused.y) == a.summary.stalled.need > a.summary.stalled.pool_size


def test_gate_need_is_the_policys_admission_need(explorer):
    cfg_b = _config(explorer, "policy_b")
    first = workload(explorer.controls["workload"].value, cfg_b.max_model_len)[0]
    admitted = _panel_traces(explorer.figures["gate"], 1, name="need (admitted)")[0]
    assert admitted.x[0] == 0 and admitted.customdata[0][0] == first.request_id
    assert admitted.y[0] == admission_need(cfg_b, first.prompt_tokens, "vllm").total


def test_moving_the_window_changes_the_capped_need_as_the_gate_computes_it(explorer):
    before = _panel_traces(explorer.figures["gate"], 1, name="need (admitted)")[0].y[0]
    explorer.controls["sliding_window"].value = 4096
    cfg_b = _config(explorer, "policy_b")
    first = workload(explorer.controls["workload"].value, cfg_b.max_model_len)[0]
    after = _panel_traces(explorer.figures["gate"], 1, name="need (admitted)")[0].y[0]
    assert after == admission_need(cfg_b, first.prompt_tokens, "vllm").total
    assert after > before  # a wider window keeps more blocks per sliding group


def test_decode_spans_last_output_minus_one_steps(explorer):
    explorer.controls["policy_a"].value = "exact"
    result = _simulate(explorer, "policy_b")
    assert result.summary.preemptions == 0
    outputs = {r.request_id: r.output_tokens for r in workload(explorer.controls["workload"].value, 32768)}
    decode = _panel_traces(explorer.figures["timeline"], 1, name="decode")[0]
    steps = {}
    for rid, n in zip(decode.y, decode.x, strict=True):
        steps[rid] = steps.get(rid, 0) + n
    assert steps == {rid: n - 1 for rid, n in outputs.items()}


def test_invalid_combinations_show_a_message(explorer):
    explorer.controls["sliding_window"].value = 32768
    assert explorer.status.level == "error" and "max_model_len" in explorer.status.message
    explorer.controls["sliding_window"].value = 1024
    explorer.controls["kv_memory_gib"].value = 1.0
    assert explorer.status.level == "error" and "would not start" in explorer.status.message
    explorer.controls["kv_memory_gib"].value = 8.0
    assert explorer.last_error is None


def test_every_figure_is_labelled(explorer):
    for name, fig in explorer.figures.items():
        assert_well_formed(fig, name)


def test_both_policies_share_one_windowed_model():
    """The two policies' configs (and a revisit) share one model object, with window 512 on each of
    gemma-3-27b's 52 sliding layers and its 10 full layers untouched."""
    from kvlab.widgets.admission_explorer import admission_config

    def config(policy):
        return admission_config("gemma-3-27b", 512, kv_memory_gib=8.0, kv_cache_dtype="auto", block_size=16,
                                max_model_len=32768, max_num_batched_tokens=2048, profile="vllm-0.20",
                                policy=policy)

    a, b, again = config("uncapped"), config("vllm"), config("uncapped")
    assert a.model_kv is b.model_kv is again.model_kv
    assert again == a and hash(again) == hash(a)
    kinds = [(layer.kind, layer.sliding_window) for layer in a.model_kv.layers]
    assert kinds.count(("sliding_window", 512)) == 52 and kinds.count(("full", None)) == 10


def test_a_workload_arriving_over_time_shows_one_run_in_steps_and_in_seconds():
    """Chat burst with window 512: its requests arrive in seconds (50 ms per step of the workload), and
    on an H100 that run takes 106 steps where a run by step numbers takes 126. The figures in steps,
    the banners, the status line and the time table must all show the run in seconds, computed here
    directly with ``simulate``."""
    explorer = build_admission_explorer(debounce_s=0, workload_name="chat burst", sliding_window=512)
    banner, status, table = explorer.banners.value, explorer.status.message, explorer.time_panel.value
    for panel, key in enumerate(("policy_a", "policy_b")):
        cfg = _config(explorer, key)
        requests = workload("chat burst", cfg.max_model_len)
        in_seconds = simulate(cfg, steps_to_seconds(requests, 0.05), max_steps=MAX_STEPS, gpu="h100-sxm")
        s = in_seconds.summary
        assert s.steps != simulate(cfg, requests, max_steps=MAX_STEPS).summary.steps  # the case differs
        total = _stacked_total(explorer.figures["blocks"], panel)
        assert len(total) == s.steps and max(total) == s.peak_blocks_in_use
        assert f"all {s.finished} requests finished in {s.steps:,} steps" in banner
        assert f"at most {s.peak_running} running at once" in banner
        assert f"peak {s.peak_blocks_in_use:,} blocks" in status
        assert f"{in_seconds.metrics.wall_time_s:,.2f} s" in table
    note = explorer.panels["workload"].value
    assert "arrive in seconds" in note and "h100-sxm" in note


def test_a_workload_arriving_at_once_has_no_note_about_the_clock(explorer):
    assert "arrive in seconds" not in explorer.panels["workload"].value
