"""Figures of the kernel lesson: output errors per head, output differences, GPU benchmark results."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from kvlab.plots.palette import GREY, OKABE_ITO, SEQUENTIAL, scheme_color
from kvlab.plots.quantization import grid_columns, log_color_ticks
from kvlab.plots.style import COLORBAR_STYLE, axis, base_layout, checked, figure


def head_error_figure(
    format_error: Sequence[float], kernel_error: Sequence[float] | None, *, title: str
) -> go.Figure:
    """Relative output error per query head: the format's (reference vs truth) and, when run, the
    kernel's own (Triton vs reference)."""
    heads = list(range(len(format_error)))
    traces = [go.Bar(x=heads, y=list(format_error), name="format: reference vs truth",
                     marker=dict(color=OKABE_ITO["orange"]),
                     hovertemplate="head %{x}<br>reference vs truth %{y:.3g}<extra></extra>", **checked())]
    if kernel_error is not None:
        traces.append(go.Bar(x=heads, y=list(kernel_error), name="kernel: Triton vs reference",
                             marker=dict(color=OKABE_ITO["blue"]),
                             hovertemplate="head %{x}<br>Triton vs reference %{y:.3g}<extra></extra>",
                             **checked()))
    return figure(traces, title, "query head (index)", "relative error of the output (log scale)",
                  yaxis=dict(type="log", exponentformat="power"), xaxis=dict(dtick=1), barmode="group")


def output_difference_figure(diff: np.ndarray, *, title: str, what: str) -> go.Figure:
    """``|a − b|`` of two attention outputs, rows = (token, head), columns = channels, log colour."""
    nz = diff[diff > 0]
    top = float(np.log10(nz.max())) if nz.size else 0.0
    bottom = max(float(np.log10(np.percentile(nz, 1))), top - 5.0) if nz.size else -1.0
    x, y, d = grid_columns(diff)
    trace = go.Heatmap(
        x=x, y=y, z=np.log10(np.maximum(d, 10.0**bottom)), customdata=d, coloraxis="coloraxis",
        hovertemplate=f"row %{{y}}, channel %{{x}}<br>|{what}| %{{customdata:.3g}}<extra></extra>",
        **checked(),
    )
    lay = base_layout(title, height=380)
    lay.update(
        xaxis=axis("channel (index)"), yaxis=axis("query token × head (row)", autorange="reversed"),
        coloraxis=dict(colorscale=SEQUENTIAL, cmin=bottom, cmax=top,
                       colorbar=dict(title=dict(text="|difference|<br>(log scale)"), **COLORBAR_STYLE,
                                     **log_color_ticks(int(np.ceil(bottom)), int(np.floor(top))))),
    )
    return go.Figure(data=[trace], layout=lay, **checked())


#: Context axis of the benchmark figures: log scale, one tick per doubling, thousands separated.
_CONTEXT_AXIS = dict(type="log", dtick=float(np.log10(2)), tickformat=",d")


def _by_scheme(rows: Sequence[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["scheme"], r["context"])):
        out.setdefault(r["scheme"], []).append(r)
    return out


def _no_data(title: str, x_title: str, y_title: str, message: str) -> go.Figure:
    fig = figure([go.Scatter(x=[], y=[], name="no data", hovertemplate="no data<extra></extra>",
                                                         **checked())],
                 title, x_title, y_title,
                 annotations=[dict(text=message, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False)])
    return fig


def benchmark_time_figure(rows: Sequence[dict], *, title: str, roofline: bool = True) -> go.Figure:
    """Median time per call vs context, one line per scheme, with each scheme's bandwidth floor.

    The floor (dashed) is ``bytes / copy bandwidth``: the time the call would take if it moved its
    bytes at the device's measured copy speed — what a memory-bound kernel can at best reach.
    """
    x_title, y_title = "context (tokens per sequence, log scale)", "median time per call (µs, log scale)"
    if not rows:
        return _no_data(title, x_title, y_title, "no benchmark rows for this selection")
    traces = []
    for scheme, rs in _by_scheme(rows).items():
        color = scheme_color(scheme)
        per_token = [r["bytes"] / (r["batch"] * max(r["context"], 1)) for r in rs]
        traces.append(go.Scatter(
            x=[r["context"] for r in rs], y=[r["median_us"] for r in rs], name=scheme, legendgroup=scheme,
            mode="lines+markers", line=dict(color=color, width=2.5),
            customdata=[[r["gbps"], r["pct_copy_bw"], t, r["rel_err_truth"]]
                        for r, t in zip(rs, per_token, strict=True)],
            hovertemplate=(f"{scheme}<br>context %{{x:,}} tokens: %{{y:.1f}} µs<br>"
                           "%{customdata[0]:.0f} GB/s = %{customdata[1]:.1f} % of copy bandwidth<br>"
                           "%{customdata[2]:.0f} B moved per token<br>error vs truth %{customdata[3]:.2e}"
                           "<extra></extra>"), **checked(),
        ))
        if roofline:
            floor = [r["bytes"] / (r["copy_bw_gbps"] * 1e3) for r in rs]  # bytes / (GB/s) → µs
            traces.append(go.Scatter(
                x=[r["context"] for r in rs], y=floor, name=f"{scheme}: bandwidth floor", legendgroup=scheme,
                mode="lines", line=dict(color=color, dash="dash", width=1.5), showlegend=False,
                hovertemplate=(f"{scheme} floor<br>context %{{x:,}}: %{{y:.1f}} µs at copy bandwidth"
                               "<extra></extra>"), **checked(),
            ))
    return figure(traces, title, x_title, y_title, xaxis=_CONTEXT_AXIS,
                  yaxis=dict(type="log"), height=380)


def benchmark_bandwidth_figure(rows: Sequence[dict], *, title: str) -> go.Figure:
    """Achieved bandwidth as a percentage of the device's copy bandwidth vs context, per scheme."""
    x_title, y_title = "context (tokens per sequence, log scale)", "bandwidth (% of copy bandwidth)"
    if not rows:
        return _no_data(title, x_title, y_title, "no benchmark rows for this selection")
    traces = [go.Scatter(
        x=[r["context"] for r in rs], y=[r["pct_copy_bw"] for r in rs], name=scheme, mode="lines+markers",
        line=dict(color=scheme_color(scheme), width=2.5),
        hovertemplate=f"{scheme}<br>context %{{x:,}}: %{{y:.1f}} % of copy bandwidth<extra></extra>",
        **checked(),
    ) for scheme, rs in _by_scheme(rows).items()]
    return figure(traces, title, x_title, y_title, xaxis=_CONTEXT_AXIS,
                  yaxis=dict(range=[0, 105]),
                  shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=100, y1=100,
                               line=dict(color=GREY, dash="dot"))],
                  height=340)
