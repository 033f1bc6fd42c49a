"""The error-versus-bytes frontier as a figure (points from :func:`kvlab.analysis.frontier.frontier`)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from kvlab.analysis.frontier import FrontierPoint, on_frontier
from kvlab.plots.palette import GREY, OKABE_ITO
from kvlab.plots.style import column, figure

_KIND_STYLE = {True: ("vLLM --kv-cache-dtype", OKABE_ITO["blue"], "circle"),
               False: ("kvlab scheme (not in vLLM)", OKABE_ITO["vermillion"], "diamond")}


def frontier_figure(
    points: Sequence[FrontierPoint], title: str, *, highlight: str | None = None
) -> go.Figure:
    """Attention-output error (log) against bits per stored element, one marker per scheme.

    vLLM's dtypes and kvlab's low-bit schemes get different colours and shapes; a grey line joins the
    Pareto frontier (schemes no other scheme beats on both axes). ``highlight`` circles one scheme.
    """
    valid = [p for p in points if p.rel_error == p.rel_error]
    traces = []
    for vllm, (label, color, symbol) in _KIND_STYLE.items():
        pts = [p for p in valid if p.is_vllm == vllm]
        if not pts:
            continue
        traces.append(go.Scatter(
            x=column([p.bits_per_element for p in pts]), y=column([p.rel_error for p in pts]),
            mode="markers+text", name=label, text=[p.scheme for p in pts], textposition="top right",
            textfont=dict(size=10), marker=dict(color=color, symbol=symbol, size=10),
            customdata=column([[p.bytes_per_token] for p in pts]),
            hovertemplate="%{text}<br>%{x:.2f} bits/element, %{customdata[0]} B/token<br>"
                          "attention error %{y:.3g}<extra></extra>"))
    best = on_frontier(valid)
    traces.append(go.Scatter(x=column([p.bits_per_element for p in best]),
                             y=column([p.rel_error for p in best]),
                             mode="lines", name="frontier", line=dict(color=GREY, dash="dot"),
                             hoverinfo="skip"))
    chosen = [p for p in valid if p.scheme == highlight]
    if chosen:
        traces.append(go.Scatter(x=[chosen[0].bits_per_element], y=[chosen[0].rel_error], mode="markers",
                                 name=highlight, marker=dict(size=20, color="rgba(0,0,0,0)",
                                                             line=dict(width=2, color="black")),
                                 hoverinfo="skip"))
    return figure(traces, title, "bits per stored K/V element (scales and zero points included)",
                  "attention-output relative error", yaxis=dict(type="log"), height=420)
