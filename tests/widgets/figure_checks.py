"""Checks every explorer figure must pass: titled axes (with units unless categorical), hover text, bars
on a linear or categorical position axis."""

from __future__ import annotations

import re

import plotly.graph_objects as go

_UNIT = re.compile(r"\(.+\)")


def _axis_name(letter: str, ref: str | None) -> str:
    return f"{letter}axis{ref[1:] if ref and len(ref) > 1 else ''}"


def _categorical(values) -> bool:
    return values is not None and len(values) > 0 and isinstance(next(iter(values)), str)


def assert_well_formed(fig: go.FigureWidget, name: str) -> None:
    """Every used axis has a title (with its unit in parentheses when numeric); every trace has hover text."""
    assert len(fig.data) > 0, f"{name}: no traces"
    assert fig.layout.title.text, f"{name}: no figure title"
    for tr in fig.data:
        for letter in ("x", "y"):
            axis = fig.layout[_axis_name(letter, getattr(tr, f"{letter}axis", None))]
            title = axis.title.text or ""
            assert title, f"{name}: the {letter} axis of trace {tr.name!r} has no title"
            if not _categorical(getattr(tr, letter, None)) and axis.type != "category":
                assert _UNIT.search(title), f"{name}: axis title {title!r} names no unit in parentheses"
        has_hover = bool(tr.hovertemplate) or bool(getattr(tr, "hovertext", None))
        assert has_hover, f"{name}: trace {tr.name!r} has no hover text"
        if tr.type == "bar":
            # plotly draws a bar on a log position axis a sliver wide (its width is a fraction of
            # the smallest gap between positions, which a log axis squeezes): lesson 03 had such bars
            letter = "y" if tr.orientation == "h" else "x"
            position_axis = fig.layout[_axis_name(letter, getattr(tr, f"{letter}axis", None))]
            assert position_axis.type != "log", f"{name}: bars of {tr.name!r} stand on a log {letter} axis"
