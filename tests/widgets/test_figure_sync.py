"""Copying a figure into a live widget sends only what changed, in one message, and leaves the widget
holding exactly the new figure."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from kvlab.plots.style import unvalidated_figures
from kvlab.widgets.figure_sync import sync_figure
from kvlab.widgets.plotly_bundle import SharedBundleFigureWidget
from kvlab.widgets.stale import figure_is_stale, mark_figure_stale

COMMANDS = ("_py2js_addTraces", "_py2js_deleteTraces", "_py2js_restyle", "_py2js_relayout", "_py2js_update")


def _figure(ys: list[np.ndarray], title: str, **layout) -> go.Figure:
    fig = go.Figure([go.Scatter(x=np.arange(len(y)), y=y, name=f"t{i}", mode="lines")
                     for i, y in enumerate(ys)])
    fig.update_layout(title={"text": title}, **layout)
    return fig


def _recorder(widget: go.FigureWidget) -> list[tuple[str, dict]]:
    sent: list[tuple[str, dict]] = []
    widget.observe(lambda ch: sent.append((ch["name"], ch["new"])) if ch["new"] is not None else None,
                   names=list(COMMANDS))
    return sent


def _plain(fig: go.Figure) -> dict:
    """The figure as JSON-like data, without the ids the widget assigns to its traces."""
    d = fig.to_plotly_json()
    for t in d["data"]:
        t.pop("uid", None)
    d["layout"].pop("template", None)
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


def test_one_changed_trace_is_one_update_with_only_its_new_values(mode, rng):
    ys = [rng.normal(size=50) for _ in range(3)]
    widget = SharedBundleFigureWidget()
    sync_figure(widget, _figure(ys, "first"))
    sent = _recorder(widget)
    ys2 = [ys[0], ys[1] + 1.0, ys[2]]
    new = _figure(ys2, "first")
    sync_figure(widget, new)
    assert [name for name, _ in sent] == ["_py2js_update"]
    msg = sent[0][1]
    assert msg["style_traces"] == [1]
    assert set(msg["style_data"]) == {"y"}
    np.testing.assert_array_equal(np.asarray(msg["style_data"]["y"][0]), ys2[1])
    assert msg["layout_data"] == {}
    _assert_same(widget, new)
    np.testing.assert_array_equal(widget.data[1].y, ys2[1])


def test_an_identical_figure_sends_nothing(mode, rng):
    ys = [rng.normal(size=20)]
    widget = SharedBundleFigureWidget()
    sync_figure(widget, _figure(ys, "same"))
    sent = _recorder(widget)
    sync_figure(widget, _figure([y.copy() for y in ys], "same"))
    assert sent == []


def test_layout_change_and_a_new_subplot_axis_arrive_in_the_same_message(mode, rng):
    ys = [rng.normal(size=10), rng.normal(size=10)]
    widget = SharedBundleFigureWidget()
    sync_figure(widget, _figure(ys, "before"))
    sent = _recorder(widget)
    new = _figure(ys, "after", yaxis2={"title": {"text": "second (ms)"}, "overlaying": "y", "side": "right"})
    new.data[1].yaxis = "y2"
    sync_figure(widget, new)
    assert [name for name, _ in sent] == ["_py2js_update"]
    assert sent[0][1]["layout_data"]["title.text"] == "after"  # a nested change, by its path
    assert widget.layout.yaxis2.title.text == "second (ms)"
    assert widget.data[1].yaxis == "y2"
    _assert_same(widget, new)


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
