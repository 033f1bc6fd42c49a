"""Views an explorer draws just after the others (its runs in seconds) are marked as computing while
they still show the previous setting, and become exactly the fresh values for the settings on screen
once the deferred draw has run; one the deferred draw leaves out is marked as not current."""

from __future__ import annotations

import asyncio

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from kvlab.widgets.admission_explorer import build_admission_explorer
from kvlab.widgets.explorer import Explorer, empty_figure_widget
from kvlab.widgets.serving_dashboard import build_serving_dashboard
from kvlab.widgets.stale import (
    PENDING_TITLE_PREFIX,
    figure_is_pending,
    figure_is_stale,
    panel_is_pending,
)


def _shown(fig: go.Figure) -> tuple[str, list[dict]]:
    """Title and traces (without the ids the widget assigns), arrays as lists."""
    traces = []
    for trace in fig.to_plotly_json()["data"]:
        traces.append({k: np.asarray(v).tolist() if isinstance(v, np.ndarray) else v
                       for k, v in trace.items() if k != "uid"})
    return fig.layout.title.text, traces


def _change_in_a_notebook(explorer: Explorer, control: str, value, while_pending) -> None:
    """Change a control inside a running event loop (as in a notebook); ``while_pending`` runs right
    after the change returned, before the loop ran the deferred draw."""

    async def interact():
        explorer.controls[control].value = value
        while_pending()
        await asyncio.sleep(0.01)

    asyncio.run(interact())


def test_admission_time_views_are_marked_computing_until_the_new_run_arrives():
    explorer = build_admission_explorer(debounce_s=0)
    old_titles = {name: explorer.figures[name].layout.title.text for name in ("throughput", "ttft")}
    old_panel = explorer.panels["time"].value

    def while_pending():
        assert explorer.pending == {"throughput", "ttft", "time"}
        for name in ("throughput", "ttft"):
            fig = explorer.figures[name]
            assert figure_is_pending(fig), name
            assert fig.layout.title.text == PENDING_TITLE_PREFIX + old_titles[name]
        panel = explorer.panels["time"].value
        assert panel_is_pending(explorer.panels["time"]) and "computing" in panel and old_panel in panel
        for name in ("timeline", "blocks", "gate"):  # drawn for the new setting already
            assert not figure_is_pending(explorer.figures[name]), name

    _change_in_a_notebook(explorer, "policy_b", "exact", while_pending)
    fresh = build_admission_explorer(policy_b="exact", debounce_s=0)
    assert explorer.pending == set() and explorer.stale == set()
    for name, fig in explorer.figures.items():
        assert not figure_is_pending(fig) and not figure_is_stale(fig), name
        assert fig.layout.title.font.color is None
        assert _shown(fig) == _shown(fresh.figures[name]), name
    assert explorer.panels["time"].value == fresh.panels["time"].value


def test_serving_time_figure_is_marked_computing_and_then_shows_the_new_run():
    explorer = build_serving_dashboard(debounce_s=0)

    def while_pending():
        assert explorer.pending == {"time"}
        assert figure_is_pending(explorer.figures["time"])
        assert not figure_is_pending(explorer.figures["queues"])
        assert "wall time" not in explorer.panels["summary"].value  # its time rows wait for the run

    _change_in_a_notebook(explorer, "kv_cache_dtype", "fp8", while_pending)
    fresh = build_serving_dashboard(kv_cache_dtype="fp8", debounce_s=0)
    assert explorer.pending == set()
    assert _shown(explorer.figures["time"]) == _shown(fresh.figures["time"])
    assert explorer.panels["summary"].value == fresh.panels["summary"].value


def test_a_deferred_view_that_draws_nothing_is_marked_not_current():
    dropdown = widgets.Dropdown(options=[1, 2, 3], value=1)
    figures = {"first": empty_figure_widget(), "second": empty_figure_widget()}

    def render():
        value = dropdown.value
        explorer.later(lambda: {} if value == 3 else {"second": go.Figure(go.Bar(x=["b"], y=[value]))},
                       views=("second",))
        return {"first": go.Figure(go.Bar(x=["a"], y=[value]))}

    explorer = Explorer({"x": dropdown}, figures, render, debounce_s=0)
    explorer.update()
    _change_in_a_notebook(explorer, "x", 2, lambda: None)
    assert not figure_is_stale(figures["second"]) and list(figures["second"].data[0].y) == [2]
    _change_in_a_notebook(explorer, "x", 3, lambda: None)  # no second view for 3
    assert explorer.last_error is None and explorer.stale == {"second"}
    assert figure_is_stale(figures["second"]) and not figure_is_pending(figures["second"])
    assert "no result for the settings on screen" in figures["second"].layout.annotations[0].text
