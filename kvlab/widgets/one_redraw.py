"""One browser redraw per figure per update, and one page task for all the figures of an update:
the page side of :mod:`kvlab.widgets.figure_sync`.

plotly's widget view draws every drawing command from the kernel as it arrives: replacing a
figure's traces and layout (a delete, a relayout and an add message) makes plotly.js redraw the
figure three times, twice with no data. In the browser benchmark (lesson 02, four figures) those
redraws took 360-530 ms of plotly time per control change, the two empty ones 20-50 ms each. And
each figure of an update was drawn in its own page task, so the page rendered a frame (style, layout
and paint of the whole notebook, 20-50 ms in lesson 05) between two figures.

:data:`ONE_REDRAW_JS` changes the drawing methods of plotly's view class (in the page's shared copy
of plotly's bundle, :mod:`kvlab.widgets.plotly_bundle`) so that the commands of one update are drawn
together. The figure's state is still kept by plotly's own model code (``_widget_data`` and
``_widget_layout``, updated by every command before the view sees it); the view only decides when to
draw it:

* a view with a command to draw joins the page's queue of views to draw (``kvlabDrawQueue``);
  the queue draws every view in it in one page task, so the page renders one frame for them all;
* while the kernel holds the page's draws (an explorer's update, from its start to its last figure,
  deferred views included: :meth:`kvlab.widgets.plotly_bundle.PlotlyBundle.hold_draws`), the queue
  waits for the release, but never longer than ``MAX_HOLD_MS`` after the first view joined it: the
  views then drawn show the model's state at that moment (every command received so far), and the
  rest is drawn at the release. Messages from the kernel reach the page in the order they were
  sent, so at the release every command of the update has been applied to the models. A hold is
  forgotten ``HOLD_EXPIRES_MS`` after it opened (a lost release never holds the page again), and a
  release names its hold (one whose hold never arrived changes nothing);
* without a hold (a figure updated from a cell), the queue draws on the page's next task, so
  commands that arrive together are drawn together;
* a delete of traces waits for the add that follows it (the kernel always sends the replacement as
  delete, then layout, then add), or at most ``WAIT_FOR_ADD_MS``;
* the draw is one ``Plotly.react`` of the model's traces and layout (fresh copies: the view's model
  deserializes them on every read);
* the view then reports the figure's full values to the kernel as plotly's commands do
  (``_js2py_traceDeltas`` / ``_js2py_layoutDelta`` with the last edit ids), but only once no figure
  on the page has had anything to draw for ``REPORT_QUIET_MS``, and both in one message. Each
  message makes the kernel busy, echo the values and go idle, and the page's handling of those
  replies (JupyterLab's kernel status, ipywidgets' echo) delayed the next figures' draws. The trace
  deltas are computed against the traces last drawn rather than another fresh copy (plotly compares
  each array of the copy with its own element by element: 70–100 ms for lesson 02's heatmaps);
* a relayout that this view made itself (the user zoomed) is not drawn again, as in plotly;
* a view that was removed (its output cleared) draws nothing: plotly's view never stops listening,
  and drawing into a purged plot throws.

Holds are counted per kernel (per bundle model) but wait page-wide: with two notebooks open, one
kernel's update can delay the other's figures by at most ``MAX_HOLD_MS``.
"""

from __future__ import annotations

#: How long a delete of traces waits for the add that replaces them before it is drawn (ms).
WAIT_FOR_ADD_MS = 400
#: How long the page must have had no figure to draw before the views report their deltas (ms).
REPORT_QUIET_MS = 100
#: Longest a view waits for the kernel's hold to be released before it is drawn anyway (ms).
MAX_HOLD_MS = 500
#: A hold whose release has not come this long after it opened is forgotten (ms): a release can be
#: lost (a hold sent before the page's bundle model listened, a kernel that died mid-update).
HOLD_EXPIRES_MS = 3000

