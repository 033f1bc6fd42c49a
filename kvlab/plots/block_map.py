"""The block pool as a grid: one marker per block id, coloured by owner request, shaped by group.

Free blocks are light grey; free blocks that still carry a prefix-cache hash (evictable, reusable on a
hit) are white with a grey outline; the null block (id 0, the placeholder that sliding-window tables
point to for blocks that left the window) is a black ×; blocks held by several requests through a
prefix hit get a thick black outline.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from kvlab.allocator import BlockState
from kvlab.plots.palette import GREY, GREY_LIGHT, group_symbol, request_color
from kvlab.plots.style import checked, figure

#: Blocks per row of the grid.
COLUMNS = 32


def _kind(group_kinds: Sequence[str], group: int | None) -> str:
    return group_kinds[group].replace("_", " ") if group is not None and group < len(group_kinds) else ""


def _xy(block_ids: Sequence[int], columns: int) -> tuple[list[int], list[int]]:
    return [b % columns for b in block_ids], [b // columns for b in block_ids]


def block_map_figure(
    states: Sequence[BlockState],
    *,
    request_order: Sequence[str],
    group_kinds: Sequence[str],
    title: str,
    columns: int = COLUMNS,
) -> go.Figure:
    """The pool at one moment.

    Args:
        states: every block of the pool (:meth:`kvlab.allocator.KVCacheManager.block_states`).
        request_order: all request ids of the run, so a request keeps its colour from step to step.
        group_kinds: kind of each group (for the legend and hover).
        title: figure title.
        columns: blocks per grid row.
    """
    color_of = {rid: request_color(i) for i, rid in enumerate(request_order)}
    by_owner: dict[str, list[BlockState]] = {}
    free, cached, null = [], [], []
    for b in states:
        if b.is_null:
            null.append(b)
        elif b.owners:
            by_owner.setdefault(b.owners[0], []).append(b)
        elif b.is_cached:
            cached.append(b)
        else:
            free.append(b)
    traces = []

    def cells(blocks, name, **marker):
        x, y = _xy([b.block_id for b in blocks], columns)
        return go.Scatter(x=x, y=y, mode="markers", name=name, marker=dict(size=11, **marker),
                          customdata=[[b.block_id, b.ref_cnt] for b in blocks],
                          hovertemplate=f"block %{{customdata[0]}}: {name}<extra></extra>", **checked())

    traces.append(cells(free, f"free ({len(free)})", color=GREY_LIGHT, symbol="square"))
    traces.append(cells(cached, f"free, prefix cached ({len(cached)})", color="white", symbol="square",
                        line=dict(color=GREY, width=1)))
    for rid in request_order:  # one trace per request, empty while it holds no block: the same
        blocks = by_owner.get(rid, [])  # traces at every step, so a widget restyles them in place
        x, y = _xy([b.block_id for b in blocks], columns)
        traces.append(go.Scatter(
            x=x, y=y, mode="markers", name=f"{rid} ({len(blocks)})", legendgroup=rid, showlegend=bool(blocks),
            marker=dict(size=11, color=color_of[rid], symbol=[group_symbol(b.group or 0) for b in blocks],
                        line=dict(color="black", width=[2.5 if b.is_shared else 0 for b in blocks])),
            customdata=[[b.block_id, b.group, _kind(group_kinds, b.group), b.ref_cnt, ", ".join(b.owners),
                         "yes" if b.is_cached else "no"] for b in blocks],
            hovertemplate=("block %{customdata[0]}<br>group %{customdata[1]} (%{customdata[2]})"
                           "<br>held by %{customdata[4]} (ref count %{customdata[3]})"
                           "<br>prefix-cached: %{customdata[5]}<extra></extra>"), **checked(),
        ))
    traces.append(cells(null, "null block", color="black", symbol="x"))
    shared = [b for b in states if b.is_shared]
    x, y = _xy([b.block_id for b in shared], columns)
    traces.append(go.Scatter(
        x=x, y=y, mode="markers", name=f"shared by 2+ requests ({len(shared)})",
        marker=dict(size=15, color="black", symbol="square-open", line=dict(width=2)),
        customdata=[[b.block_id, ", ".join(b.owners)] for b in shared],
        hovertemplate="block %{customdata[0]} shared by %{customdata[1]}<extra></extra>", **checked(),
    ))
    for g in range(len(group_kinds)):
        traces.append(go.Scatter(
            x=[None], y=[None], mode="markers", name=f"group {g}: {_kind(group_kinds, g)}",
            marker=dict(size=11, color=GREY, symbol=group_symbol(g)),
            hovertemplate="group legend<extra></extra>", **checked(),
        ))
    rows = (max((b.block_id for b in states), default=0) // columns) + 1
    return figure(
        traces, title, f"block id mod {columns} (column)", f"block id ÷ {columns} (row)",
        xaxis=dict(range=[-0.7, columns - 0.3], dtick=4, showgrid=False),
        yaxis=dict(range=[rows - 0.3, -0.7], dtick=2, showgrid=False),
        height=190 + 19 * rows,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0.0),
        margin=dict(l=70, r=20, t=130, b=55),
    )
