"""When the settings on screen fail, no figure or number of an earlier setting reads as the answer:
figures are marked "not current" (title, veil, note) and panels of numbers are cleared; the next
good setting redraws them exactly as a freshly built explorer draws that setting."""

from __future__ import annotations

import html
import json
import re

import ipywidgets as widgets
import plotly.graph_objects as go
import plotly.utils
import pytest

from kvlab.widgets.admission_explorer import build_admission_explorer
from kvlab.widgets.explorer import Explorer, empty_figure_widget
from kvlab.widgets.memory_explorer import build_memory_explorer
from kvlab.widgets.stale import STALE_TITLE_PREFIX, NumberPanel, figure_is_stale, panel_is_stale


def _veiled(fig) -> bool:
    return any(s.name == "kvlab-stale" for s in fig.layout.shapes) and any(
        a.name == "kvlab-stale" and "not current" in a.text for a in fig.layout.annotations
    )


def _data(fig) -> str:
    traces = [{k: v for k, v in t.to_plotly_json().items() if k != "uid"} for t in fig.data]
    return json.dumps(traces, cls=plotly.utils.PlotlyJSONEncoder, sort_keys=True)


def test_lesson_05_window_16384_marks_every_figure_and_clears_the_numbers():
    explorer = build_admission_explorer(debounce_s=0)
    before = {name: fig.layout.title.text for name, fig in explorer.figures.items()}
    assert explorer.panels["banners"].value  # the stall banners of the working setting
    explorer.controls["sliding_window"].value = 16384  # 32,768-token requests no longer fit in 8 GiB
    assert explorer.status.level == "error" and "would not start" in explorer.status.message
    for name, fig in explorer.figures.items():
        assert figure_is_stale(fig) and _veiled(fig), name
        assert fig.layout.title.text == STALE_TITLE_PREFIX + before[name]
    for panel in ("banners", "time"):
        assert panel_is_stale(explorer.panels[panel])
        visible = html.unescape(re.sub(r"<[^>]+>", "", explorer.panels[panel].value))
        assert not re.search(r"\d", visible), panel  # no number left on screen
    assert explorer.stale == {"timeline", "blocks", "gate", "throughput", "ttft", "banners", "time"}

    explorer.controls["sliding_window"].value = 2048
    fresh = build_admission_explorer(sliding_window=2048, debounce_s=0)
    assert explorer.stale == set() and explorer.last_error is None
    for name, fig in explorer.figures.items():
        assert not figure_is_stale(fig) and not _veiled(fig), name
        assert fig.layout.title.font.color is None
        assert _data(fig) == _data(fresh.figures[name]), name
    assert explorer.panels["banners"].value == fresh.panels["banners"].value
    assert explorer.panels["time"].value == fresh.panels["time"].value


def test_lesson_01_too_little_memory_marks_only_what_needs_the_startup():
    explorer = build_memory_explorer(debounce_s=0)
    explorer.controls["kv_memory_gib"].value = explorer.controls["kv_memory_gib"].min
    assert explorer.status.level == "error"
    # bytes per token and the concurrency curve do not need vLLM to start: they stay current
    assert explorer.stale == {"memory", "summary"}
    assert not figure_is_stale(explorer.figures["bytes"])
    assert not figure_is_stale(explorer.figures["concurrency"])
    assert figure_is_stale(explorer.figures["memory"]) and panel_is_stale(explorer.panels["summary"])
    explorer.controls["kv_memory_gib"].value = 20.0
    assert explorer.stale == set() and not panel_is_stale(explorer.panels["summary"])
    assert "max concurrency" in explorer.panels["summary"].value


def _toy_explorer(fail_on: set[int]):
    """One slider; figure "a" plots [x], figure "b" only depends on x // 10 (kept when unchanged)."""
    slider = widgets.IntSlider(value=1, min=0, max=100)
    panel = NumberPanel()

    def render():
        x = slider.value
        figs = {}
        if explorer.changed("b", x // 10):
            figs["b"] = go.Figure(go.Bar(y=[x // 10]), layout={"title": {"text": f"b {x // 10}"}})
        if x in fail_on:
            explorer.fail(f"x = {x} is not allowed")
            return figs
        panel.value = f"<b>{x}</b>"
        figs["a"] = go.Figure(go.Scatter(y=[x]), layout={"title": {"text": f"a {x}"}})
        return figs

    explorer = Explorer({"x": slider}, {"a": empty_figure_widget(), "b": empty_figure_widget()}, render,
                        panels={"numbers": panel}, debounce_s=0)
    explorer.update()
    return explorer, slider, panel


def test_the_shared_mechanism_keeps_what_is_still_current():
    explorer, slider, panel = _toy_explorer(fail_on={3, 45})
    slider.value = 3  # fails; b's input (0) is unchanged, so b still belongs to x = 3
    assert explorer.stale == {"a", "numbers"}
    assert figure_is_stale(explorer.figures["a"]) and not figure_is_stale(explorer.figures["b"])
    assert explorer.figures["a"].layout.title.text == STALE_TITLE_PREFIX + "a 1"
    slider.value = 45  # fails again; b is redrawn for 45 // 10 = 4
    assert explorer.figures["b"].data[0].y == (4,) and not figure_is_stale(explorer.figures["b"])
    assert explorer.figures["a"].layout.title.text == STALE_TITLE_PREFIX + "a 1"  # marked once
    slider.value = 7
    assert explorer.stale == set()
    assert explorer.figures["a"].data[0].y == (7,) and explorer.figures["a"].layout.title.text == "a 7"
    assert explorer.figures["b"].data[0].y == (0,) and panel.value == "<b>7</b>"


@pytest.mark.parametrize("error", [ValueError("bad"), RuntimeError("worse")])
def test_an_exception_in_the_renderer_marks_everything(error):
    explorer, slider, panel = _toy_explorer(fail_on=set())
    original = explorer._render

    def broken():
        raise error

    explorer._render = broken
    slider.value = 50
    assert explorer.stale == {"a", "b", "numbers"} and explorer.status.level == "error"
    explorer._render = original
    slider.value = 51
    assert explorer.stale == set() and explorer.figures["b"].data[0].y == (5,)


def test_kernel_explorer_benchmark_figures_are_marked_when_they_cannot_be_redrawn(monkeypatch):
    from pathlib import Path

    from kvlab.widgets import kernel_explorer as ke

    sample = Path(__file__).parent / "fixtures" / "kernel_bench_sample.csv"
    explorer = ke.build_kernel_explorer(benchmark_csv=sample, debounce_s=0)
    drawn = ke.benchmark_time_figure

    def broken(rows, *, title):
        raise ValueError("a malformed row")

    monkeypatch.setattr(ke, "benchmark_time_figure", broken)
    explorer.controls["bench_batch"].value = 1
    assert explorer.bench_status.level == "error"
    assert {"bench_time", "bench_bandwidth"} <= explorer.stale
    assert figure_is_stale(explorer.figures["bench_time"]) and _veiled(explorer.figures["bench_bandwidth"])
    monkeypatch.setattr(ke, "benchmark_time_figure", drawn)
    explorer.controls["bench_batch"].value = 16
    assert not {"bench_time", "bench_bandwidth"} & explorer.stale
    assert not figure_is_stale(explorer.figures["bench_time"])
