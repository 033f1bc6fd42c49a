"""Figures of KV-cache memory and capacity: pure functions of numbers from :mod:`kvlab.analysis`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from kvlab.analysis import ConcurrencyPoint, GroupBlocks, LayerTypeBytes
from kvlab.plots.palette import GREY, GREY_DARK, KIND_COLORS, OKABE_ITO, categorical
from kvlab.plots.style import checked, figure, log_axis_ticks

GIB = 2**30


def bytes_per_token_figure(rows: Sequence[LayerTypeBytes], *, title: str) -> go.Figure:
    """Bytes one token costs in one layer of each type (data and scales stacked), on one GPU."""
    labels = [r.label for r in rows]
    data = go.Bar(
        x=labels, y=[r.data_bytes for r in rows], name="K and V data",
        marker=dict(color=[KIND_COLORS.get(r.kind, GREY) for r in rows]),
        customdata=[[r.num_layers, r.page_bytes, r.total_bytes * r.num_layers] for r in rows],
        hovertemplate=("%{x}<br>data %{y:,} B per token per layer<br>%{customdata[0]} such layers → "
                       "%{customdata[2]:,} B per token<br>page (one block of one layer) %{customdata[1]:,} B"
                       "<extra></extra>"), **checked(),
    )
    scales = go.Bar(
        x=labels, y=[r.scale_bytes for r in rows], name="fp32 scales", marker=dict(color=GREY),
        hovertemplate="%{x}<br>scales %{y:,} B per token per layer<extra></extra>", **checked(),
    )
    notes = [dict(x=r.label, y=r.total_bytes, text=f"× {r.num_layers} layers", showarrow=False, yshift=10)
             for r in rows]
    return figure([data, scales], title, "layer type (on one GPU)", "bytes per token per layer (bytes)",
                  barmode="stack", annotations=notes, height=340)


def request_memory_figure(
    configs: Mapping[str, Sequence[GroupBlocks]], pool_bytes: Mapping[str, int], *, title: str
) -> go.Figure:
    """Pool memory one ``max_model_len`` request occupies at its peak, group by group, per configuration.

    Args:
        configs: ``{configuration label: its groups' blocks}`` (one horizontal bar each).
        pool_bytes: ``{configuration label: usable pool bytes}`` drawn as a tick on each bar.
        title: figure title.
    """
    labels = list(configs)
    traces = []
    kinds_seen: set[str] = set()
    for kind in ("sliding_window", "chunked_local", "full"):
        for label in labels:
            groups = [g for g in configs[label] if g.kind == kind]
            if not groups:
                continue
            total = sum(g.bytes for g in groups)
            blocks = sum(g.blocks for g in groups)
            traces.append(go.Bar(
                y=[label], x=[total / GIB], orientation="h", name=kind.replace("_", " ") + " groups",
                legendgroup=kind, showlegend=kind not in kinds_seen, marker=dict(color=KIND_COLORS[kind]),
                customdata=[[len(groups), blocks, sum(g.num_layers for g in groups)]],
                hovertemplate=(f"{label}<br>{kind.replace('_', ' ')}: %{{customdata[0]}} group(s), "
                               "%{customdata[2]} layers<br>%{customdata[1]:,} blocks = %{x:.2f} GiB"
                               "<extra></extra>"), **checked(),
            ))
            kinds_seen.add(kind)
    pool = go.Scatter(
        y=labels, x=[pool_bytes[label] / GIB for label in labels], mode="markers", name="pool (usable)",
        marker=dict(symbol="line-ns", size=30, line=dict(width=3, color=OKABE_ITO["vermillion"])),
        hovertemplate="%{y}<br>pool %{x:.2f} GiB<extra></extra>", **checked(),
    )
    return figure([*traces, pool], title, "pool memory held by one max_model_len request (GiB)",
                  "configuration", barmode="stack", height=260)


def concurrency_figure(
    curves: Mapping[str, Sequence[ConcurrencyPoint]], *, current_len: int | None = None, title: str
) -> go.Figure:
    """Maximum concurrency (requests of ``max_model_len`` held at once) vs ``max_model_len``."""
    traces = []
    for i, (label, points) in enumerate(curves.items()):
        ok = [p for p in points if p.max_concurrency is not None]
        traces.append(go.Scatter(
            x=[p.max_model_len for p in ok], y=[p.max_concurrency for p in ok], name=label,
            mode="lines+markers", line=dict(color=[OKABE_ITO["blue"], OKABE_ITO["orange"]][i % 2]
                                            if i < 2 else categorical(i), width=2.5),
            customdata=[p.kv_cache_tokens for p in ok],
            hovertemplate=(f"{label}<br>max_model_len %{{x:,}} tokens<br>max concurrency %{{y:.2f}}"
                           "<br>GPU KV cache size (log) %{customdata:,} tokens<extra></extra>"), **checked(),
        ))
        failed = [p for p in points if p.max_concurrency is None]
        if failed:
            traces.append(go.Scatter(
                x=[p.max_model_len for p in failed], y=[1.0] * len(failed), mode="markers",
                name=f"{label}: does not start", marker=dict(symbol="x", size=10, color=GREY_DARK),
                hovertext=[p.error for p in failed], hovertemplate="%{hovertext}<extra></extra>", **checked(),
            ))
    shapes = [dict(type="line", xref="paper", x0=0, x1=1, y0=1, y1=1, line=dict(color=GREY, dash="dot"))]
    if current_len is not None:
        shapes.append(dict(type="line", yref="paper", y0=0, y1=1, x0=current_len, x1=current_len,
                           line=dict(color=OKABE_ITO["vermillion"], dash="dash")))
    lengths = [p.max_model_len for pts in curves.values() for p in pts]
    values = [p.max_concurrency for pts in curves.values() for p in pts if p.max_concurrency] + [1.0]
    x_ticks = log_axis_ticks(min(lengths), max(lengths), base2=True) if lengths else {}
    y_ticks = log_axis_ticks(min(values), max(values))
    return figure(traces, title, "max_model_len (tokens, log scale)", "max concurrency (requests, log scale)",
                  xaxis=dict(type="log", **x_ticks), yaxis=dict(type="log", **y_ticks), shapes=shapes,
                  height=340)
