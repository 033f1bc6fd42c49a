"""Figures of admission runs: request timelines, blocks in use per group, gate need vs free blocks.

Each figure stacks one panel per configuration (e.g. two admission policies) on a shared step axis,
so the same moment can be compared across them. Traces are plain dicts with NumPy data, validated
once by ``go.Figure``; inside :func:`kvlab.plots.plain.plain_figures` the builders return those dicts
as they are (the admission explorer redraws all three figures on every change).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from kvlab.analysis import REQUEST_STATES, BlockSeries, GatePoint, StateSpan
from kvlab.plots.palette import GREY_DARK, KIND_COLORS, OKABE_ITO, STATE_COLORS
from kvlab.plots.plain import PlainFigure, built_figure
from kvlab.plots.style import axis, base_layout, column

STEP_AXIS = "step (scheduler steps)"


def _panels_layout(labels: Sequence[str], title: str, y_title: str, height_per_panel: int, **y_extra) -> dict:
    n = max(1, len(labels))
    gap = 0.2 if n > 1 else 0.0
    h = (1.0 - gap * (n - 1)) / n
    lay = base_layout(title, height=90 + height_per_panel * n)
    annotations = []
    for i, label in enumerate(labels):
        top = round(1.0 - i * (h + gap), 6)
        suffix = "" if i == 0 else str(i + 1)
        domain = [max(0.0, round(top - h, 6)), top]
        lay[f"yaxis{suffix}"] = axis(y_title, domain=domain, anchor=f"x{suffix}", **y_extra)
        lay[f"xaxis{suffix}"] = axis(STEP_AXIS, anchor=f"y{suffix}", **({} if i == 0 else {"matches": "x"}))
        annotations.append(dict(text=f"<b>{label}</b>", x=0.0, y=top, xref="paper", yref="paper",
                                xanchor="left", yanchor="bottom", showarrow=False))
    lay["annotations"] = annotations
    return lay


def _refs(i: int) -> dict:
    suffix = "" if i == 0 else str(i + 1)
    return dict(xaxis=f"x{suffix}", yaxis=f"y{suffix}")


def timeline_figure(
    panels: Mapping[str, Sequence[StateSpan]], *, stalls: Mapping[str, int | None] | None = None, title: str
) -> go.Figure | PlainFigure:
    """Gantt chart: one row per request, coloured by state (waiting, prefill, decode, preempted)."""
    traces = []
    shapes = []
    stall_notes = []
    stalls = stalls or {}
    order_of: dict[str, list[str]] = {}
    for i, (label, spans) in enumerate(panels.items()):
        first = {}
        for sp in spans:
            first[sp.request_id] = min(first.get(sp.request_id, sp.start), sp.start)
        order_of[label] = sorted(first, key=lambda rid: (first[rid], len(rid), rid))
        for state in REQUEST_STATES:
            mine = [s for s in spans if s.state == state]
            traces.append(dict(type="bar",
                y=column([s.request_id for s in mine]), x=column([s.steps for s in mine]),
                base=column([s.start for s in mine]),
                orientation="h", name=state, legendgroup=state, showlegend=i == 0,
                marker=dict(color=STATE_COLORS[state], line=dict(width=0.5, color="white")),
                customdata=column([[s.start, s.end - 1] for s in mine]),
                hovertemplate=(f"%{{y}}: {state}<br>steps %{{customdata[0]}}–%{{customdata[1]}} "
                               "(%{x} steps)<extra>" + label + "</extra>"),
                **_refs(i),
            ))
        step = stalls.get(label)
        if step is not None:
            ref = _refs(i)
            shapes.append(dict(type="line", xref=ref["xaxis"], yref=f"{ref['yaxis']} domain", x0=step,
                               x1=step, y0=0, y1=1,
                               line=dict(color=OKABE_ITO["vermillion"], width=2, dash="dash")))
            stall_notes.append(dict(text="stalled", x=step, y=1.0, xref=ref["xaxis"],
                                    yref=f"{ref['yaxis']} domain", xanchor="left", yanchor="top",
                                    showarrow=False, font=dict(color=OKABE_ITO["vermillion"])))
    lay = _panels_layout(list(panels), title, "request", 190, type="category", autorange="reversed")
    for i, label in enumerate(panels):
        suffix = "" if i == 0 else str(i + 1)
        lay[f"yaxis{suffix}"].update(categoryorder="array", categoryarray=order_of[label])
    lay["annotations"] = [*lay["annotations"], *stall_notes]
    lay.update(barmode="overlay", shapes=shapes, bargap=0.25)
    return built_figure(traces, lay)


def blocks_figure(panels: Mapping[str, BlockSeries], *, title: str) -> go.Figure | PlainFigure:
    """Blocks in use per group (stacked) after every step, with the pool size as a dotted line."""
    traces = []
    for i, (label, series) in enumerate(panels.items()):
        seen = set()
        for g, values in enumerate(series.per_group):
            kind = series.group_kinds[g]
            traces.append(dict(type="scatter",
                x=column(series.steps), y=column(values), mode="lines", stackgroup=f"p{i}",
                name=f"{kind.replace('_', ' ')} groups",
                legendgroup=kind, showlegend=(i == 0 and kind not in seen),
                line=dict(width=0.6, color="white"), fillcolor=KIND_COLORS.get(kind, GREY_DARK),
                hovertemplate=f"group {g} ({kind.replace('_', ' ')})<br>step %{{x}}: %{{y:,}} blocks"
                              f"<extra>{label}</extra>",
                **_refs(i),
            ))
            seen.add(kind)
        traces.append(dict(type="scatter",
            x=[series.steps[0], series.steps[-1]] if series.steps else [], y=[series.pool_size] * 2,
            mode="lines", name="pool (usable blocks)", legendgroup="pool", showlegend=i == 0,
            line=dict(color=OKABE_ITO["vermillion"], dash="dot", width=2),
            hovertemplate=f"pool: {series.pool_size:,} usable blocks<extra>{label}</extra>", **_refs(i),
        ))
    lay = _panels_layout(list(panels), title, "blocks in use (blocks)", 170, rangemode="tozero")
    return built_figure(traces, lay)


def gate_figure(panels: Mapping[str, Sequence[GatePoint]], pool_sizes: Mapping[str, int], *,
                title: str) -> go.Figure | PlainFigure:
    """At each admission attempt: blocks the gate asked for (admitted or refused) and blocks free."""
    traces = []
    for i, (label, points) in enumerate(panels.items()):
        for admitted, name, color, symbol in ((True, "need (admitted)", OKABE_ITO["bluish_green"], "circle"),
                                              (False, "need (refused)", OKABE_ITO["vermillion"], "x")):
            mine = [p for p in points if p.admitted == admitted]
            traces.append(dict(type="scatter",
                x=column([p.step for p in mine]), y=column([p.need for p in mine]), mode="markers", name=name,
                legendgroup=name, showlegend=i == 0, marker=dict(color=color, symbol=symbol, size=9),
                customdata=column([[p.request_id, p.free] for p in mine], mixed=True),
                hovertemplate=("step %{x}: %{customdata[0]} asks %{y:,} blocks, %{customdata[1]:,} free"
                               f"<extra>{label}</extra>"),
                **_refs(i),
            ))
        traces.append(dict(type="scatter",
            x=column([p.step for p in points]), y=column([p.free for p in points]), mode="markers",
            name="free blocks",
            legendgroup="free", showlegend=i == 0,
            marker=dict(color=GREY_DARK, symbol="line-ew", size=14, line=dict(width=2, color=GREY_DARK)),
            hovertemplate=f"step %{{x}}: %{{y:,}} blocks free<extra>{label}</extra>", **_refs(i),
        ))
        pool = pool_sizes.get(label, 0)
        steps = [p.step for p in points] or [0]
        traces.append(dict(type="scatter",
            x=[min(steps), max(steps)], y=[pool, pool], mode="lines", name="pool (usable blocks)",
            legendgroup="pool", showlegend=i == 0, line=dict(color=OKABE_ITO["vermillion"], dash="dot"),
            hovertemplate=f"pool: {pool:,} usable blocks<extra>{label}</extra>", **_refs(i),
        ))
    lay = _panels_layout(list(panels), title, "blocks (blocks)", 170, rangemode="tozero")
    return built_figure(traces, lay)
