"""Layout shared by kvlab's figures: fonts, margins, axis titles with units, hover mode."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import plotly.graph_objects as go

from kvlab.plots.palette import CATEGORICAL, GREY_DARK, GREY_LIGHT

FONT_FAMILY = "Inter, Helvetica, Arial, sans-serif"

#: ``ticklabeloverflow="allow"``: plotly's default ("hide past div") measures every tick label on the page
#: after each draw, to hide one that would cross the figure's edge. The margins grow to fit the labels
#: (``automargin``), so none does (checked in ``tests/browser/test_tick_labels_inside.py``), and the
#: measuring was 20 % of lesson 05's redraw in Chromium (``benchmarks/widgets_notes.md``).
_AXIS_STYLE = dict(gridcolor=GREY_LIGHT, linecolor=GREY_DARK, showline=True, ticks="outside",
                   zeroline=False, automargin=True, ticklabeloverflow="allow")
#: Colour bars measure their tick labels the same way (:data:`_AXIS_STYLE`).
COLORBAR_STYLE = dict(ticklabeloverflow="allow")

#: A small template (white background, light grid, the palette's colour order). plotly's built-in
#: templates describe every trace type and cost ~15 ms to validate on each update; this one is tiny.
TEMPLATE: dict = dict(layout=dict(
    paper_bgcolor="white", plot_bgcolor="white", colorway=list(CATEGORICAL),
    xaxis=_AXIS_STYLE, yaxis=_AXIS_STYLE,
))


#: Whether the figure builders validate every property (plotly's default, and what tests and static
#: lessons get). An explorer's redraw turns it off (:func:`unvalidated_figures`): the same builders,
#: with the same inputs' types, are validated in the tests, and validation was about half of a redraw.
_VALIDATE: ContextVar[bool] = ContextVar("kvlab_validate_figures", default=True)


@contextmanager
def unvalidated_figures() -> Iterator[None]:
    """Within the body (this thread only), kvlab's figure builders skip plotly's property validation.

    Measured with ``benchmarks/widgets_bench.py``: a block-map step 74 → 31 ms of CPU.
    """
    token = _VALIDATE.set(False)
    try:
        yield
    finally:
        _VALIDATE.reset(token)


def checked() -> dict:
    """Keyword arguments for a plotly constructor: ``_validate`` as :func:`unvalidated_figures` set it."""
    return {"_validate": _VALIDATE.get()}


def validating() -> bool:
    """True unless inside :func:`unvalidated_figures`."""
    return _VALIDATE.get()


def column(values: Sequence, *, mixed: bool = False) -> np.ndarray:
    """Trace data as a NumPy array: plotly copies arrays wholesale but validates Python lists element
    by element (32 traces of 130 points: 61 ms from lists, 21 ms from arrays). ``mixed=True`` keeps
    rows of mixed types (``customdata`` of ids and numbers) as objects, so numbers stay numbers."""
    return np.array(values, dtype=object) if mixed else np.asarray(values)


def base_layout(title: str = "", *, height: int = 360, width: int | None = None, **extra) -> dict:
    """Layout keywords every figure starts from (white template, legend on top, unified hover off)."""
    layout = dict(
        title=dict(text=title, x=0.01, xanchor="left", font=dict(size=15)),
        template=TEMPLATE,
        font=dict(family=FONT_FAMILY, size=12),
        height=height,
        margin=dict(l=70, r=20, t=60, b=55),
        legend=dict(orientation="v", yanchor="top", y=1.0, xanchor="left", x=1.02),
        hoverlabel=dict(font=dict(family=FONT_FAMILY)),
        uirevision="kvlab",  # keep the user's zoom when a widget redraws the figure
    )
    if width is not None:
        layout["width"] = width
    layout.update(extra)
    return layout


def axis(title: str, **extra) -> dict:
    """An axis with a title (include the unit in ``title``, e.g. ``"context (tokens)"``)."""
    return dict(title=dict(text=title), **{**_AXIS_STYLE, **extra})


def figure(traces: list, title: str, x_title: str, y_title: str, *, xaxis: dict | None = None,
           yaxis: dict | None = None, **layout) -> go.Figure:
    """A figure built in one go (one validation pass): ``traces`` on titled axes.

    Args:
        traces: plotly trace objects.
        title: figure title.
        x_title, y_title: axis titles, units included (e.g. ``"context (tokens)"``).
        xaxis, yaxis: extra axis settings (``type="log"``, ranges…).
        layout: extra layout keywords (``height``, ``barmode``, ``shapes``…).
    """
    lay = base_layout(title, **layout)
    lay["xaxis"] = axis(x_title, **(xaxis or {}))
    lay["yaxis"] = axis(y_title, **(yaxis or {}))
    return go.Figure(data=traces, layout=lay, **checked())


def format_bytes(n: float) -> str:
    """``n`` bytes as a short human string (binary units: KiB, MiB, GiB)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n:,.0f} B"


def log_axis_ticks(low: float, high: float, *, base2: bool = False) -> dict:
    """Tick values and labels for a log axis spanning ``[low, high]``, each label a whole number
    (no "2" or "5" without its decade, which plotly's default minor labels show).

    ``base2=True`` ticks powers of two (token lengths: 1,024 … 131,072); otherwise 1-2-5 per decade
    (0.5, 1, 2, 5, 10, 20 …). Returns ``tickvals``/``ticktext`` for an axis dict.
    """
    if not (low > 0 and high >= low):
        return {}
    if base2:
        values = [2.0**k for k in range(int(np.floor(np.log2(low))), int(np.ceil(np.log2(high))) + 1)]
    else:
        values = [m * 10.0**e for e in range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
                  for m in (1, 2, 5)]
        values = [v for v in values if low / 2.5 <= v <= high * 2.5]
    if base2 and len(values) > 9:  # keep about eight labels: every other power of two
        values = values[len(values) % 2::2]
    return dict(tickvals=values, ticktext=[f"{v:,.0f}" if v >= 1 else f"{v:g}" for v in values])

