"""The page side of one redraw per figure per update (:mod:`kvlab.widgets.one_redraw`), run in Chromium
on a stand-in for plotly's view class and for ``Plotly.react`` (so each draw can be counted).

What the kernel sends to replace a figure is a delete, a layout and an add message; plotly's own view
redraws after each of the three. Here they must give one ``Plotly.react`` of the model's state, and
the kernel must hear back the last edit ids, as from plotly's commands.
"""

from __future__ import annotations

import pytest

from kvlab.widgets.one_redraw import (
    HOLD_EXPIRES_MS,
    MAX_HOLD_MS,
    ONE_REDRAW_JS,
    REPORT_QUIET_MS,
    WAIT_FOR_ADD_MS,
)

pytestmark = pytest.mark.browser

#: A stand-in of plotly's FigureView (the methods the patch replaces or calls) and of Plotly.react.
STAND_IN_JS = ONE_REDRAW_JS + f"const QUIET = {REPORT_QUIET_MS};" + """
const calls = [];
const Plotly = { react: (el, data, layout) => { calls.push(["react", el.id, data, layout]);
                                                 return Promise.resolve(el); } };
class View {
  constructor(id, state) { this.el = { id }; this.viewID = "view-" + id; this.state = state;
                           this.model = { get: (name) => structuredClone(this.state[name] ?? null) }; }
  do_addTraces() { calls.push(["plotly addTraces"]); }
  do_deleteTraces() { calls.push(["plotly deleteTraces"]); }
  do_relayout() { calls.push(["plotly relayout"]); }
  remove() { calls.push(["purge", this.el.id]); }
  _sendTraceDeltas(id) { calls.push(["trace deltas", this.el.id, id]); }
  _sendLayoutDelta(id) { calls.push(["layout delta", this.el.id, id]); }
}
kvlabOneRedraw(View, Plotly);
kvlabOneRedraw(View, Plotly);  // idempotent
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const send = (view, name, msg) => {  // plotly's model code applies the command to the state first
  view.state[name] = msg;
  ({ _py2js_deleteTraces: () => view.do_deleteTraces(), _py2js_relayout: () => view.do_relayout(),
     _py2js_addTraces: () => view.do_addTraces(), _py2js_update: () => view.do_update() })[name]();
};
"""


def _run(browser, script: str):
    context = browser.new_context()
    try:
        page = context.new_page()
        return page.evaluate(f"async () => {{ {STAND_IN_JS}\n{script} }}")
    finally:
        context.close()


def test_a_replacement_of_traces_and_layout_is_drawn_once(browser):
    calls = _run(browser, """
      const v = new View("a", { _widget_data: [{ type: "bar", y: [1, 2] }],
                                _widget_layout: { title: "old" } });
      send(v, "_py2js_deleteTraces", { delete_inds: [0], trace_edit_id: 7, layout_edit_id: 3 });
      v.state._widget_data = [];
      send(v, "_py2js_relayout", { relayout_data: { title: "new" }, layout_edit_id: 4,
                                   source_view_id: null });
      v.state._widget_layout = { title: "new", height: 300 };
      await sleep(50);
      const before_add = calls.length;
      v.state._widget_data = [{ type: "bar", y: [3, 4, 5] }];
      send(v, "_py2js_addTraces", { trace_data: [{ type: "bar", y: [3, 4, 5] }], trace_edit_id: 8,
                                    layout_edit_id: 5 });
      await sleep(50 + QUIET);
      return { before_add, calls };
    """)
    assert calls["before_add"] == 0  # nothing drawn between the delete and the add
    assert calls["calls"] == [
        ["react", "a", [{"type": "bar", "y": [3, 4, 5]}], {"title": "new", "height": 300}],
        ["trace deltas", "a", 8],
        ["layout delta", "a", 5],
    ]


def test_a_delete_with_no_add_is_drawn_after_the_wait_and_a_layout_change_at_once(browser):
    calls = _run(browser, f"""
      const v = new View("b", {{ _widget_data: [], _widget_layout: {{}} }});
      send(v, "_py2js_deleteTraces", {{ delete_inds: [0], trace_edit_id: 1, layout_edit_id: 1 }});
      await sleep({WAIT_FOR_ADD_MS // 2});
      const waiting = calls.length;
      await sleep({WAIT_FOR_ADD_MS});
      const after_wait = calls.length;
      send(v, "_py2js_update", {{ style_data: {{}}, layout_data: {{ "title.text": "x" }}, trace_edit_id: 2,
                                 layout_edit_id: 2 }});
      await sleep(30 + QUIET);
      return [waiting, after_wait, calls.map((c) => c[0])];
    """)
    waiting, after_wait, kinds = calls
    assert waiting == 0
    assert after_wait == 3  # the react and the two deltas
    assert kinds == ["react", "trace deltas", "layout delta"] * 2


def test_the_views_own_zoom_and_a_removed_view_are_not_drawn(browser):
    calls = _run(browser, """
      const v = new View("c", { _widget_data: [], _widget_layout: {} });
      send(v, "_py2js_relayout", { relayout_data: { "xaxis.range": [0, 1] }, layout_edit_id: 9,
                                   source_view_id: v.viewID });
      const w = new View("d", { _widget_data: [], _widget_layout: {} });
      send(w, "_py2js_relayout", { relayout_data: {}, layout_edit_id: 1, source_view_id: null });
      w.remove();
      send(w, "_py2js_relayout", { relayout_data: {}, layout_edit_id: 2, source_view_id: null });
      await sleep(50);
      return calls;
    """)
    assert calls == [["layout delta", "c", 9], ["purge", "d"]]


