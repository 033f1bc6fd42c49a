"""Where one request's bytes go, family by family (attention KV, state pages, draft KV)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from kvlab.analysis.family_views import FamilyBytes
from kvlab.plots.palette import OKABE_ITO
from kvlab.plots.style import figure

GIB = 2**30
PART_COLORS = {"attention": OKABE_ITO["blue"], "state": OKABE_ITO["orange"],
               "draft": OKABE_ITO["reddish_purple"]}


def family_bytes_figure(rows: Sequence[FamilyBytes], *, selected: str | None = None, title: str) -> go.Figure:
    """Stacked horizontal bars: GiB one request holds on one GPU, split by what stores them.

    The selected family's label is drawn in bold.
    """
    labels = [f"<b>{r.family}</b>" if r.family == selected else r.family for r in rows]
    traces = [
        go.Bar(
            y=labels, x=[getattr(r, part) / GIB for r in rows], name=name, orientation="h",
            marker=dict(color=PART_COLORS[part]),
            customdata=[[r.preset, r.bytes_per_token] for r in rows],
            hovertemplate=("%{y} (%{customdata[0]})<br>" + name + " %{x:.3f} GiB<br>"
                           "%{customdata[1]:,.0f} B per token in all<extra></extra>"),
        )
        for part, name in (("attention", "attention K/V"), ("state", "state pages"), ("draft", "draft K/V"))
    ]
    return figure(traces, title, "memory one request holds on one GPU (GiB)", "", barmode="stack",
                  yaxis=dict(autorange="reversed"), height=380)
