"""Copying a freshly built figure into a live ``FigureWidget``: its traces and layout replace the old
ones, sending only what differs from what the widget already shows.

* When the new traces set the same properties as the widget's (same number and types) and the
  changed traces all change the same properties, only those values are sent, together with a
  changed layout, in one update message: lesson 02's heatmaps resend their error grids but not the
  original values, which a change of format leaves as they are (1,083 → 788 kB per change).
* Otherwise the traces are replaced: a delete and an add message, with a changed layout between them.

The page draws the messages of one figure's update once (:mod:`kvlab.widgets.one_redraw`: plotly's
own view redrew after each, three times per figure). A figure whose data and layout did not change
costs no message at all, and the widget ends up holding exactly the new figure's properties either way.
"""

from __future__ import annotations

from copy import deepcopy

import numpy as np
import plotly.graph_objects as go
from plotly.basedatatypes import BasePlotlyType

from kvlab.plots.style import validating

#: Properties the widget sets itself (a trace's id in the browser): never compared.
_WIDGET_OWNED = frozenset({"uid"})
#: Layout lists the replacement always resets (a stale mark adds to them).
_RESET_LISTS = ("annotations", "shapes")


def _changed_properties(target: go.FigureWidget, source: go.Figure, merge: bool = False) -> list[dict] | None:
    """Per trace, the properties of ``source`` whose values differ from the widget's; ``None`` when
    the traces cannot be updated in place: they differ in number, type or in which properties they
    set, or the changed traces do not all change the same properties (one update message lists one
    value per changed trace for each property it sets) and ``merge`` is off.

    With ``merge``, each trace lists only what it changed, even when another trace changes other
    properties (:func:`sync_figure` then sends one update message per set of changed properties)."""
    old, new = target._data, source._data
    if len(old) != len(new):
        return None
    changes = []
    for o, n in zip(old, new, strict=True):
        keys = {k for k in n if k not in _WIDGET_OWNED}
        if keys != {k for k in o if k not in _WIDGET_OWNED} or o.get("type") != n.get("type"):
            return None
        changes.append({k: n[k] for k in keys if not BasePlotlyType._vals_equal(o[k], n[k])})
    if not merge and len({frozenset(c) for c in changes if c}) > 1:
        return None
    return changes


def _changed_layout(target: go.FigureWidget, layout: dict) -> dict:
    """The entries of ``layout`` (a plotly-JSON layout) whose values differ from the widget's, each
    whole and copied (the widget never shares them with ``layout``), as they must be set; the lists
    a replacement resets (a stale mark adds to them) are set whenever the widget holds other items,
    and emptied when ``layout`` has none. Empty when applying ``layout`` would change nothing the
    widget shows."""
    held = target._layout
    changed = {key: deepcopy(value) for key, value in layout.items() if key not in _RESET_LISTS
               and (key not in held or not BasePlotlyType._vals_equal(held[key], value))}
    for key in _RESET_LISTS:
        items = list(layout.get(key) or ())
        if not BasePlotlyType._vals_equal(list(held.get(key) or ()), items):
            changed[key] = deepcopy(items)
    return changed


def sync_figure(target: go.FigureWidget, source: go.Figure, *, merge: bool = False) -> None:
    """Make ``target`` show ``source`` (see the module docstring): changed values in one update
    message, or the traces replaced (a delete and an add message) with a changed layout between.

    ``merge=True`` also updates in place when the changed traces change different properties: one
    update message per set of changed properties, each listing a value for every trace it names (a
    message never leaves a trace's value out, which plotly would send as ``undefined``), the changed
    layout with the first. The page draws a figure once for all the messages of an update
    (:mod:`kvlab.widgets.one_redraw`). Lesson 05's admission explorer (a window or chunk change changes
    ``x`` of some traces and ``x``, ``y`` and ``customdata`` of others) copies its figures this way
    instead of replacing every trace.

    When replacing, the layout goes between the delete and the add, while the figure has no traces:
    a layout change that makes plotly recompute the data (a colour range, an axis) then finds none,
    and the new data are computed once, by the add. (In the browser benchmark this was within its
    run-to-run noise except for the block map, whose change got faster; see
    ``benchmarks/results/widgets_browser.csv``.)

    The figures' ``uirevision`` keeps the user's zoom across updates. Inside
    :func:`kvlab.plots.style.unvalidated_figures` the widget does not validate the copies either
    (``source`` was built by kvlab's builders, validated in the tests).
    """
    target._validate = validating()
    layout = source._layout  # read only: the entries that changed are copied (_changed_layout)
    if _template_background(target) is not None:
        # every kvlab figure uses one template; re-validating it is slow
        layout = {key: value for key, value in layout.items() if key != "template"}
    changes = _changed_properties(target, source, merge)
    new_layout = _changed_layout(target, layout)
    if changes is None:  # replaced: delete, layout, add
        with target.batch_update():
            target.data = ()
        if new_layout:
            _apply_layout(target, new_layout)
        _add_traces(target, list(source.data))
    elif new_layout or any(changes):  # in place: one update message per set of changed properties
        groups: dict[frozenset, list[int]] = {}
        for index, changed in enumerate(changes):
            if changed:
                groups.setdefault(frozenset(changed), []).append(index)
        for indexes in list(groups.values()) or [[]]:
            with target.batch_update():
                if new_layout:
                    _apply_layout(target, new_layout)
                    new_layout = {}
                for index in indexes:
                    for key, value in changes[index].items():  # what setting trace[key] records in a batch
                        target._batch_trace_edits.setdefault(index, {})[key] = _copied(value)


def _template_background(target: go.FigureWidget):
    """The widget's template's ``paper_bgcolor`` (``target.layout.template.layout.paper_bgcolor``, read
    from the widget's layout data: building the template's objects cost a tenth of a sync)."""
    return ((target._layout.get("template") or {}).get("layout") or {}).get("paper_bgcolor")


def _apply_layout(target: go.FigureWidget, changed: dict) -> None:
    """Set the layout entries of ``changed`` (from :func:`_changed_layout`), each replacing the
    widget's whole entry (one message, or part of the batch open). The entries left out are equal
    already: setting them again cost a policy change of lesson 05 half of its 35 ms of copying."""
    with target.batch_update():
        target.update_layout(changed, overwrite=True)


def _copied(value):
    """``value`` for the widget to keep: containers copied (the widget must never share them with the
    figure it copies), arrays as they are (neither side writes into them)."""
    return value if isinstance(value, np.ndarray) else deepcopy(value)


class _TraceCopier:
    """A figure's trace validator that validates the traces it copies only while the figure does.

    ``FigureWidget.add_traces`` validates every property of every trace it is given (a tenth of a
    second for an explorer's figures on a 2-core machine), even when the figure itself does not
    validate; this lets :func:`kvlab.plots.style.unvalidated_figures` cover the copy as well.
    """

    def __init__(self, figure: go.FigureWidget, inner) -> None:
        self._figure, self._inner = figure, inner

    def validate_coerce(self, v, skip_invalid: bool = False, _validate: bool = True):
        return self._inner.validate_coerce(v, skip_invalid=skip_invalid,
                                           _validate=_validate and self._figure._validate)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


def _add_traces(target: go.FigureWidget, traces: list) -> None:
    """``target.add_traces(traces)``, validating the copies only if ``target`` validates."""
    inner = target._data_validator
    target._data_validator = _TraceCopier(target, inner)
    try:
        target.add_traces(traces)
    finally:
        target._data_validator = inner
