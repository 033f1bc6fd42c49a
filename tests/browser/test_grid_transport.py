"""A heatmap sent as binary grids (:mod:`kvlab.widgets.grid_transport`) shows the right value in every
cell, run in Chromium on plotly's real bundle: its ``FigureModel`` and ``FigureView`` with the page
patches of :mod:`kvlab.widgets.plotly_bundle`, fed the kernel's messages as the page receives them
(binary buffers as ``DataView`` at their paths) through a stand-in for anywidget's model.

The expected hover texts are written here from the arrays and plotly's format strings (``.3g``,
``.4g``), independently of plotly.
"""

from __future__ import annotations

import base64

import numpy as np
import pytest
from ipywidgets.widgets.widget import _remove_buffers

from kvlab.plots import error_heatmaps_figure
from kvlab.widgets.grid_transport import GRID_ROWS_JS, grid_to_js
from kvlab.widgets.one_redraw import ONE_REDRAW_JS
from kvlab.widgets.plotly_bundle import BUNDLE_PATH

pytestmark = pytest.mark.browser

TOKENS, CHANNELS, FIRST_TOKEN = 24, 16, 100

#: Page script: plotly's bundle with kvlab's patches, one figure fed the kernel's messages, and the
#: hover text of the cells asked for.
PAGE_JS = ONE_REDRAW_JS + GRID_ROWS_JS + """
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const url = URL.createObjectURL(new Blob([args.bundle], { type: "text/javascript" }));
const mod = await import(url);
kvlabOneRedraw(mod.FigureView, globalThis.Plotly);
kvlabGridModel(mod.FigureModel);
// anywidget's model, as the page holds it: the state as received, change events, the page's sets
class Model {
  constructor(state) { this.state = state; this.handlers = {}; this.sent = []; }
  get(key) { return this.state[key]; }
  set(key, value) { this.state[key] = value; if (key.startsWith("_js2py")) this.sent.push([key, value]);
                    for (const h of this.handlers[`change:${key}`] || []) h(); }
  on(event, h) { (this.handlers[event] ||= []).push(h); }
  off() {}
  save_changes() {}
  send() {}
}
const received = (message) => {  // the binary buffers back at their paths, as DataViews
  const value = structuredClone(message.state);
  message.paths.forEach((path, i) => {
    let at = value;
    for (const key of path.slice(0, -1)) at = at[key];
    const bytes = Uint8Array.from(atob(message.buffers[i]), (c) => c.charCodeAt(0));
    at[path[path.length - 1]] = new DataView(bytes.buffer);
  });
  return value;
};
const model = new Model({ _widget_data: [], _widget_layout: args.layout, _config: {},
                          _last_layout_edit_id: 0, _last_trace_edit_id: 0 });
const widget = mod.default();
widget.initialize({ model });
const el = document.createElement("div");
document.body.appendChild(el);
widget.render({ el });
await sleep(100);
model.set("_py2js_addTraces", received(args.add));
model.set("_py2js_addTraces", null);
for (let i = 0; i < 100 && !(el.data && el.data.length === 2); i++) await sleep(50);
await sleep(200);
const hovers = [];
for (const [x, y] of args.cells) {
  Plotly.Fx.hover(el, { xval: x, yval: y }, "xy");
  await sleep(30);
  hovers.push([...el.querySelectorAll(".hovertext")].map((e) => e.textContent.trim()));
  Plotly.Fx.unhover(el);
}
const deltas = model.sent.filter(([key]) => key === "_js2py_traceDeltas").map(([, v]) => v);
return { hovers, rows: el.data[0].z.length, row: el.data[0].z[0].constructor.name,
         deltaKeys: deltas.map((d) => d.trace_deltas.map((t) => Object.keys(t).sort())) };
"""


def _wire(message: dict) -> dict:
    """The kernel's message as it travels: JSON state, the paths of its binary buffers, the buffers."""
    state, paths, buffers = _remove_buffers(grid_to_js(message))
    return dict(state=state, paths=paths, buffers=[base64.b64encode(bytes(b)).decode() for b in buffers])


def _g(value: float, digits: int) -> str:
    """JavaScript's ``toPrecision`` (d3's ``g`` format): ``digits`` significant digits, in exponent
    notation when the rounded value's exponent is below -6 or at least ``digits``."""
    mantissa, exp = f"{value:.{digits - 1}e}".split("e")
    exponent = int(exp)
    if exponent < -6 or exponent >= digits:
        return f"{mantissa}e{exponent:+d}"
    return f"{value:.{digits - 1 - exponent}f}"


def test_a_heatmap_sent_as_grids_shows_each_cells_value(browser):
    rng = np.random.default_rng()
    k_err = rng.uniform(1e-3, 1.0, (TOKENS, CHANNELS))
    v_err = rng.uniform(1e-3, 1.0, (TOKENS, CHANNELS))
    k_val = rng.normal(0, 2, (TOKENS, CHANNELS)).astype(np.float32)
    v_val = rng.normal(0, 2, (TOKENS, CHANNELS)).astype(np.float32)
    fig = error_heatmaps_figure(k_err, v_err, k_val, v_val, title="t", first_token=FIRST_TOKEN)
    add = _wire({"trace_data": [t.to_plotly_json() for t in fig.data], "trace_edit_id": 1,
                 "layout_edit_id": 1})
    assert all(path[-2:] == ["kvlab_rows", "buffer"] for path in add["paths"])  # the grids went binary
    cells = [(0, 0), (CHANNELS - 1, TOKENS - 1), (5, 17), (11, 3)]  # (channel, token row)
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        out = page.evaluate(
            "async (args) => { " + PAGE_JS + " }",
            dict(bundle=BUNDLE_PATH.read_text(encoding="utf-8"), add=add,
                 layout=fig.layout.to_plotly_json(),
                 cells=[(x, FIRST_TOKEN + row) for x, row in cells]),
        )
    finally:
        context.close()
    assert errors == []
    assert out["rows"] == TOKENS and out["row"] == "Float32Array"  # rows of z, sent as float32
    for (x, row), shown in zip(cells, out["hovers"], strict=True):
        # hover of the K heatmap (the first axes): token, channel, |error| and the original value
        expected = (f"Ktoken {FIRST_TOKEN + row}channel {x}|error| {_g(k_err[row, x], 3)}"
                    f"value {_g(float(k_val[row, x]), 4)}")
        assert shown == [expected], (x, row, shown)
    # the deltas sent back hold no copy of the grids (plotly's full data is the data drawn)
    assert out["deltaKeys"] and all("z" not in keys and "customdata" not in keys
                                    for trace_keys in out["deltaKeys"] for keys in trace_keys)
