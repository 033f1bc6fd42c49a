"""Copying a freshly built figure into a live ``FigureWidget``: only what changed, in one message.

When the new figure has the same traces (count and types) as the one on screen, only the trace
properties and layout entries whose values differ (by property path, e.g. ``line.width``) are sent,
as one ``Plotly.update`` (one redraw in
the browser, a message the size of the change). Otherwise the traces are replaced (a delete, an add
and an update message). Either way the widget then holds exactly the new figure's properties.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.basedatatypes import BasePlotlyType
from plotly.basedatatypes import Undefined as _UNDEFINED

from kvlab.plots.style import validating

#: Properties the widget sets itself (a trace's id in the browser): never compared nor removed.
_WIDGET_OWNED = frozenset({"uid"})
_MISSING = object()


def _same(a: object, b: object) -> bool:
    if a is _MISSING or b is _MISSING:
        return a is b
    return BasePlotlyType._vals_equal(a, b)


def _detach(value: object) -> object:
    """A copy of nested dicts and lists (arrays are shared: nothing writes into them), so that later
    edits of the widget (a stale mark) never reach a figure a renderer may have cached."""
    if isinstance(value, dict):
        return {k: _detach(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not isinstance(value, np.ndarray):
        return [_detach(v) for v in value]
    return value


def _changes(old: dict, new: dict, skip: frozenset[str] = _WIDGET_OWNED,
             prefix: str = "") -> dict[str, object]:
    """Entries of ``new`` that differ from ``old``, by property path (``"line.width"``: a nested
    object that exists on both sides is compared inside, as plotly's own edits address it);
    ``None`` removes an entry."""
    out = {}
    for key in new.keys() | old.keys():
        if not prefix and key in skip:
            continue
        before, value = old.get(key, _MISSING), new.get(key, _MISSING)
        if _same(before, value):
            continue
        if isinstance(before, dict) and isinstance(value, dict):
            out.update(_changes(before, value, skip, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = None if value is _MISSING else _detach(value)
    return out


def _top(paths) -> set[str]:
    """The top-level properties of property paths."""
    return {path.split(".", 1)[0] for path in paths}


def _forget_children(obj: BasePlotlyType, keys) -> None:
    """Drop plotly's cached child objects of ``keys`` (rebuilt from the new values on next access).

    A layout's subplot axes (``yaxis2`` …) are not rebuilt on access: each gets an empty child
    object that reads its values from the layout, as plotly's own assignment leaves it.
    """
    subplots = getattr(obj, "_subplotid_props", ())
    for key in keys:
        obj._compound_props.pop(key, None)
        obj._compound_array_props.pop(key, None)
        if key in subplots:
            child = obj._get_validator(key).validate_coerce({})
            child._parent = obj
            obj._compound_props[key] = child


def _register_subplots(layout, keys) -> None:
    """Let the widget's layout accept subplot axes it has not had yet (``yaxis2`` …), as plotly does
    when such a layout is built."""
    for key in keys:
        if key not in layout._valid_props and layout._subplot_re_match(key):
            layout._valid_props.add(key)
            layout._subplotid_props.add(key)


def same_traces(target: go.FigureWidget, source: go.Figure) -> bool:
    """True when ``source`` has as many traces as ``target``, of the same types, in the same order."""
    old, new = target._data, source._data
    return len(old) == len(new) and all(o.get("type") == n.get("type") for o, n in zip(old, new, strict=True))


def sync_figure(target: go.FigureWidget, source: go.Figure) -> None:
    """Make ``target`` show ``source`` (see the module docstring).

    The figures' ``uirevision`` keeps the user's zoom across updates. Inside
    :func:`kvlab.plots.style.unvalidated_figures` the widget does not validate the copies
    (``source`` was built by kvlab's builders, validated in the tests).
    """
    target._validate = validating()
    skip_layout = _WIDGET_OWNED
    if target._layout.get("template") is not None:
        skip_layout = _WIDGET_OWNED | {"template"}  # every kvlab figure uses one template
    if not same_traces(target, source):
        _replace(target, source, skip_layout)
        return
    restyle: dict[str, list] = {}
    indexes: list[int] = []
    per_trace = [_changes(o, n) for o, n in zip(target._data, source._data, strict=True)]
    for i, changes in enumerate(per_trace):
        if changes:
            indexes.append(i)
    for slot, i in enumerate(indexes):
        for key, value in per_trace[i].items():
            restyle.setdefault(key, [_UNDEFINED] * len(indexes))[slot] = value
    relayout = _changes(target._layout, source._layout, skip_layout)
    if not restyle and not relayout:
        return
    _register_subplots(target.layout, _top(relayout))
    target.plotly_update(restyle_data=restyle or None, relayout_data=relayout or None,
                         trace_indexes=indexes or None)
    for i in indexes:
        _forget_children(target.data[i], _top(per_trace[i]))
    _forget_children(target.layout, _top(relayout))


def _replace(target: go.FigureWidget, source: go.Figure, skip_layout: frozenset[str]) -> None:
    """Replace every trace and apply the changed layout entries."""
    with target.batch_update():
        target.data = ()
    target.add_traces(list(source.data))
    relayout = _changes(target._layout, source._layout, skip_layout)
    if relayout:
        _register_subplots(target.layout, _top(relayout))
        target.plotly_relayout(relayout)
        _forget_children(target.layout, _top(relayout))

