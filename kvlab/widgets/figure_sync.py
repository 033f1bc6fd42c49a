"""Copying a freshly built figure into a live ``FigureWidget`` in one batched update."""

from __future__ import annotations

import plotly.graph_objects as go

from kvlab.plots.style import validating


def sync_figure(target: go.FigureWidget, source: go.Figure) -> None:
    """Make ``target`` show ``source``: its traces replace the old ones and its layout is applied,
    all sent to the browser as one message.

    Replacing the traces is faster than updating them property by property (the new traces were
    validated once already, when ``source`` was built). The figures' ``uirevision`` keeps the user's
    zoom across updates. Inside :func:`kvlab.plots.style.unvalidated_figures` the widget does not
    validate the copies either (``source`` was built by kvlab's builders, validated in the tests).
    """
    target._validate = validating()
    layout = source.layout.to_plotly_json()
    if target.layout.template.layout.paper_bgcolor is not None:
        layout.pop("template", None)  # every kvlab figure uses one template; re-validating it is slow
    with target.batch_update():
        target.data = ()
        target.add_traces(list(source.data))
        target.layout.annotations = ()
        target.layout.shapes = ()
        target.update_layout(layout, overwrite=True)
