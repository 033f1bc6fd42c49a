"""A figure's redraw passes plotly.js the very arrays it drew last wherever the data did not change
(``kvlabSameArrays`` in :mod:`kvlab.widgets.one_redraw`), so that a change of names, hover text or
style is not a recalculation of the whole figure. Run in Chromium, with plotly.js itself where its
behaviour is the point.
"""

from __future__ import annotations

from pathlib import Path

import plotly
import pytest

from kvlab.widgets.one_redraw import ONE_REDRAW_JS, REPORT_QUIET_MS

pytestmark = pytest.mark.browser

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _evaluate(browser, script: str, with_plotly: bool = False):
    page = browser.new_page()
    try:
        if with_plotly:
            page.add_script_tag(path=str(PLOTLY_JS))
        page.add_script_tag(content=ONE_REDRAW_JS)
        return page.evaluate(f"async () => {{ {script} }}")
    finally:
        page.close()


def test_equal_parts_become_the_objects_drawn_and_the_values_stay_the_new_ones(browser):
    got = _evaluate(browser, """
      const prev = {
        x: new Float32Array([1, 2, 3]), y: [1, NaN, 3],
        z: [new Float32Array([1, 2]), new Float32Array([3, 4])],
        customdata: [["r1", 5], ["r2", 6]], f64: new Float64Array([1, 2]), changed: [1, 2, 3],
        template: { layout: { colorway: ["#000", "#111"], font: { size: 12 } } },
        annotations: [{ text: "A", x: 0 }, { text: "B", x: 1 }], short: [1, 2],
      };
      const next = structuredClone(prev);
      next.changed[2] = 4;
      next.annotations[1].text = "B2";
      next.f64 = new Float32Array([1, 2]);  // same values, another type: new data for plotly
      next.short = [1, 2, 3];
      const plainJSON = (o) => JSON.stringify(o, (k, v) =>
        ArrayBuffer.isView(v) ? [...v] : (v !== v ? "NaN" : v));
      const expected = plainJSON(next);
      const out = kvlabSameArrays(next, prev);
      const same = {};
      for (const key of Object.keys(prev)) same[key] = out[key] === prev[key];
      return {
        same, annotation0: out.annotations[0] === prev.annotations[0],
        annotation1: out.annotations[1] === prev.annotations[1],
        values: plainJSON(out) === expected,
        whole: kvlabSameArrays(structuredClone(prev), prev) === prev,
        none: kvlabSameArrays(next, undefined) === next,
      };
    """)
    assert got["same"] == {"x": True, "y": True, "z": True, "customdata": True, "f64": False,
                           "changed": False, "template": True, "annotations": False, "short": False}
    assert got["annotation0"] and not got["annotation1"]
    assert got["values"] and got["whole"] and got["none"]


def test_plotly_recalculates_a_figure_only_when_its_data_changed(browser):
    # plotly.js keeps the figure's calculated data (gd.calcdata) when the arrays it is given are the
    # objects it drew; a fresh copy of the same values (what the widget's model gives on every read)
    # makes it recalculate everything
    got = _evaluate(browser, """
      document.body.innerHTML = '<div id="g" style="width:600px"></div>';
      const gd = document.getElementById("g");
      const state = (name, y) => ({
        data: [{ type: "scatter", uid: "t0", x: new Float64Array([0, 1, 2]), y: new Float64Array(y), name,
                 hovertemplate: name + " %{y}<extra></extra>", customdata: [["a", 1], ["b", 2], ["c", 3]] }],
        layout: { height: 300, template: { layout: { colorway: ["#123456"] } },
                  yaxis: { categoryarray: ["u", "v"] }, annotations: [{ text: name, x: 0, y: 0 }] },
      });
      let s = state("A", [1, 2, 3]);
      await Plotly.newPlot(gd, s.data, s.layout);
      let drawn = s, calc = gd.calcdata;
      const step = async (next, reuse) => {
        const data = reuse ? kvlabSameArrays(next.data, drawn.data) : next.data;
        const layout = reuse ? kvlabSameArrays(next.layout, drawn.layout) : next.layout;
        await Plotly.react(gd, data, layout);
        drawn = { data, layout };
        const kept = gd.calcdata === calc;
        calc = gd.calcdata;
        return kept;
      };
      return {
        fresh_copy: await step(state("A", [1, 2, 3]), false),
        renamed: await step(state("B", [1, 2, 3]), true),
        legend: gd._fullData[0].name,
        annotation: gd.querySelector(".annotation-text").textContent,
        new_data: await step(state("B", [1, 2, 4]), true),
        y: [...gd.calcdata[0].map((p) => p.y)],
      };
    """, with_plotly=True)
    assert got["fresh_copy"] is False  # today's redraw: every draw a recalculation
    assert got["renamed"] is True
    assert got["legend"] == "B" and got["annotation"] == "B"
    assert got["new_data"] is False and got["y"] == [1, 2, 4]


