"""Marking what no longer belongs to the settings on screen.

When the current settings fail (vLLM would not start, a window longer than the request), an explorer
shows the error in its status line. Every figure and every panel of numbers that still shows an
earlier setting's result must not read as the answer for the settings on screen, so:

* a figure is *marked*: its title starts with "⚠ not current", a translucent veil covers the
  plotting area and a note on it says which settings it showed;
* a panel of numbers is *cleared*: its numbers are replaced by a one-line note.

The next successful update redraws the figure from scratch, which removes the mark.

Views an explorer draws just after the others (:meth:`kvlab.widgets.explorer.Explorer.later`, the
runs in seconds) would show the previous setting's numbers while they compute, so until they arrive
they are marked as *computing*: a figure's title starts with "⏳ computing…" in grey, a panel's numbers
are dimmed under a "⏳ computing…" line. The deferred draw replaces them, which removes the mark.
:class:`NumberPanel` counts every write to a panel, so the explorer knows whether an update refreshed
it (a write of an unchanged value included).
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import plotly.graph_objects as go
import traitlets

from kvlab.plots.palette import GREY, OKABE_ITO

STALE_TITLE_PREFIX = "⚠ not current — "
STALE_NOTE = "not current: these are an earlier setting's results; the settings on screen fail (see above)"
STALE_PANEL_CLASS = "kvlab-stale"
PENDING_TITLE_PREFIX = "⏳ computing… — "
PENDING_NOTE = "computing for the settings on screen; the numbers below are the previous setting's"
PENDING_PANEL_CLASS = "kvlab-pending"


class NumberPanel(widgets.HTML):
    """An HTML panel of numbers (a table, banners) that counts every write to ``value``."""

    def __init__(self, **kwargs) -> None:
        self.writes = 0
        super().__init__(**kwargs)

    @traitlets.validate("value")
    def _count_write(self, proposal):
        self.writes += 1
        return proposal["value"]


def mark_figure_stale(fig: go.FigureWidget, note: str = STALE_NOTE) -> None:
    """Veil ``fig`` and prefix its title, in one message to the browser (idempotent)."""
    title = (fig.layout.title.text or "").removeprefix(PENDING_TITLE_PREFIX)
    if title.startswith(STALE_TITLE_PREFIX):
        return
    with fig.batch_update():
        fig.layout.title.text = STALE_TITLE_PREFIX + title
        fig.layout.title.font.color = OKABE_ITO["vermillion"]
        fig.add_shape(type="rect", xref="paper", yref="paper", x0=0, x1=1, y0=0, y1=1, layer="above",
                      fillcolor="rgba(255,255,255,0.78)", line_width=0, name="kvlab-stale")
        fig.add_annotation(text=f"⚠ {html.escape(note)}", xref="paper", yref="paper", x=0.5, y=0.5,
                           showarrow=False, font={"size": 14, "color": OKABE_ITO["vermillion"]},
                           bgcolor="rgba(255,255,255,0.9)", name="kvlab-stale")


def figure_is_stale(fig: go.Figure) -> bool:
    """True while ``fig`` carries the stale mark."""
    return (fig.layout.title.text or "").startswith(STALE_TITLE_PREFIX)


def clear_panel(panel: widgets.HTML, note: str = STALE_NOTE) -> None:
    """Replace a panel's numbers with a one-line note."""
    panel.value = (f'<div class="{STALE_PANEL_CLASS}" style="color:{OKABE_ITO["vermillion"]};'
                   f'font-style:italic">⚠ numbers hidden: {html.escape(note)}</div>')


def panel_is_stale(panel: widgets.HTML) -> bool:
    """True while ``panel`` shows the note of :func:`clear_panel` instead of numbers."""
    return f'class="{STALE_PANEL_CLASS}"' in panel.value


def mark_figure_pending(fig: go.FigureWidget) -> None:
    """Prefix ``fig``'s title with "⏳ computing…" in grey, in one message (idempotent; a figure
    with nothing drawn yet or already marked not current is left alone)."""
    title = fig.layout.title.text or ""
    if not fig.data or title.startswith((PENDING_TITLE_PREFIX, STALE_TITLE_PREFIX)):
        return
    with fig.batch_update():
        fig.layout.title.text = PENDING_TITLE_PREFIX + title
        fig.layout.title.font.color = GREY


def figure_is_pending(fig: go.Figure) -> bool:
    """True while ``fig`` carries the computing mark."""
    return (fig.layout.title.text or "").startswith(PENDING_TITLE_PREFIX)


def mark_panel_pending(panel: widgets.HTML, note: str = PENDING_NOTE) -> None:
    """Dim a panel's numbers under a "⏳ computing…" line (idempotent; an empty panel, or one whose
    numbers are already hidden, is left alone)."""
    if not panel.value or panel_is_pending(panel) or panel_is_stale(panel):
        return
    panel.value = (f'<div class="{PENDING_PANEL_CLASS}"><div style="color:{GREY};font-style:italic">'
                   f'⏳ {html.escape(note)}</div><div style="opacity:0.4">{panel.value}</div></div>')


def panel_is_pending(panel: widgets.HTML) -> bool:
    """True while ``panel`` carries the computing mark of :func:`mark_panel_pending`."""
    return panel.value.startswith(f'<div class="{PENDING_PANEL_CLASS}">')