#: Page script: ``kvlabDrawQueue()`` is the page's queue of views to draw (one per page, created by
#: whichever module asks first; the bundle model's module calls its ``hold(owner)`` and
#: ``release(owner)``), and ``kvlabOneRedraw(View, Plotly)`` patches plotly's ``FigureView`` class
#: to draw through it (idempotent).
ONE_REDRAW_JS = """
function kvlabDrawQueue() {
  const g = globalThis;
  if (g.__kvlabDrawQueue) return g.__kvlabDrawQueue;
  const q = g.__kvlabDrawQueue = {
    holds: new Map(),   // owner (a kernel's bundle model) -> Map(hold id -> when it opened)
    views: new Set(),   // views with something to draw
    drawing: 0,         // draws whose Plotly.react has not settled yet
    tasks: 0,           // page tasks that drew views (for tests)
    flushTimer: null,
    maxTimer: null,
    settled: () => {},  // called when a draw settles (set by kvlabOneRedraw)
  };
  const held = () => {
    const now = performance.now();
    for (const [owner, open] of q.holds) {
      for (const [id, since] of open) if (now - since > HOLD_EXPIRES_MS) open.delete(id);
      if (!open.size) q.holds.delete(owner);
    }
    return q.holds.size > 0;
  };
  // draw every view in the queue, in this task; a view waiting for its add stays
  q.flush = () => {
    clearTimeout(q.flushTimer);
    clearTimeout(q.maxTimer);
    q.flushTimer = q.maxTimer = null;
    const ready = [...q.views].filter((view) => !view.__kvlabWaitingAdd);
    if (ready.length) q.tasks += 1;
    for (const view of ready) {
      q.views.delete(view);
      view.__kvlabDraw();
    }
  };
  // a view joined the queue, or a hold or a wait ended: draw now, or when the hold ends
  q.request = () => {
    if (!q.views.size) return q.settled();
    if (held()) {
      if (q.maxTimer === null) q.maxTimer = setTimeout(q.flush, MAX_HOLD_MS);
    } else if (q.flushTimer === null) {
      q.flushTimer = setTimeout(q.flush, 0);
    }
  };
  q.hold = (owner, id) => {
    if (!q.holds.has(owner)) q.holds.set(owner, new Map());
    q.holds.get(owner).set(id, performance.now());
  };
  q.release = (owner, id) => {  // a release whose hold never arrived changes nothing
    const open = q.holds.get(owner);
    if (open) {
      open.delete(id);
      if (!open.size) q.holds.delete(owner);
    }
    q.request();
  };
  return q;
}

// ``next`` (a figure's traces or layout, fresh from the model) with every array equal to the one at
// the same place in ``prev`` (what was drawn last) replaced by ``prev``'s own object. Arrays of
// numbers or strings, and arrays of them (a grid's rows, customdata), compare element by element (NaN
// equal to NaN); objects and arrays of objects (traces, annotations) are walked key by key, and one
// whose every part is ``prev``'s is replaced by ``prev``'s too. Plotly.react takes any new array (or
// template) object as new data, and then recalculates the whole figure; given the same objects, it
// restyles a change of names, hover text or style alone without recalculating.
function kvlabSameArrays(next, prev) {
  const isArray = (v) => Array.isArray(v) || ArrayBuffer.isView(v);
  const plain = (v) => v !== null && typeof v === "object" && !isArray(v);
  const equal = (a, b) => {
    if (a === b) return true;
    if (!isArray(b) || a.length !== b.length || Array.isArray(a) !== Array.isArray(b)) return false;
    if (!Array.isArray(a) && a.constructor !== b.constructor) return false;
    for (let i = 0; i < a.length; i++) {
      const x = a[i], y = b[i];
      if (x === y || (x !== x && y !== y)) continue;
      if (!isArray(x) || !equal(x, y)) return false;
    }
    return true;
  };
  // n, with its parts equal to p's replaced by p's; p itself when every part is p's (an object or a
  // list of objects: a template, a colour bar, annotations)
  const same = (n, p) => {
    if (p === undefined || p === null || n === p) return p === undefined || p === null ? n : p;
    if (isArray(n)) {
      if (equal(n, p)) return p;
      if (!Array.isArray(n) || !Array.isArray(p)) return n;
      let all = n.length === p.length;
      for (let i = 0; i < n.length; i++) {
        if (i < p.length && plain(n[i]) && plain(p[i])) n[i] = same(n[i], p[i]);
        all = all && n[i] === p[i];
      }
      return all ? p : n;
    }
    if (!plain(n) || !plain(p)) return n;
    const keys = Object.keys(n);
    let all = keys.length === Object.keys(p).length;
    for (const key of keys) {
      n[key] = same(n[key], p[key]);
      all = all && n[key] === p[key];
    }
    return all ? p : n;
  };
  return same(next, prev);
}

function kvlabOneRedraw(View, Plotly) {
  if (!View || !Plotly || typeof Plotly.react !== "function" || View.prototype.__kvlabOneRedraw) return;
  const proto = View.prototype;
  proto.__kvlabOneRedraw = true;
  const queue = kvlabDrawQueue();
  const own = (object, name) => Object.prototype.hasOwnProperty.call(object, name);
  // run f while model.get("_widget_data") returns data (and every other read is the model's own)
  const readingData = (model, data, f) => {
    const mine = own(model, "get"), get = model.get;
    model.get = (name) => name === "_widget_data" ? data : get.call(model, name);
    try { f(); } finally { if (mine) model.get = get; else delete model.get; }
  };
  const reports = new Map();  // view -> the deltas it has not reported yet: {trace, layout, data}
  let reportTimer = null;
  const reportWhenQuiet = () => {
    clearTimeout(reportTimer);
    if (queue.views.size || queue.drawing) return;  // the last draw to settle calls again
    reportTimer = setTimeout(() => {
      if (queue.views.size || queue.drawing) return;
      const due = [...reports];
      reports.clear();
      for (const [view, report] of due) view.__kvlabReport(report);
    }, REPORT_QUIET_MS);
  };
  queue.settled = reportWhenQuiet;
  proto.__kvlabReport = function (report) {
    if (this.__kvlabRemoved) return;
    // both deltas in one message to the kernel (plotly's view sends one message for each)
    const mine = own(this, "touch"), touch = this.touch;
    this.touch = () => {};
    try {
      if (report.trace !== undefined) {
        // plotly's delta code reads the model's data again (new copies of every array, compared with
        // plotly's element by element): let it read the arrays just drawn, equal by identity
        readingData(this.model, report.data, () => this._sendTraceDeltas(report.trace));
      }
      if (report.layout !== undefined) this._sendLayoutDelta(report.layout);
    } finally { if (mine) this.touch = touch; else delete this.touch; }
    if (typeof this.touch === "function") this.touch();
  };
  const remove = proto.remove;
  proto.remove = function () {
    this.__kvlabRemoved = true;
    clearTimeout(this.__kvlabAddTimer);
    queue.views.delete(this);
    reports.delete(this);
    reportWhenQuiet();
    return remove.apply(this, arguments);
  };
  proto.__kvlabDraw = function () {
    this.__kvlabWaitingAdd = false;
    clearTimeout(this.__kvlabAddTimer);
    if (this.__kvlabRemoved) return reportWhenQuiet();
    const edits = this.__kvlabEdits || {};
    this.__kvlabEdits = {};
    // the view's model deserializes on every get: fresh objects (data arrays are views of the model's);
    // arrays equal to those drawn last are passed as the very objects drawn, so that Plotly.react
    // recomputes only what changed (a change of style alone is restyled, not recalculated)
    const data = kvlabSameArrays(this.model.get("_widget_data"), this.__kvlabDrawn);
    const layout = kvlabSameArrays(this.model.get("_widget_layout"), this.__kvlabDrawnLayout);
    this.__kvlabDrawn = data;
    this.__kvlabDrawnLayout = layout;
    if (!layout.height) layout.height = 360;  // as plotly's view draws a figure the first time
    queue.drawing += 1;
    Promise.resolve(Plotly.react(this.el, data, layout)).then(() => {
      if (this.__kvlabRemoved) return;
      const report = reports.get(this) || {};
      if (edits.trace !== undefined) report.trace = edits.trace;
      if (edits.layout !== undefined) report.layout = edits.layout;
      report.data = data;  // plotly's full data now belongs to these traces
      reports.set(this, report);
    }).finally(() => {
      queue.drawing -= 1;
      reportWhenQuiet();
    });
  };
  const command = (name) => function () {
    const msg = this.model.get(name);
    if (msg === null || msg === undefined || this.__kvlabRemoved) return;
    if (name === "_py2js_relayout" && msg.source_view_id === this.viewID) {
      this._sendLayoutDelta(msg.layout_edit_id);  // this view's own zoom, already on screen
      return;
    }
    const edits = this.__kvlabEdits = this.__kvlabEdits || {};
    if (msg.trace_edit_id !== undefined) edits.trace = msg.trace_edit_id;
    if (msg.layout_edit_id !== undefined) edits.layout = msg.layout_edit_id;
    clearTimeout(reportTimer);
    queue.views.add(this);
    if (name === "_py2js_deleteTraces") {
      this.__kvlabWaitingAdd = true;
      clearTimeout(this.__kvlabAddTimer);
      this.__kvlabAddTimer = setTimeout(() => {
        this.__kvlabWaitingAdd = false;
        queue.request();
      }, WAIT_FOR_ADD_MS);
    } else if (name === "_py2js_addTraces") {
      this.__kvlabWaitingAdd = false;
      clearTimeout(this.__kvlabAddTimer);
    }
    queue.request();
  };
  proto.do_addTraces = command("_py2js_addTraces");
  proto.do_deleteTraces = command("_py2js_deleteTraces");
  proto.do_moveTraces = command("_py2js_moveTraces");
  proto.do_restyle = command("_py2js_restyle");
  proto.do_relayout = command("_py2js_relayout");
  proto.do_update = command("_py2js_update");
}
""".replace("WAIT_FOR_ADD_MS", str(WAIT_FOR_ADD_MS)).replace("REPORT_QUIET_MS", str(REPORT_QUIET_MS)).replace(
    "MAX_HOLD_MS", str(MAX_HOLD_MS)).replace("HOLD_EXPIRES_MS", str(HOLD_EXPIRES_MS))