def test_the_trace_deltas_compare_plotlys_data_with_the_traces_just_drawn(browser):
    # plotly's delta code reads the model's data again; the model deserializes on every read, so it
    # would compare every array of a fresh copy with plotly's element by element
    checks = _run(browser, """
      const drawn = [];
      Plotly.react = (el, data) => { drawn.push(data); return Promise.resolve(el); };
      const seen = [];
      View.prototype._sendTraceDeltas = function (id) {
        seen.push([id, this.model.get("_widget_data") === drawn[drawn.length - 1],
                   this.model.get("_widget_layout") !== null]);
      };
      const v = new View("e", { _widget_data: [{ type: "heatmap", z: [[1, 2], [3, 4]] }],
                                _widget_layout: { title: "t" } });
      send(v, "_py2js_addTraces", { trace_data: [], trace_edit_id: 3, layout_edit_id: 2 });
      await sleep(50 + QUIET);
      // after the deltas, the model's reads are its own again (a fresh copy each time)
      seen.push(["after", v.model.get("_widget_data") === drawn[0], typeof v.model.get]);
      return seen;
    """)
    assert checks == [[3, True, True], ["after", False, "function"]]


def test_views_report_their_deltas_in_one_message_once_no_figure_is_left_to_draw(browser):
    # each report makes the kernel busy, echo and go idle; the page's handling of those replies
    # delayed the figures still to draw, so every view waits until the page has nothing to draw
    out = _run(browser, """
      View.prototype.touch = function () { calls.push(["touch", this.el.id]); };
      const a = new View("a", { _widget_data: [], _widget_layout: {} });
      const b = new View("b", { _widget_data: [], _widget_layout: {} });
      send(a, "_py2js_addTraces", { trace_data: [], trace_edit_id: 1, layout_edit_id: 1 });
      send(b, "_py2js_deleteTraces", { delete_inds: [0], trace_edit_id: 4, layout_edit_id: 4 });
      await sleep(QUIET + 50);
      const while_b_waits = calls.map((c) => c.slice(0, 2));  // a drawn, b waiting for its add
      send(b, "_py2js_addTraces", { trace_data: [], trace_edit_id: 5, layout_edit_id: 5 });
      await sleep(QUIET / 2);
      const before_quiet = calls.length;
      await sleep(QUIET + 50);
      return { while_b_waits, before_quiet, calls: calls.map((c) => c.length > 2 ? c.slice(0, 3) : c) };
    """)
    assert out["while_b_waits"] == [["react", "a"]]
    assert out["before_quiet"] == 2  # b drawn, nobody reported yet
    assert out["calls"][2:] == [
        ["trace deltas", "a", 1], ["layout delta", "a", 1], ["touch", "a"],
        ["trace deltas", "b", 5], ["layout delta", "b", 5], ["touch", "b"],
    ]


def test_a_held_update_is_drawn_in_one_task_at_its_release_and_a_hold_never_blocks_for_long(browser):
    # the kernel holds the page's draws while it sends one update's figures (an explorer's update)
    out = _run(browser, f"""
      const q = kvlabDrawQueue();
      const kernel = {{}};
      const a = new View("a", {{ _widget_data: [], _widget_layout: {{}} }});
      const b = new View("b", {{ _widget_data: [], _widget_layout: {{}} }});
      const change = (view, id) => send(view, "_py2js_update", {{ style_data: {{}}, layout_data: {{}},
                                                                  trace_edit_id: id, layout_edit_id: id }});
      const reacts = () => calls.filter((c) => c[0] === "react").map((c) => c[1]);
      q.hold(kernel, 1);
      change(a, 1);
      await sleep(30);
      change(b, 1);
      await sleep(30);
      const held = reacts().length;
      q.release(kernel, 7);  // the release of a hold that never arrived changes nothing
      await sleep(30);
      const other_release = reacts().length;
      const tasks = q.tasks;
      q.release(kernel, 1);
      await sleep(30);
      const released = [reacts(), q.tasks - tasks];
      // a hold whose release is late: the views wait MAX_HOLD_MS after the first one, then are drawn
      q.hold(kernel, 2);
      change(a, 2);
      await sleep({MAX_HOLD_MS // 2});
      const waiting = reacts().length;
      await sleep({MAX_HOLD_MS});
      const late = reacts().length;
      change(b, 2);  // still held
      q.release(kernel, 2);
      await sleep(30);
      const after_late = reacts().slice(late);
      // a hold whose release never comes is forgotten after HOLD_EXPIRES_MS
      q.hold(kernel, 3);
      await sleep({HOLD_EXPIRES_MS + 50});
      change(a, 3);
      await sleep(30);
      const expired = reacts().length - late - 1;
      return {{ held, other_release, released, waiting, late, after_late, expired }};
    """)
    assert out["held"] == 0 and out["other_release"] == 0
    assert out["released"] == [["a", "b"], 1]  # both, in one task
    assert out["waiting"] == 2 and out["late"] == 3  # a drawn after the longest wait
    assert out["after_late"] == ["b"]
    assert out["expired"] == 1
