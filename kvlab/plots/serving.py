"""Figures of the serving what-if dashboard: capacity per KV dtype, queues and blocks over a run."""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

from kvlab.analysis import BlockSeries
from kvlab.plots.palette import GREY_DARK, OKABE_ITO, STATE_COLORS, scheme_color
from kvlab.plots.style import checked, figure
from kvlab.simulator import SimulationResult


def dtype_capacity_figure(
    concurrency: Mapping[str, float | None], errors: Mapping[str, str], *, current: str, title: str
) -> go.Figure:
    """Maximum concurrency of one configuration under each KV-cache dtype (× where vLLM would not start)."""
    names = list(concurrency)
    ok = [n for n in names if concurrency[n] is not None]
    bars = go.Bar(
        x=ok, y=[concurrency[n] for n in ok], name="max concurrency",
        marker=dict(color=[scheme_color(n) for n in ok],
                    line=dict(color=["black" if n == current else "rgba(0,0,0,0)" for n in ok], width=2)),
        hovertemplate="%{x}<br>max concurrency %{y:.2f} requests<extra></extra>", **checked(),
    )
    failed = [n for n in names if concurrency[n] is None]
    marks = go.Scatter(
        x=failed, y=[0] * len(failed), mode="markers", name="would not start",
        marker=dict(symbol="x", size=12, color=GREY_DARK), hovertext=[errors.get(n, "") for n in failed],
        hovertemplate="%{x}: %{hovertext}<extra></extra>", **checked(),
    )
    # two short lines: one long line is clipped by the 200-pixel-high plotting area
    return figure([bars, marks], title, "KV-cache dtype", "max concurrency<br>(requests of max_model_len)",
                  xaxis=dict(type="category", categoryorder="array", categoryarray=names), height=320)


def queues_figure(result: SimulationResult, *, title: str) -> go.Figure:
    """Requests in each step's batch (those still running plus those that finished in the step, as
    ``summary.peak_running`` counts them) and waiting requests, with preemptions marked."""
    steps = [r.step for r in result.timeline]
    traces = [
        go.Scatter(x=steps, y=[r.num_running + len(r.finished) for r in result.timeline], name="running",
                   mode="lines", line=dict(color=STATE_COLORS["decode"], width=2),
                   hovertemplate="step %{x}: %{y} running in the step<extra></extra>", **checked()),
        go.Scatter(x=steps, y=[r.num_waiting for r in result.timeline], name="waiting", mode="lines",
                   line=dict(color=GREY_DARK, width=2, dash="dot"),
                   hovertemplate="step %{x}: %{y} waiting<extra></extra>", **checked()),
    ]
    pre = [(r.step, len(r.preempted)) for r in result.timeline if r.preempted]
    traces.append(go.Scatter(x=[s for s, _ in pre], y=[n for _, n in pre], mode="markers", name="preemptions",
                             marker=dict(color=OKABE_ITO["vermillion"], symbol="triangle-down", size=10),
                             hovertemplate="step %{x}: %{y} preempted<extra></extra>", **checked()))
    return figure(traces, title, "step (scheduler steps)", "requests (count)", height=300)


def pool_usage_figure(series: BlockSeries, *, title: str) -> go.Figure:
    """Blocks in use over all groups after every step, against the pool."""
    total = series.total
    traces = [
        go.Scatter(x=series.steps, y=total, name="blocks in use", mode="lines", fill="tozeroy",
                   line=dict(color=OKABE_ITO["blue"]),
                   hovertemplate="step %{x}: %{y:,} blocks in use<extra></extra>", **checked()),
        go.Scatter(x=[series.steps[0], series.steps[-1]] if series.steps else [], y=[series.pool_size] * 2,
                   name="pool (usable blocks)", mode="lines",
                   line=dict(color=OKABE_ITO["vermillion"], dash="dot"),
                   hovertemplate=f"pool: {series.pool_size:,} usable blocks<extra></extra>", **checked()),
    ]
    return figure(traces, title, "step (scheduler steps)", "blocks (blocks)", height=300,
                  yaxis=dict(rangemode="tozero"))
