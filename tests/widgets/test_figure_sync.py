"""Copying a figure into a live widget leaves the widget holding exactly the new figure, and never
writes into the figure it copied."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from kvlab.plots.style import unvalidated_figures
from kvlab.widgets.figure_sync import sync_figure
from kvlab.widgets.plotly_bundle import SharedBundleFigureWidget
from kvlab.widgets.stale import figure_is_stale, mark_figure_stale


def _figure(ys: list[np.ndarray], title: str, **layout) -> go.Figure:
    fig = go.Figure([go.Scatter(x=np.arange(len(y)), y=y, name=f"t{i}", mode="lines")
                     for i, y in enumerate(ys)])
    fig.update_layout(title={"text": title}, **layout)
    return fig


def _plain(fig: go.Figure) -> dict:
    """The figure as JSON-like data, without the ids the widget assigns to its traces."""
    d = fig.to_plotly_json()
    for t in d["data"]:
        t.pop("uid", None)
    d["layout"].pop("template", None)
    for key in ("shapes", "annotations"):  # an empty list of shapes draws as no shapes
        if d["layout"].get(key) == []:
            del d["layout"][key]
    return d


def _assert_same(widget: go.FigureWidget, fig: go.Figure) -> None:
    a, b = _plain(widget), _plain(fig)
    assert len(a["data"]) == len(b["data"])
    for ta, tb in zip(a["data"], b["data"], strict=True):
        assert ta.keys() == tb.keys()
        for k in ta:
            np.testing.assert_array_equal(np.asarray(ta[k], dtype=object), np.asarray(tb[k], dtype=object))
    assert a["layout"] == b["layout"]


@pytest.fixture
def rng(seed) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.fixture(params=[True, False], ids=["validated", "unvalidated"])
def mode(request):
    if request.param:
        yield
    else:
        with unvalidated_figures():
            yield


def test_a_different_number_of_traces_replaces_them(mode, rng):
    widget = SharedBundleFigureWidget()
    sync_figure(widget, _figure([rng.normal(size=5)] * 3, "three"))
    new = _figure([rng.normal(size=7)], "one", annotations=[{"text": "note", "x": 1, "y": 1}])
    sync_figure(widget, new)
    _assert_same(widget, new)
    assert len(widget.layout.annotations) == 1 and widget.layout.annotations[0].text == "note"


def test_a_stale_mark_is_removed_and_never_reaches_the_source_figure(mode, rng):
    ys = [rng.normal(size=10)]
    widget = SharedBundleFigureWidget()
    source = _figure(ys, "answer")
    sync_figure(widget, source)
    mark_figure_stale(widget)
    assert figure_is_stale(widget) and len(widget.layout.shapes) == 1
    assert source.layout.title.text == "answer" and not source.layout.shapes  # the widget holds copies
    sync_figure(widget, source)  # the same settings again: the mark goes, the figure is the answer
    assert not figure_is_stale(widget)
    assert widget.layout.shapes == () and widget.layout.annotations == ()
    _assert_same(widget, source)