def test_the_view_draws_the_arrays_it_drew_last_when_only_a_name_changed(browser):
    # through the patched view (a stand-in for plotly's, as in test_one_redraw.py): the model gives a
    # fresh copy on every read, and the second draw gets the first draw's arrays back where unchanged
    got = _evaluate(browser, f"""
      const drawn = [];
      const Plotly = {{ react: (el, data, layout) => {{
        drawn.push([data, layout]);
        return Promise.resolve(el);
      }} }};
      class View {{
        constructor(state) {{ this.el = {{ id: "v" }}; this.viewID = "v"; this.state = state;
                             this.model = {{ get: (name) => structuredClone(this.state[name] ?? null) }}; }}
        remove() {{}}
        _sendTraceDeltas() {{}}
        _sendLayoutDelta() {{}}
      }}
      kvlabOneRedraw(View, Plotly);
      const v = new View({{ _widget_data: [{{ type: "bar", y: [1, 2], x: ["a", "b"], name: "old" }}],
                           _widget_layout: {{ template: {{ layout: {{ colorway: ["#000"] }} }} }} }});
      v.state._py2js_update = {{ style_data: {{}}, layout_data: {{}}, trace_edit_id: 1, layout_edit_id: 1 }};
      v.do_update();
      await new Promise((r) => setTimeout(r, 50 + {REPORT_QUIET_MS}));
      v.state._widget_data[0].name = "new";
      v.state._widget_data[0].y = [1, 3];
      v.state._py2js_update = {{ style_data: {{ name: ["new"], y: [[1, 3]] }}, layout_data: {{}},
                                trace_edit_id: 2, layout_edit_id: 2 }};
      v.do_update();
      await new Promise((r) => setTimeout(r, 50 + {REPORT_QUIET_MS}));
      const [[d1, l1], [d2, l2]] = drawn;
      return {{ draws: drawn.length, x: d2[0].x === d1[0].x, y: d2[0].y === d1[0].y, y_values: d2[0].y,
                name: d2[0].name, template: l2.template === l1.template }};
    """)
    assert got == {"draws": 2, "x": True, "y": False, "y_values": [1, 3], "name": "new", "template": True}


#: Page script: plotly JSON with binary arrays (``{dtype, bdata}``) decoded into typed arrays, as the
#: widget's model holds them, and each trace given a fixed uid, as the widget gives them.
DECODE_JS = """
const TYPED = {f8: Float64Array, f4: Float32Array, i4: Int32Array, u4: Uint32Array, i2: Int16Array,
               u2: Uint16Array, i1: Int8Array, u1: Uint8Array};
const decode = (v) => {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map(decode);
  if (typeof v.bdata === "string" && v.dtype) {
    const bytes = Uint8Array.from(atob(v.bdata), (c) => c.charCodeAt(0));
    const flat = new TYPED[v.dtype.replace(/[<>|]/, "")](bytes.buffer);
    if (!v.shape) return flat;
    const [rows, cols] = String(v.shape).split(",").map(Number);
    return Array.from({length: rows}, (_, i) => flat.slice(i * cols, (i + 1) * cols));
  }
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, decode(x)]));
};
const figure = (json) => {
  const fig = decode(JSON.parse(json));
  fig.data.forEach((t, j) => { t.uid = "t" + j; });
  return fig;
};
"""


def test_a_new_scheme_recalculates_only_lesson_02s_figures_whose_data_changed(browser):
    import plotly.io as pio

    from kvlab.widgets.quantization_explorer import build_quantization_explorer

    explorer = build_quantization_explorer(debounce_s=0)
    explorer.refresh()  # the deferred attention curve (Playwright keeps an event loop running here)
    states = [{k: pio.to_json(f) for k, f in explorer.figures.items()}]
    explorer.controls["scheme"].value = "fp8_e4m3"
    explorer.refresh()
    states.append({k: pio.to_json(f) for k, f in explorer.figures.items()})
    got = _evaluate(browser, DECODE_JS + """
      const kept = {};
      for (const name of Object.keys(STATES[0])) {
        document.body.innerHTML = '<div id="g" style="width:940px"></div>';
        const gd = document.getElementById("g");
        const first = figure(STATES[0][name]), second = figure(STATES[1][name]);
        await Plotly.newPlot(gd, first.data, first.layout);
        const calc = gd.calcdata;
        await Plotly.react(gd, kvlabSameArrays(second.data, first.data),
                           kvlabSameArrays(second.layout, first.layout));
        kept[name] = [gd.calcdata === calc, gd._fullData.map((t) => t.opacity),
                      (gd._fullLayout.shapes || []).length];
        Plotly.purge(gd);
      }
      return kept;
    """.replace("STATES", repr(states)), with_plotly=True)
    assert got["heatmap"][0] is False and got["histogram"][0] is False  # new data: recalculated
    assert got["attention"][0] is True and got["bytes"][0] is True  # a new highlight only
    # and what is drawn is the new highlight: fp8_e4m3 (second of the compared schemes) opaque, one outline
    assert got["attention"][1] == [0.45, 1, 0.45, 0.45, 0.45]
    assert got["bytes"][2] == 1
