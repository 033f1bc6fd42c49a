"""2-D numeric arrays of a figure sent to the page as one binary buffer each, rebuilt into rows there.

plotly's widget serializer sends a 1-D numeric numpy array as a binary buffer but turns any other
array into nested lists: a heatmap's 256 × 128 ``z`` becomes 32,768 numbers of JSON text, which the
kernel writes and the page parses. Sending the grid as flat ``x``/``y``/``z`` columns keeps it binary,
but then plotly.js rebuilds the grid from the columns on every redraw: in Chromium, a ``Plotly.react``
of lesson 02's two-heatmap figure took 90–103 ms from columns and 41–44 ms from 2-D rows of the same
values (the measurement is in ``benchmarks/widgets_notes.md``).

Here a figure keeps its real 2-D arrays (the kernel's figure is what any other renderer would draw),
and only the messages to the page change:

* :func:`grid_to_js` (the kernel's serializer of the figure's data messages) sends a C-contiguous 2-D
  numeric array as ``{"kvlab_rows": <1-D binary buffer>, "columns": C}``, every other value as
  plotly's own serializer does;
* :data:`GRID_ROWS_JS` (``kvlabGridRows``), on the page, turns each such object back into a list of
  ``C``-long rows (typed arrays of the buffer's dtype, as plotly.js itself reads a 2-D typed array,
  but each with its own small buffer, so that plotly's view deep-copies a figure cheaply when it first
  draws it), and ``kvlabGridModel`` makes plotly's model do so whenever a view reads the figure's data.
"""

from __future__ import annotations

import numpy as np
from plotly.serializers import _py_to_js

#: Marks a 2-D grid in a message (the key of its flat buffer); :data:`GRID_ROWS_JS` knows it too.
GRID_KEY = "kvlab_rows"


def _binary(values: np.ndarray) -> bool:
    """True when plotly's serializer would send this 1-D array as a binary buffer (numeric, not 64-bit
    integers: JavaScript has no typed array for them)."""
    return values.dtype.kind in "uif" and values.dtype not in (np.int64, np.uint64)


def grid_to_js(value, widget_manager=None):
    """plotly's ``_py_to_js`` serializer, with every 2-D numeric array sent as one flat binary buffer
    and its row length (see the module docstring). The array's values and dtype are unchanged."""
    if isinstance(value, dict):
        return {k: grid_to_js(v, widget_manager) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [grid_to_js(v, widget_manager) for v in value]
    if isinstance(value, np.ndarray) and value.ndim == 2 and value.size and _binary(value):
        flat = np.ascontiguousarray(value).reshape(-1)
        return {GRID_KEY: _py_to_js(flat, widget_manager), "columns": int(value.shape[1])}
    return _py_to_js(value, widget_manager)


#: Page script: ``kvlabGridRows(value)`` returns ``value`` with every grid object made of
#: :func:`grid_to_js` replaced by its rows (typed arrays of the buffer's dtype); other values are left
#: as they are (the same objects), and typed arrays are not walked. ``kvlabGridModel(Model)`` patches
#: plotly's ``FigureModel`` class (idempotent) so that reading ``_widget_data`` returns rows.
GRID_ROWS_JS = """
function kvlabGridRows(value) {
  if (value === null || typeof value !== "object" || ArrayBuffer.isView(value)) return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item = value[i];
      if (item !== null && typeof item === "object") value[i] = kvlabGridRows(item);
    }
    return value;
  }
  const flat = value.GRID_KEY;
  if (flat !== undefined && ArrayBuffer.isView(flat) && Number.isInteger(value.columns)) {
    const rows = [];
    for (let start = 0; start < flat.length; start += value.columns) {
      rows.push(flat.slice(start, start + value.columns));
    }
    return rows;
  }
  for (const key of Object.keys(value)) value[key] = kvlabGridRows(value[key]);
  return value;
}

function kvlabGridModel(Model) {
  if (!Model || Model.prototype.__kvlabGridRows) return;
  const get = Model.prototype.get;
  Model.prototype.__kvlabGridRows = true;
  Model.prototype.get = function (name) {
    const value = get.call(this, name);
    return name === "_widget_data" ? kvlabGridRows(value) : value;
  };
}
""".replace("GRID_KEY", GRID_KEY)
