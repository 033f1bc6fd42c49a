"""Marking what no longer belongs to the settings on screen.

When the current settings fail (vLLM would not start, a window longer than the request), an explorer
shows the error in its status line. Every figure and every panel of numbers that still shows an
earlier setting's result must not read as the answer for the settings on screen, so:

* a figure is *marked*: its title starts with "⚠ not current", a translucent veil covers the
  plotting area and a note on it says which settings it showed;
* a panel of numbers is *cleared*: its numbers are replaced by a one-line note.

The next successful update redraws the figure from scratch, which removes the mark.
:class:`NumberPanel` counts every write to a panel, so the explorer knows whether an update refreshed
it (a write of an unchanged value included).
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import plotly.graph_objects as go
import traitlets

from kvlab.plots.palette import OKABE_ITO

STALE_TITLE_PREFIX = "⚠ not current — "
STALE_NOTE = "not current: these are an earlier setting's results; the settings on screen fail (see above)"
STALE_PANEL_CLASS = "kvlab-stale"


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
    title = fig.layout.title.text or ""
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
