"""Figures of a real model's quality under each KV cache: bars per scheme, error against position,
and two generations side by side. Pure functions from measured numbers to figures / HTML."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kvlab.plots.palette import GREY, OKABE_ITO, scheme_color
from kvlab.plots.style import axis, base_layout, column

#: The three teacher-forced metrics: (key, axis title, log axis).
QUALITY_METRICS: tuple[tuple[str, str, bool], ...] = (
    ("perplexity", "perplexity (choices per token)", False),
    ("top1_agreement", "top-1 agreement with fp32 cache (fraction)", False),
    ("mean_kl", "mean KL from fp32 cache (nats)", True),
)


def _label(row) -> str:
    return f"{row.kv_cache_dtype} ({row.rounding})" if row.rounding else row.kv_cache_dtype


def quality_bars_figure(rows: Sequence, *, highlight: str | None = None, title: str = "") -> go.Figure:
    """Perplexity, top-1 agreement and mean KL of every scheme (``QualityRow`` objects), side by side.

    ``highlight`` (a row label such as ``"int8_per_token_head (truncate)"``) is drawn opaque, the
    others faded. The KL axis is logarithmic; the unquantized baseline (KL 0) has no KL bar.
    """
    labels = [_label(r) for r in rows]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.09,
                        subplot_titles=[t for _, t, _ in QUALITY_METRICS])
    opacity = [1.0 if highlight is None or lab == highlight else 0.45 for lab in labels]
    colors = [scheme_color(r.kv_cache_dtype) for r in rows]
    for col, (key, name, log) in enumerate(QUALITY_METRICS, start=1):
        vals = [getattr(r, key) for r in rows]
        if log:
            vals = [v if v > 0 else None for v in vals]
        fig.add_trace(go.Bar(x=column(vals), y=labels, orientation="h", name=name, showlegend=False,
                             marker=dict(color=colors, opacity=opacity),
                             hovertemplate="%{y}: %{x:.4g}<extra>" + name + "</extra>"), row=1, col=col)
        fig.update_xaxes(**axis(name, type="log" if log else "linear"), row=1, col=col)
        fig.update_yaxes(autorange="reversed", showticklabels=col == 1, type="category",
                         title=dict(text="KV cache" if col == 1 else " "), row=1, col=col)
    fig.update_layout(**base_layout(title, height=max(300, 24 * len(rows) + 120)))
    return fig


def error_by_position_figure(series: Mapping[str, Sequence[Mapping[str, float]]], metric: str = "mean_kl",
                             *, highlight: str | None = None, title: str = "") -> go.Figure:
    """One line per scheme: ``metric`` in bins of positions (``error_by_position`` output)."""
    names = {k: t for k, t, _ in QUALITY_METRICS}
    if metric not in names:
        raise ValueError(f"metric must be one of {', '.join(names)}; got {metric!r}")
    log = dict((k, lg) for k, _, lg in QUALITY_METRICS)[metric]
    traces = []
    for label, bins in series.items():
        x = [(b["start"] + b["end"]) / 2 for b in bins]
        y = [b[metric] if (b[metric] > 0 or not log) else None for b in bins]
        strong = highlight is None or label == highlight
        traces.append(go.Scatter(x=column(x), y=column(y), name=label, mode="lines+markers",
                                 line=dict(color=scheme_color(label.split(" ")[0]),
                                           width=3 if strong else 1.5),
                                 opacity=1.0 if strong else 0.5,
                                 hovertemplate="position %{x:.0f}: %{y:.4g}<extra>" + label + "</extra>"))
    lay = base_layout(title, height=380)
    lay["xaxis"] = axis("position in the text (tokens, bin centre)")
    lay["yaxis"] = axis(names[metric], type="log" if log else "linear")
    return go.Figure(data=traces, layout=lay)


def token_diff_html(baseline: Sequence[str], other: Sequence[str], *, prompt: str,
                    names: tuple[str, str]) -> str:
    """Two generations as HTML, token by token; tokens from the first divergence on are highlighted.

    Args:
        baseline, other: the generated tokens' texts.
        prompt: the prompt both continue.
        names: labels of the two rows.
    """
    first = next((i for i, (a, b) in enumerate(zip(baseline, other, strict=False)) if a != b), None)
    if first is None and len(baseline) != len(other):
        first = min(len(baseline), len(other))

    def row(tokens: Sequence[str], name: str, colour: str) -> str:
        cells = []
        for i, t in enumerate(tokens):
            text = html.escape(t).replace("\n", "↵")
            style = f"background:{colour};" if first is not None and i >= first else ""
            cells.append(f'<span title="token {i}" style="{style}border-right:1px dotted {GREY};'
                         f'padding:0 1px">{text}</span>')
        return (f'<div style="margin:4px 0"><b style="display:inline-block;width:16em">{html.escape(name)}'
                f'</b><span style="font-family:monospace">{"".join(cells)}</span></div>')

    where = "identical" if first is None else f"first divergence at generated token {first}"
    return (f'<div><div style="color:{GREY}">prompt: <i>{html.escape(prompt)}</i> — {where}</div>'
            + row(baseline, names[0], "#eeeeee") + row(other, names[1], OKABE_ITO["yellow"]) + "</div>")
