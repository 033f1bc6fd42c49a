"""The admission explorer's time view: both policies' runs in seconds, side by side.

Default explorer: Gemma 3 27B, 8 GiB, ``max_model_len`` 32,768, profile vllm-0.20, "long prompts"
(6 distinct prompts of 6k–24k tokens, 32 output tokens each, all at step 0). Policy A
(``uncapped``) stalls; policy B (``vllm``) serves all six without preemption.
"""

from __future__ import annotations

import math

import pytest

from kvlab.kvdata import workload
from kvlab.widgets.admission_explorer import THROUGHPUT_WINDOW_S, build_admission_explorer
from tests.widgets.figure_checks import assert_well_formed


@pytest.fixture(scope="module")
def explorer():
    return build_admission_explorer(debounce_s=0)


def _labels(explorer):
    a, b = explorer.timed  # insertion order: policy A, then policy B
    return a, b


def test_throughput_line_adds_up_to_every_computed_token(explorer):
    """With distinct prompts nothing hits the prefix cache and no request is preempted, so policy B
    computes each prompt once plus ``output - 1`` decode tokens per request (the first output
    token comes out of the last prefill chunk): the area under its tokens/s line is that sum."""
    _, b = _labels(explorer)
    run = explorer.timed[b]
    assert run.summary.stalled is None and run.summary.preemptions == 0
    requests = workload("long prompts", 32768)
    expected = sum(r.prompt_tokens for r in requests) + sum(r.output_tokens - 1 for r in requests)
    line = next(t for t in explorer.figures["throughput"].data if t.name == b)
    assert sum(line.y) * THROUGHPUT_WINDOW_S == pytest.approx(expected, rel=1e-12)
    # the line ends in the window holding the last step, i.e. at most one window after the wall time
    assert run.metrics.wall_time_s <= line.x[-1] < run.metrics.wall_time_s + THROUGHPUT_WINDOW_S


def test_ttft_boxes_hold_one_sample_per_finished_request(explorer):
    a, b = _labels(explorer)
    boxes = {t.name: list(t.y) for t in explorer.figures["ttft"].data}
    assert len(boxes[b]) == 6
    assert len(boxes[a]) == explorer.timed[a].metrics.finished < 6  # the stalled policy finishes fewer
    # every request arrives at 0 s, so a TTFT is a first-token time: positive and at most the wall time
    wall_ms = explorer.timed[b].metrics.wall_time_s * 1e3
    assert all(0 < v <= wall_ms for v in boxes[b])
    assert explorer.figures["ttft"].data[0].marker.color != explorer.figures["ttft"].data[1].marker.color


def test_time_panel_sets_the_policies_side_by_side(explorer):
    a, b = _labels(explorer)
    text = explorer.time_panel.value
    assert a in text and b in text and "wall time on h100-sxm (model)" in text
    mb = explorer.timed[b].metrics
    assert f"{mb.wall_time_s:,.2f} s" in text and "6 of 6" in text
    ra = explorer.timed[a]
    assert f"{explorer.timed[a].metrics.finished} of 6" in text
    # the stalled run computed on after its last finish: the panel names the clock of its last step,
    # where the throughput plot's line ends
    stalled_at = ra.timeline[-1].time_s
    assert stalled_at > ra.metrics.wall_time_s
    assert f"{ra.metrics.wall_time_s:,.2f} s (then stalled at {stalled_at:,.2f} s)" in text
    # throughput over the wall time: prompt tokens / wall time
    assert mb.prompt_tokens == sum(r.prompt_tokens for r in workload("long prompts", 32768))
    assert f"{mb.prompt_tokens / mb.wall_time_s:,.0f}" in text
    assert not math.isnan(mb.tpot.mean)


def test_a_slower_gpu_takes_longer(explorer):
    """An L4 has about 1/11 of the H100's HBM bandwidth and 1/8 of its bf16 FLOP/s: the same
    steps must take longer, and the time view says on which GPU."""
    _, b = _labels(explorer)
    h100 = explorer.timed[b].metrics.wall_time_s
    explorer.controls["gpu"].value = "l4"
    try:
        l4 = explorer.timed[b].metrics.wall_time_s
        assert l4 > 4 * h100
        assert "wall time on l4 (model)" in explorer.time_panel.value
        assert "l4" in explorer.figures["throughput"].layout.title.text
    finally:
        explorer.controls["gpu"].value = "h100-sxm"


def test_time_figures_are_labelled(explorer):
    for name in ("throughput", "ttft"):
        assert_well_formed(explorer.figures[name], name)
