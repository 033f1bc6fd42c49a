"""Small HTML tables for the explorers' summary panes (values are formatted, not computed, here)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from kvlab.plots.palette import GREY_DARK, GREY_LIGHT, PANE_BACKGROUND

_CELL = f"padding:2px 10px;text-align:right;border-bottom:1px solid {GREY_LIGHT}"
_HEAD = f"padding:2px 10px;text-align:right;border-bottom:2px solid {GREY_DARK}"


def html_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, caption: str = "") -> str:
    """A compact HTML table; cells are escaped; the first column is left-aligned."""
    def cell(v: object, i: int, style: str, tag: str) -> str:
        align = "text-align:left;" if i == 0 else ""
        return f'<{tag} style="{style};{align}">{html.escape(str(v))}</{tag}>'

    head = "".join(cell(h, i, _HEAD, "th") for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell(v, i, _CELL, "td") for i, v in enumerate(r)) + "</tr>" for r in rows)
    cap = ""
    if caption:
        cap = f'<caption style="text-align:left;font-weight:600">{html.escape(caption)}</caption>'

    return f'<table style="border-collapse:collapse;font-size:13px">{cap}<tr>{head}</tr>{body}</table>'


def html_log_lines(lines: Sequence[str], *, caption: str = "") -> str:
    """Log lines in a monospace block."""
    cap = f"<div style='font-weight:600'>{html.escape(caption)}</div>" if caption else ""
    text = "<br>".join(html.escape(line) for line in lines)
    style = f"font-family:monospace;font-size:12px;background:{PANE_BACKGROUND};padding:4px"
    return f"{cap}<div style='{style}'>{text}</div>"
