"""Figures of quantization error: pure functions from measured numbers to plotly figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import plotly.graph_objects as go

from kvlab.analysis import ContextError, LogHistogram, SchemeBytes
from kvlab.plots.palette import GREY, KV_COLORS, OKABE_ITO, SEQUENTIAL, scheme_color
from kvlab.plots.style import COLORBAR_STYLE, axis, base_layout, checked, figure

#: Significant digits of the error in the heatmaps' hover.
HOVER_DIGITS = 3
#: Marker size of every line of :func:`attention_error_figure` (pixels).
ATTENTION_MARKER_PX = 7
#: Gap between the bars of :func:`scale_bytes_figure` (fraction of a category; plotly's default).
BAR_GAP = 0.2


def log_color_ticks(low_exp: int, high_exp: int) -> dict:
    """Colour-bar ticks for ``log10`` data labelled as powers of ten (``1e-3`` …)."""
    exps = list(range(low_exp, high_exp + 1))
    return dict(tickvals=exps, ticktext=[f"1e{e}" for e in exps])


def grid_columns(values: np.ndarray, first_row: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[rows, cols]`` values as three flat columns ``(x = col, y = first_row + row, value)``.

    A heatmap given flat x/y/z columns draws the same picture as one given a 2-D ``z``, but the flat
    numeric arrays travel to the browser as binary buffers instead of nested lists (about ten times
    faster for a 256 × 128 grid).
    """
    rows, cols = values.shape
    index = np.min_scalar_type(max(cols - 1, first_row + rows - 1, 0))  # uint8 for a 256 × 128 grid
    x = np.tile(np.arange(cols, dtype=index), rows)
    y = np.repeat(np.arange(first_row, first_row + rows, dtype=index), cols)
    return x, y, np.ascontiguousarray(values, dtype=np.float64).ravel()


