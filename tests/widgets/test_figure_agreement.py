"""Every number a figure shows agrees with the table or text beside it, and its axes read
unambiguously (lessons 01, 02 and 06)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kvlab.analysis.scale_cost import scheme_bytes
from kvlab.plots import error_heatmaps_figure, scale_bytes_figure
from kvlab.widgets.memory_explorer import build_memory_explorer
from kvlab.widgets.serving_dashboard import build_serving_dashboard

ROOT = Path(__file__).resolve().parents[2]
#: Pixels per character of a 12-pixel axis title, generously (average glyph width is about 0.55 em).
CHAR_PX = 7.0


def test_lesson_02_scale_share_matches_the_lessons_text():
    # 8 KV heads x 128 channels: 2 x 1,024 B of int8 data and 2 x 8 x 4 B = 64 B of scales, +3.125 %
    rows = scheme_bytes(["fp8", "int8_per_token_head"], num_kv_heads=8, head_size=128)
    fig = scale_bytes_figure(rows, title="t")
    note = next(a.text for a in fig.layout.annotations if a.x == "int8_per_token_head")
    assert note == "+3.1 %"
    text = (ROOT / "notebooks" / "02_quantization_error.py").read_text()
    said = re.search(r"64 bytes of scales on 2,048 bytes of data: \*\*([\d.]+) %\*\*", text)
    assert said and note == f"+{said.group(1)} %"


def test_lesson_02_heatmaps_can_share_one_colour_scale():
    from kvlab.plots import error_log_range

    gen = np.random.default_rng(0)
    fine = np.abs(gen.normal(size=(8, 16))) * 1e-3
    coarse = np.abs(gen.normal(size=(8, 16))) * 1e-1
    coarse[0, 0] = 0.0
    # hand-worked: top = log10 of the largest error; bottom = its 1st percentile, at most 4 decades down
    bottom, top = error_log_range(fine, fine, coarse, coarse)
    assert top == pytest.approx(np.log10(coarse.max()))
    assert top - 4.0 <= bottom < np.log10(fine.max())
    figs = [error_heatmaps_figure(e, e, e, e, title="t", log_range=(bottom, top)) for e in (fine, coarse)]
    ranges = {(f.layout.coloraxis.cmin, f.layout.coloraxis.cmax) for f in figs}
    assert ranges == {(bottom, top)}
    assert all("shared" in f.layout.coloraxis.colorbar.title.text for f in figs)
    lesson = (ROOT / "notebooks" / "02_quantization_error.py").read_text()
    assert "log_range=shared" in lesson and "one colour scale" in lesson.lower()


def _tick_labels_are_their_values(ax) -> None:
    assert ax.tickvals, "a log axis without explicit ticks shows 2, 5 … without their decade"
    for value, label in zip(ax.tickvals, ax.ticktext, strict=True):
        assert float(label.replace(",", "")) == pytest.approx(value)


def test_lesson_01_concurrency_log_axes_label_every_tick_with_its_value():
    explorer = build_memory_explorer(debounce_s=0)
    fig = explorer.figures["concurrency"]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    _tick_labels_are_their_values(fig.layout.xaxis)
    _tick_labels_are_their_values(fig.layout.yaxis)
    xs = [x for t in fig.data for x in t.x]
    ys = [y for t in fig.data for y in t.y]
    assert min(fig.layout.xaxis.tickvals) <= min(xs) and max(fig.layout.xaxis.tickvals) >= max(xs)
    assert min(fig.layout.yaxis.tickvals) <= min(ys) * 2.5 and max(fig.layout.yaxis.tickvals) >= max(ys) / 2.5


def _plot_height(fig) -> float:
    m = fig.layout.margin
    return fig.layout.height - m.t - m.b


def test_lesson_06_table_peak_equals_the_plotted_peak_and_titles_fit():
    explorer = build_serving_dashboard(debounce_s=0)
    table = explorer.panels["summary"].value
    peak = re.search(r"peak running / peak blocks</t[dh]>\s*<td[^>]*>(\d+) / ([\d,]+)", table)
    assert peak, table
    running = next(t for t in explorer.figures["queues"].data if t.name == "running")
    assert max(running.y) == int(peak.group(1))
    blocks = next(t for t in explorer.figures["pool"].data if t.name == "blocks in use")
    assert max(blocks.y) == int(peak.group(2).replace(",", ""))
    for name, fig in explorer.figures.items():
        for ax in (fig.layout.yaxis, fig.layout.xaxis):
            if ax.title.text:
                longest = max(len(re.sub(r"<[^>]+>", "", line)) for line in ax.title.text.split("<br>"))
                room = _plot_height(fig) if ax is fig.layout.yaxis else fig.layout.width or 900
                assert longest * CHAR_PX <= room, (name, ax.title.text, room)
