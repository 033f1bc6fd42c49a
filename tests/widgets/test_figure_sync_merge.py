"""``sync_figure(..., merge=True)``: traces that change different properties are updated in place, one
message per set of changed properties; the widget then holds exactly the new figure."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.basedatatypes import Undefined

from kvlab.plots.style import unvalidated_figures
from kvlab.widgets.admission_explorer import build_admission_explorer
from kvlab.widgets.figure_sync import sync_figure
from kvlab.widgets.plotly_bundle import SharedBundleFigureWidget
from tests.widgets.test_figure_sync import _assert_same, _messages


@pytest.fixture
def rng(seed) -> np.random.Generator:
    return np.random.default_rng(seed)


def _scatters(xs, ys) -> go.Figure:
    return go.Figure([go.Scatter(x=x, y=y, name=f"t{i}", mode="lines")
                      for i, (x, y) in enumerate(zip(xs, ys, strict=True))])


def _record_updates(widget: go.FigureWidget) -> list[dict]:
    updates: list[dict] = []
    original = widget._send_update_msg
    widget._send_update_msg = lambda *args, **kw: (updates.append(kw), original(*args, **kw))
    return updates


@pytest.mark.parametrize("validated", [True, False])
def test_traces_changing_different_properties_are_updated_in_place_one_message_per_set(validated, rng):
    xs = [rng.normal(size=6) for _ in range(4)]
    ys = [rng.normal(size=6) for _ in range(4)]
    widget = SharedBundleFigureWidget()
    sync_figure(widget, _scatters(xs, ys), merge=True)
    sent = _messages(widget)
    updates = _record_updates(widget)
    # traces 0 and 2 move along x, trace 1 along y, trace 3 stays; a new title
    new_xs = [xs[0] + 1.0, xs[1], xs[2] - 1.0, xs[3]]
    new_ys = [ys[0], ys[1] - 2.0, ys[2], ys[3]]
    new = _scatters(new_xs, new_ys)
    new.update_layout(title={"text": "moved"})
    if validated:
        sync_figure(widget, new, merge=True)
    else:
        with unvalidated_figures():
            sync_figure(widget, new, merge=True)
    assert sent == ["update", "update"]  # not a delete and an add; the unchanged trace in neither
    first, second = updates
    assert first["trace_indexes"] == [0, 2] and set(first["restyle_data"]) == {"x"}
    np.testing.assert_array_equal(first["restyle_data"]["x"][0], xs[0] + 1.0)
    np.testing.assert_array_equal(first["restyle_data"]["x"][1], xs[2] - 1.0)
    assert first["relayout_data"]["title"]["text"] == "moved"  # the layout goes with the first
    assert second["trace_indexes"] == [1] and set(second["restyle_data"]) == {"y"}
    np.testing.assert_array_equal(second["restyle_data"]["y"][0], ys[1] - 2.0)
    assert not second["relayout_data"]
    for update in updates:  # every trace named has a value for every property sent
        assert all(v is not Undefined for values in update["restyle_data"].values() for v in values)
    _assert_same(widget, new)


def test_without_merge_such_traces_are_still_replaced(rng):
    xs = [rng.normal(size=4) for _ in range(2)]
    ys = [rng.normal(size=4) for _ in range(2)]
    widget = SharedBundleFigureWidget()
    sync_figure(widget, _scatters(xs, ys))
    sent = _messages(widget)
    new = _scatters([xs[0] + 1.0, xs[1]], [ys[0], ys[1] + 1.0])
    sync_figure(widget, new)
    assert sent == ["deleteTraces", "addTraces"]
    _assert_same(widget, new)


def test_a_different_number_of_traces_is_replaced_even_with_merge(rng):
    widget = SharedBundleFigureWidget()
    sync_figure(widget, _scatters([rng.normal(size=3)] * 2, [rng.normal(size=3)] * 2), merge=True)
    sent = _messages(widget)
    new = _scatters([rng.normal(size=5)], [rng.normal(size=5)])
    sync_figure(widget, new, merge=True)
    assert sent == ["deleteTraces", "addTraces"]
    _assert_same(widget, new)


def test_the_admission_explorer_updates_its_figures_in_place_on_a_window_change():
    """A window change changes ``x`` of some traces and ``x``, ``y`` and ``customdata`` of others in
    the figures in steps: each figure is updated in place (update messages, one per set of changed
    properties), none is deleted and added again."""
    explorer = build_admission_explorer(debounce_s=0)
    sent = {name: _messages(fig) for name, fig in explorer.figures.items()}
    explorer.controls["sliding_window"].value = 512
    assert explorer.last_error is None
    for name in ("timeline", "blocks", "gate"):
        assert sent[name] and set(sent[name]) == {"update"}, (name, sent[name])