def compact_floats(values: np.ndarray) -> np.ndarray:
    """``values`` (same shape) as float32 when that holds every one of them exactly, else as float64.

    A figure's arrays travel to the browser in their own dtype: values that came from a float32
    tensor show the same digits at half the bytes.
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    single = values.astype(np.float32)
    return single if np.array_equal(single, values, equal_nan=True) else values


def _shown(value: float, digits: int) -> tuple[int, int]:
    """What the browser shows of ``value`` at ``digits`` significant digits (JavaScript's
    ``toPrecision``, d3's ``g``: the exact binary value rounded, ties away from zero), as
    (signed significand, exponent)."""
    exact = Decimal(value)
    if exact == 0:
        return 0, 0
    exponent = exact.adjusted()
    significand = int(abs(exact).scaleb(digits - 1 - exponent).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    if significand == 10**digits:
        significand, exponent = 10 ** (digits - 1), exponent + 1
    return (-significand if exact < 0 else significand), exponent


def float32_reading_as(values: np.ndarray, digits: int) -> np.ndarray:
    """``values`` (same shape) as float32 values that the browser shows with the same ``digits``
    significant digits as the float64 ones (a hover's ``.3g``): half the bytes on the wire.

    Rounding to float32 moves a value by at most 2^-24 of itself (0.00006 units of the last digit
    shown, at 3 digits), so only a value that close to a rounding boundary of its reading (``n + 0.5``
    units of the last digit) can read otherwise. The values within 0.001 units of one (about 2 in
    1,000) are checked one by one, and where the float32 reads otherwise, the neighbouring float32 on
    the value's side of the boundary (the next one towards the value) is used instead.
    """
    exact = np.ascontiguousarray(values, dtype=np.float64)
    single = exact.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        magnitude = np.abs(exact)
        scaled = magnitude / 10.0 ** (np.floor(np.log10(magnitude)) - (digits - 1))
        near = np.isfinite(scaled) & (np.abs(scaled - np.floor(scaled) - 0.5) < 1e-3)
    for index in zip(*np.nonzero(near), strict=True):
        value = float(exact[index])
        if _shown(float(single[index]), digits) != _shown(value, digits):
            towards = np.float32(np.inf if value > float(single[index]) else -np.inf)
            single[index] = np.nextafter(single[index], towards, dtype=np.float32)
    return single


def error_log_range(*errors: np.ndarray) -> tuple[float, float]:
    """``(bottom, top)`` of a log10 colour scale covering these absolute errors: the largest error at
    the top, the 1st percentile of the non-zero ones (at most 4 decades lower) at the bottom.

    Pass one range to several :func:`error_heatmaps_figure` calls so that their colours compare.
    """
    nonzero = np.concatenate([np.asarray(e, dtype=np.float64)[np.asarray(e) > 0] for e in errors])
    if not nonzero.size:
        return -1.0, 0.0
    top = float(np.log10(nonzero.max()))
    return max(float(np.log10(np.percentile(nonzero, 1))), top - 4.0), top


def error_heatmaps_figure(
    k_error: np.ndarray,
    v_error: np.ndarray,
    k_value: np.ndarray,
    v_value: np.ndarray,
    *,
    title: str,
    first_token: int = 0,
    log_range: tuple[float, float] | None = None,
) -> go.Figure:
    """Side-by-side heatmaps of ``|restored − original|`` for K and V of one head, on a log colour scale.

    Colour is ``log10 |error|`` (exact zeros drawn at the bottom of the scale) so that both an
    integer grid's uniform error and a floating-point format's magnitude-proportional error are
    visible. Each trace holds ``[tokens, channels]`` grids (row ``i`` is token ``first_token + i``,
    column ``j`` channel ``j``): ``z`` = log10 of the error (float32: it only picks the colour),
    ``customdata`` = the error (float32 that reads the same at the hover's digits:
    :func:`float32_reading_as`), ``text`` = the original value (float32 when that is exact). A live
    figure sends each grid to the browser as one binary buffer (:mod:`kvlab.widgets.grid_transport`).

    Args:
        k_error, v_error: ``[tokens, channels]`` absolute errors (value units).
        k_value, v_value: ``[tokens, channels]`` original values.
        title: figure title (scheme, head, data source).
        first_token: position of row 0 (tokens), for the axis.
        log_range: ``(bottom, top)`` of the colour scale (log10 of the error), shared with other
            figures (:func:`error_log_range`; the colour bar then says so); default: these errors'.
    """
    shared = log_range is not None
    bottom, top = log_range if shared else error_log_range(k_error, v_error)
    floor = 10.0**bottom
    traces = []
    for i, (err, val, name) in enumerate(((k_error, k_value, "K"), (v_error, v_value, "V"))):
        e = np.ascontiguousarray(err, dtype=np.float64)
        traces.append(go.Heatmap(
            z=np.log10(np.maximum(e, floor)).astype(np.float32), y0=first_token,
            customdata=float32_reading_as(e, HOVER_DIGITS),
            text=compact_floats(val), name=name, coloraxis="coloraxis",
            xaxis="x" if i == 0 else "x2", yaxis="y" if i == 0 else "y2",
            hovertemplate=(f"{name}<br>token %{{y}}<br>channel %{{x}}<br>"
                           f"|error| %{{customdata:.{HOVER_DIGITS}g}}<br>value %{{text:.4g}}<extra></extra>"),
            **checked(),
        ))
    layout = base_layout(title, height=420)
    channel, token = "channel (index within the head)", "token (position)"
    layout.update(
        xaxis=axis(channel, domain=[0.0, 0.44]),
        xaxis2=axis(channel, domain=[0.54, 0.98], anchor="y2"),
        yaxis=axis(token, autorange="reversed"),
        yaxis2=axis(token, autorange="reversed", anchor="x2"),
        coloraxis=dict(colorscale=SEQUENTIAL, cmin=bottom, cmax=top,
                       colorbar=dict(title=dict(text="|error|<br>(value units,<br>log scale"
                                                     + (",<br>shared scale)" if shared else ")")),
                                     **COLORBAR_STYLE,
                                     **log_color_ticks(int(np.ceil(bottom)), int(np.floor(top))))),
        annotations=[
            dict(text=f"<b>{t}</b>: |error|", x=x, y=1.0, xref="paper", yref="paper", xanchor="center",
                 yanchor="bottom", showarrow=False)
            for t, x in (("K", 0.22), ("V", 0.76))
        ],
    )
    return go.Figure(data=traces, layout=layout, **checked())


def _step_trace(hist: LogHistogram, name: str, color: str) -> go.Scatter:
    label = f"{name} ({hist.num_exact:,} of {hist.total:,} exact)"
    return go.Scatter(
        x=hist.centers, y=hist.counts, mode="lines", line=dict(color=color, shape="hvh", width=2),
        name=label,
        customdata=np.stack([hist.edges[:-1], hist.edges[1:]], axis=-1) if hist.counts else None,
        hovertemplate=(f"{name}<br>|error| %{{customdata[0]:.2g}} – %{{customdata[1]:.2g}}"
                       "<br>%{y:,} elements<extra></extra>"), **checked(),
    )


def error_histogram_figure(k_hist: LogHistogram, v_hist: LogHistogram, *, title: str) -> go.Figure:
    """Distribution of non-zero ``|error|`` of K and V on a log axis (exact zeros counted in the legend)."""
    traces = [_step_trace(k_hist, "K", KV_COLORS["k"]), _step_trace(v_hist, "V", KV_COLORS["v"])]
    return figure(traces, title, "|error| (value units, log scale)", "elements (count)",
                  xaxis=dict(type="log", exponentformat="power"))


def attention_error_figure(
    series: Mapping[str, Sequence[ContextError]], *, highlight: str | None = None, title: str
) -> go.Figure:
    """Relative error of the attention output vs context length, one line per scheme.

    ``highlight`` is drawn opaque and thicker. Only the lines' opacity and width mark it (every marker
    is :data:`ATTENTION_MARKER_PX`): both are style, so a live figure redraws a new highlight without
    recalculating the figure (a marker size is not).
    """
    traces = []
    for scheme, points in series.items():
        strong = highlight is None or scheme == highlight
        traces.append(go.Scatter(
            x=[p.context for p in points], y=[p.rel_error for p in points], name=scheme,
            mode="lines+markers", opacity=1.0 if strong else 0.45,
            line=dict(color=scheme_color(scheme), width=3 if strong else 1.5),
            marker=dict(size=ATTENTION_MARKER_PX),
            hovertemplate=f"{scheme}<br>context %{{x}} tokens<br>relative error %{{y:.3g}}<extra></extra>",
            **checked(),
        ))
    return figure(traces, title, "context (tokens, log scale)", "relative error of the output (log scale)",
                  xaxis=dict(type="log", dtick=float(np.log10(2)), tickformat="d"),
                  yaxis=dict(type="log", exponentformat="power"))


def scale_bytes_figure(rows: Sequence[SchemeBytes], *, highlight: str | None = None, title: str) -> go.Figure:
    """Bytes per token per layer of each scheme, data and scales stacked, with the scale share on hover.

    ``highlight``'s data bar is outlined in black: a rectangle of the layout (a shape) around the bar,
    so that a live figure moves the outline without recalculating its traces (an outline in the bars'
    own colours would be a new array of them). The bars are 0.8 of a category wide (``bargap`` 0.2).
    """
    names = [r.scheme for r in rows]
    data = go.Bar(
        x=names, y=[r.data_bytes for r in rows], name="K and V data (colour: dtype)",
        marker=dict(color=[scheme_color(n) for n in names]),
        customdata=[r.total_bytes for r in rows],
        hovertemplate="%{x}<br>data %{y:,} B of %{customdata:,} B per token<extra></extra>", **checked(),
    )
    scales = go.Bar(
        x=names, y=[r.scale_bytes for r in rows], name="fp32 scales", marker=dict(color=GREY),
        customdata=[[100 * r.scale_fraction, 100 * r.scale_overhead] for r in rows],
        hovertemplate=("%{x}<br>scales %{y:,} B: %{customdata[0]:.1f} % of the token, "
                       "+%{customdata[1]:.1f} % on the data<extra></extra>"), **checked(),
    )
    # "+x %" reads as "x % more than the data": the scales over the data, as the lesson's text says it
    notes = [dict(x=r.scheme, y=r.total_bytes, text=f"+{100 * r.scale_overhead:.1f} %",
                  showarrow=False, yshift=10) for r in rows if r.scale_bytes]
    outline = [dict(type="rect", xref="x", yref="y", x0=i - (1 - BAR_GAP) / 2, x1=i + (1 - BAR_GAP) / 2,
                    y0=0, y1=r.data_bytes, line=dict(color=OKABE_ITO["black"], width=2), layer="above")
               for i, r in enumerate(rows) if r.scheme == highlight]
    return figure([data, scales], title, "KV-cache dtype", "bytes per token per layer (bytes)",
                  barmode="stack", bargap=BAR_GAP, annotations=notes, shapes=outline)
