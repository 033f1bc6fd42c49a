"""Figures as plain plotly data, for a live widget to copy without building plotly's objects.

``go.Figure(data=traces, layout=layout)`` turns every trace dict and the layout into plotly objects,
property by property, even without validation: 8-15 ms of CPU for lesson 05's admission explorer's
three figures in steps on every change. An explorer copies a figure into its ``FigureWidget``
(:func:`kvlab.widgets.figure_sync.sync_figure`), which reads only the figure's trace dicts and layout
dict. Inside :func:`plain_figures` the builders that end with :func:`built_figure` return those as a
:class:`PlainFigure`; everywhere else (tests, static lessons) they return the ``go.Figure`` as before,
built from the same dicts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import plotly.graph_objects as go

from kvlab.plots.style import checked

_PLAIN: ContextVar[bool] = ContextVar("kvlab_plain_figures", default=False)


class PlainFigure:
    """A figure's traces (plotly-JSON dicts, each with its ``type``) and layout (a plotly-JSON dict),
    read the way :func:`~kvlab.widgets.figure_sync.sync_figure` reads a ``go.Figure``: ``_data``,
    ``_layout`` and ``data``. Never validated: the same builders' ``go.Figure`` is, in the tests."""

    __slots__ = ("_data", "_layout")

    def __init__(self, data: list[dict], layout: dict) -> None:
        self._data = data
        self._layout = layout

    @property
    def data(self) -> list[dict]:
        """The trace dicts (``FigureWidget.add_traces`` accepts them as they are)."""
        return self._data


@contextmanager
def plain_figures() -> Iterator[None]:
    """Within the body (this thread only), :func:`built_figure` returns a :class:`PlainFigure`."""
    token = _PLAIN.set(True)
    try:
        yield
    finally:
        _PLAIN.reset(token)


def built_figure(traces: list[dict], layout: dict) -> go.Figure | PlainFigure:
    """``go.Figure(data=traces, layout=layout)`` (validated unless inside
    :func:`~kvlab.plots.style.unvalidated_figures`), or inside :func:`plain_figures` the
    :class:`PlainFigure` of the same dicts."""
    if _PLAIN.get():
        return PlainFigure(traces, layout)
    return go.Figure(data=traces, layout=layout, **checked())
