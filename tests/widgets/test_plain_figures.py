"""Figures copied into a widget from their plain dicts (:mod:`kvlab.plots.plain`) show exactly what the
``go.Figure`` of the same builder shows, and the admission explorer builds no plotly figure for its
three figures in steps."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest
from plotly.utils import PlotlyJSONEncoder

from kvlab.analysis import blocks_in_use, gate_points, request_state_spans
from kvlab.plots.admission import blocks_figure, gate_figure, timeline_figure
from kvlab.plots.plain import PlainFigure, built_figure, plain_figures
from kvlab.plots.style import unvalidated_figures
from kvlab.widgets.admission_explorer import build_admission_explorer
from kvlab.widgets.figure_sync import sync_figure
from kvlab.widgets.plotly_bundle import SharedBundleFigureWidget


@pytest.fixture(scope="module")
def explorer():
    return build_admission_explorer(debounce_s=0)


def _builders(results):
    stalls = {k: r.summary.stalled.step if r.summary.stalled else None for k, r in results.items()}
    pools = {k: r.timeline[0].pool_size for k, r in results.items()}
    return {
        "timeline": lambda: timeline_figure({k: request_state_spans(r) for k, r in results.items()},
                                            stalls=stalls, title="t"),
        "blocks": lambda: blocks_figure({k: blocks_in_use(r) for k, r in results.items()}, title="b"),
        "gate": lambda: gate_figure({k: gate_points(r) for k, r in results.items()}, pools, title="g"),
    }


def test_built_figure_is_a_go_figure_except_inside_plain_figures():
    traces, layout = [dict(type="scatter", x=[1, 2], y=[3, 4])], dict(title=dict(text="x"))
    assert isinstance(built_figure(traces, layout), go.Figure)
    with plain_figures():
        plain = built_figure(traces, layout)
    assert isinstance(plain, PlainFigure) and plain.data is traces and plain._layout is layout
    assert isinstance(built_figure(traces, layout), go.Figure)  # the context is over


def _widget_json(widget: go.FigureWidget) -> str:
    """The widget's figure as JSON, without the ids the widget gives its traces."""
    d = widget.to_plotly_json()
    for trace in d["data"]:
        trace.pop("uid", None)
    return json.dumps(d, cls=PlotlyJSONEncoder, sort_keys=True)


@pytest.mark.parametrize("name", ["timeline", "blocks", "gate"])
def test_a_plain_figure_fills_and_updates_a_widget_as_its_go_figure_does(explorer, name):
    first = _builders(explorer.results)[name]
    explorer.controls["sliding_window"].value = 512
    second = _builders(explorer.results)[name]
    explorer.controls["sliding_window"].value = 1024  # back to the default
    with_figures, with_plain = SharedBundleFigureWidget(), SharedBundleFigureWidget()
    for build in (first, second):  # the first sync adds the traces, the second updates them in place
        with unvalidated_figures():  # as an explorer's update builds and copies them
            figure = build()
            with plain_figures():
                plain = build()
            assert isinstance(figure, go.Figure) and isinstance(plain, PlainFigure)
            sync_figure(with_figures, figure, merge=True)
            sync_figure(with_plain, plain, merge=True)
        assert _widget_json(with_plain) == _widget_json(with_figures)
    assert _widget_json(with_plain) != _widget_json(SharedBundleFigureWidget())  # it holds the figure


def test_the_admission_explorer_builds_plotly_figures_only_for_its_views_in_seconds(monkeypatch):
    explorer = build_admission_explorer(debounce_s=0)
    built: list[str] = []
    original = go.Figure.__init__

    def counting(self, *args, **kwargs):
        built.append("figure")
        original(self, *args, **kwargs)

    monkeypatch.setattr(go.Figure, "__init__", counting)
    explorer.controls["sliding_window"].value = 512
    assert explorer.last_error is None
    assert len(built) == 2  # throughput and TTFT; timeline, blocks and gate are copied from their dicts
