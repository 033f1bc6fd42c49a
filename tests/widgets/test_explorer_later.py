"""Figures an explorer defers with ``later`` are drawn after the others: at once outside an event loop,
as the loop's next callback inside one (a newer update cancels them), and a failure marks them."""

from __future__ import annotations

import asyncio

import ipywidgets as widgets
import plotly.graph_objects as go

from kvlab.widgets.explorer import Explorer, empty_figure_widget
from kvlab.widgets.stale import figure_is_stale


def _explorer(fail_later_at: int | None = None):
    dropdown = widgets.Dropdown(options=[1, 2, 3, 4], value=1)
    figures = {"first": empty_figure_widget(), "second": empty_figure_widget()}
    drawn: list[tuple[str, int]] = []

    def second(value):
        if value == fail_later_at:
            raise ValueError(f"no second view for {value}")
        drawn.append(("second", value))
        return {"second": go.Figure(go.Scatter(x=[0, 1], y=[value, value]), layout={"title": {"text": "2"}})}

    def render():
        value = dropdown.value
        drawn.append(("first", value))
        explorer.later(lambda: second(value))
        return {"first": go.Figure(go.Bar(x=["a"], y=[value]), layout={"title": {"text": "1"}})}

    explorer = Explorer({"x": dropdown}, figures, render, debounce_s=0.15)
    return explorer, dropdown, drawn


def test_outside_an_event_loop_both_are_drawn_before_the_change_returns():
    explorer, dropdown, drawn = _explorer()
    dropdown.value = 2
    assert drawn == [("first", 2), ("second", 2)]
    assert list(explorer.figures["second"].data[0].y) == [2, 2]


def test_inside_an_event_loop_the_second_view_follows_and_a_newer_update_cancels_it():
    explorer, dropdown, drawn = _explorer()

    async def interact():
        dropdown.value = 2
        assert drawn == [("first", 2)]  # the first figure is sent; the second is scheduled
        assert list(explorer.figures["first"].data[0].y) == [2]
        dropdown.value = 3  # before the loop ran the deferred view of 2
        await asyncio.sleep(0.01)

    asyncio.run(interact())
    assert drawn == [("first", 2), ("first", 3), ("second", 3)]
    assert list(explorer.figures["second"].data[0].y) == [3, 3]


def test_refresh_draws_a_deferred_view_now():
    explorer, dropdown, drawn = _explorer()

    async def interact():
        dropdown.value = 4
        explorer.refresh()
        assert drawn == [("first", 4), ("second", 4)]

    asyncio.run(interact())


def test_a_deferred_view_that_fails_is_marked_not_current():
    explorer, dropdown, drawn = _explorer(fail_later_at=3)
    dropdown.value = 2
    assert not figure_is_stale(explorer.figures["second"])
    dropdown.value = 3
    assert explorer.last_error == "no second view for 3"
    assert figure_is_stale(explorer.figures["second"]) and explorer.stale == {"second"}
    assert not figure_is_stale(explorer.figures["first"])
    dropdown.value = 4
    assert explorer.stale == set() and not figure_is_stale(explorer.figures["second"])


def test_a_cancelled_deferred_figure_is_drawn_by_the_next_update_even_with_the_same_inputs():
    scheme = widgets.Dropdown(options=["a", "b"], value="a")
    head = widgets.Dropdown(options=[0, 1], value=0)
    figures = {"first": empty_figure_widget(), "second": empty_figure_widget()}

    def render():
        s, h = scheme.value, head.value
        if explorer.changed("second", s):  # the second view ignores the head
            explorer.later(lambda: {"second": go.Figure(go.Bar(x=[s], y=[1]))}, figures=("second",))
        return {"first": go.Figure(go.Bar(x=[f"{s}{h}"], y=[1]))}

    explorer = Explorer({"scheme": scheme, "head": head}, figures, render, debounce_s=0.15)
    explorer.update()
    assert list(figures["second"].data[0].x) == ["a"]

    async def interact():
        scheme.value = "b"  # its second view is scheduled …
        head.value = 1  # … and cancelled by this update, whose inputs for it are the same
        await asyncio.sleep(0.01)

    asyncio.run(interact())
    assert list(figures["first"].data[0].x) == ["b1"]
    assert list(figures["second"].data[0].x) == ["b"]
