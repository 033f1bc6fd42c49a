"""The status line under every explorer: one HTML line that says what is shown, or what is wrong.

Bad input never reaches the user as a traceback: the explorers catch ``ValueError`` from the library
and show its message here, keeping the last valid figures on screen.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from kvlab.plots.palette import GREY_DARK, OKABE_ITO

_STYLES = {
    "ok": ("", GREY_DARK),
    "note": ("ℹ ", OKABE_ITO["blue"]),
    "busy": ("⏳ ", OKABE_ITO["blue"]),
    "error": ("⚠ ", OKABE_ITO["vermillion"]),
}


class StatusLine:
    """An ``ipywidgets.HTML`` line with a level (``ok``, ``note``, ``busy``, ``error``) and a message."""

    def __init__(self) -> None:
        self.widget = widgets.HTML(value="", layout=widgets.Layout(min_height="1.6em"))
        self.level = "ok"
        self.message = ""

    def show(self, level: str, message: str) -> None:
        """Display ``message`` (plain text, escaped) at ``level``."""
        if level not in _STYLES:
            raise ValueError(f"level must be one of {', '.join(_STYLES)}, got {level!r}")
        icon, color = _STYLES[level]
        self.level, self.message = level, message
        weight = "600" if level == "error" else "400"
        self.widget.value = (f'<span class="kvlab-status kvlab-status-{level}" '
                             f'style="color:{color};font-weight:{weight}">{icon}{html.escape(message)}</span>')

    def ok(self, message: str = "") -> None:
        """A neutral line (e.g. a summary of what is plotted)."""
        self.show("ok", message)

    def note(self, message: str) -> None:
        """Information the user should read (a fallback, a clipped value)."""
        self.show("note", message)

    def busy(self, message: str) -> None:
        """Work in progress."""
        self.show("busy", message)

    def error(self, message: str) -> None:
        """An invalid combination of controls; figures keep their last valid state."""
        self.show("error", message)
