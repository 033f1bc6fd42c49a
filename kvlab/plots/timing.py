"""Figures of time: predicted vs measured steps, latency distributions, throughput over time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from kvlab.plots.palette import GREY, scheme_color
from kvlab.plots.style import column, figure

_SYMBOLS = {"decode": "circle", "prefill": "square", "mixed": "diamond"}


def validation_figure(rows: Sequence[Mapping], variant: str = "fitted_gemm") -> go.Figure:
    """Predicted against measured step time (log–log), one point per step, with the ±15 % and ±30 %
    bands; rows as ``benchmarks/timing_validation.py`` writes them."""
    lo = min(min(r["measured_us"], r[f"predicted_us_{variant}"]) for r in rows) * 0.7
    hi = max(max(r["measured_us"], r[f"predicted_us_{variant}"]) for r in rows) * 1.4
    traces = []
    for band, dash in ((0.30, "dot"), (0.15, "dash")):
        for sign in (1, -1):
            f = 1 + sign * band
            traces.append(
                go.Scatter(
                    x=[lo, hi],
                    y=[lo * f, hi * f],
                    mode="lines",
                    showlegend=sign == 1,
                    name=f"±{band:.0%}",
                    line=dict(color=GREY, dash=dash, width=1),
                    hoverinfo="skip",
                )
            )
    traces.append(
        go.Scatter(
            x=[lo, hi],
            y=[lo, hi],
            mode="lines",
            name="prediction = measurement",
            line=dict(color=GREY, width=1),
            hoverinfo="skip",
        )
    )
    for scheme in sorted({r["scheme"] for r in rows}):
        mine = [r for r in rows if r["scheme"] == scheme]
        traces.append(
            go.Scatter(
                x=column([r["measured_us"] for r in mine]),
                y=column([r[f"predicted_us_{variant}"] for r in mine]),
                mode="markers",
                name=scheme,
                marker=dict(
                    color=scheme_color(scheme),
                    size=10,
                    symbol=[_SYMBOLS.get(r["kind"], "circle") for r in mine],
                ),
                text=[
                    f"{r['kind']}: {r['sequences']} seq, context {r['context']:,}, "
                    f"error {r[f'error_{variant}']:+.1%}"
                    for r in mine
                ],
                hovertemplate="%{text}<br>measured %{x:,.0f} us<br>predicted %{y:,.0f} us<extra></extra>",
            )
        )
    axis = dict(type="log")
    return figure(
        traces,
        "Step time: predicted by the roofline vs measured (circles decode, squares prefill, diamonds mixed)",
        "measured step time (µs, log scale)",
        "predicted step time (µs, log scale)",
        xaxis=axis,
        yaxis=axis,
        height=440,
    )


def latency_figure(
    series: Mapping[str, Sequence[float]], *, what: str = "TPOT", colors: Mapping[str, str] | None = None
) -> go.Figure:
    """Box plots of a latency (ms) per configuration, e.g. ``{"bfloat16": tpots_ms, …}``; ``colors``
    overrides a configuration's colour (default: its scheme colour)."""
    traces = [
        go.Box(
            y=column(list(v)),
            name=name,
            boxpoints=False,
            marker=dict(color=(colors or {}).get(name) or scheme_color(name)),
            hovertemplate=f"{name}<br>{what} %{{y:,.2f}} ms<extra></extra>",
        )
        for name, v in series.items()
    ]
    return figure(
        traces,
        f"{what} per configuration",
        "configuration",
        f"{what} (ms)",
        height=360,
        xaxis=dict(type="category"),
    )


def timeline_figure(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]], *, what: str, unit: str
) -> go.Figure:
    """Lines of ``{name: (times_s, values)}``, e.g. running requests or tokens/s against time;
    the y axis reads ``what (unit)``."""
    traces = [
        go.Scatter(
            x=column(list(t)),
            y=column(list(v)),
            mode="lines",
            name=name,
            line=dict(shape="hv"),
            hovertemplate=f"{name}<br>%{{x:.2f}} s: %{{y:,.1f}} {unit}<extra></extra>",
        )
        for name, (t, v) in series.items()
    ]
    return figure(traces, f"{what} over time", "time (s)", f"{what} ({unit})", height=360)
