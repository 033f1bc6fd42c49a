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


def _messages(widget: go.FigureWidget) -> list[str]:
    """Record the names of the messages the widget sends to the browser (each costs it a redraw)."""
    sent: list[str] = []
    for name in ("_send_addTraces_msg", "_send_deleteTraces_msg", "_send_restyle_msg",
                 "_send_relayout_msg", "_send_update_msg"):
        original = getattr(widget, name)

        def record(*args, _original=original, _name=name, **kwargs):
            sent.append(_name.removeprefix("_send_").removesuffix("_msg"))
            return _original(*args, **kwargs)

        setattr(widget, name, record)
    return sent


def test_the_layout_goes_between_delete_and_add_and_an_unchanged_figure_sends_nothing(mode, rng):
    widget = SharedBundleFigureWidget()
    first = _figure([rng.normal(size=6)], "first")
    sync_figure(widget, first)
    sent = _messages(widget)
    second = _figure([rng.normal(size=6), rng.normal(size=6)], "second")
    sync_figure(widget, second)
    # the new data is drawn once, after the layout: delete (empty figure), layout, add
    assert sent == ["deleteTraces", "update", "addTraces"]
    _assert_same(widget, second)
    sent.clear()
    sync_figure(widget, _figure([y.copy() for y in (d.y for d in second.data)], "second"))  # equal copies
    assert sent == []
    sync_figure(widget, _figure([np.asarray(d.y) for d in second.data], "second, retitled"))
    assert sent == ["update"]  # same traces: only the layout
    assert widget.layout.title.text == "second, retitled"
    new_data = [np.asarray(d.y) + 1.0 for d in second.data]
    sync_figure(widget, _figure(new_data, "second, retitled"))
    assert sent == ["update", "update"]  # same layout, same properties set: the changed values only
    _assert_same(widget, _figure(new_data, "second, retitled"))


def test_traces_that_change_the_same_properties_send_only_those_with_the_layout_in_one_message(mode, rng):
    widget = SharedBundleFigureWidget()
    z, text = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))

    def heatmaps(grids, title):
        traces = [go.Heatmap(z=g, text=t, name=f"h{i}")
                  for i, (g, t) in enumerate(zip(grids, text, strict=True))]
        return go.Figure(traces, layout=dict(title=dict(text=title)))

    sync_figure(widget, heatmaps(z, "first"))
    sent = _messages(widget)
    updates: list[dict] = []
    original = widget._send_update_msg
    widget._send_update_msg = lambda *args, **kw: (updates.append(kw), original(*args, **kw))
    new_z = z + 1.0
    sync_figure(widget, heatmaps(new_z, "second"))
    assert sent == ["update"]  # the page draws it once
    (update,) = updates
    assert set(update["restyle_data"]) == {"z"} and update["trace_indexes"] == [0, 1]  # not the text
    assert all(np.array_equal(a, b) for a, b in zip(update["restyle_data"]["z"], new_z, strict=True))
    assert update["relayout_data"]["title"]["text"] == "second"
    _assert_same(widget, heatmaps(new_z, "second"))
    # traces that change different properties (or set other ones) are replaced
    sent.clear()
    mixed = heatmaps(new_z, "second")
    mixed.data[1].text = text[1] + 1.0
    mixed.data[0].z = new_z[0] + 1.0
    sync_figure(widget, mixed)
    assert sent == ["deleteTraces", "addTraces"]
    _assert_same(widget, mixed)


def test_a_stale_mark_on_an_unchanged_figure_is_still_removed(mode, rng):
    widget = SharedBundleFigureWidget()
    source = _figure([rng.normal(size=4)], "answer", annotations=[{"text": "a", "x": 0, "y": 0}])
    sync_figure(widget, source)
    mark_figure_stale(widget)
    sent = _messages(widget)
    sync_figure(widget, source)
    assert sent == ["update"] and not figure_is_stale(widget)
    _assert_same(widget, source)


def test_a_layout_change_sends_only_the_entries_that_changed(mode, rng):
    widget = SharedBundleFigureWidget()
    ys = [rng.normal(size=8), rng.normal(size=8)]
    notes = [{"text": "A · uncapped", "x": 0, "y": 1}, {"text": "B · vllm", "x": 1, "y": 1}]
    sync_figure(widget, _figure(ys, "steps", annotations=notes, xaxis={"title": {"text": "step"}}))
    updates: list[dict] = []
    original = widget._send_update_msg
    widget._send_update_msg = lambda *args, **kw: (updates.append(kw), original(*args, **kw))
    relabelled = [notes[0], {**notes[1], "text": "B · exact"}]
    new = _figure(ys, "steps", annotations=relabelled, xaxis={"title": {"text": "step"}})
    sync_figure(widget, new)
    (update,) = updates
    assert set(update["relayout_data"]) == {"annotations"}  # not the title, axes, margins, template…
    assert [a["text"] for a in update["relayout_data"]["annotations"]] == ["A · uncapped", "B · exact"]
    _assert_same(widget, new)
    # a stale mark (a title prefix, a shape and an annotation) is taken off by the same kind of message
    mark_figure_stale(widget)
    updates.clear()
    sync_figure(widget, new)
    (update,) = updates
    assert set(update["relayout_data"]) == {"title", "annotations", "shapes"}
    assert not figure_is_stale(widget) and widget.layout.shapes == ()
    _assert_same(widget, new)
