"""One browser redraw per figure per update: the page side of :mod:`kvlab.widgets.figure_sync`.

plotly's widget view draws every drawing command from the kernel as it arrives: replacing a
figure's traces and layout (a delete, a relayout and an add message) makes plotly.js redraw the
figure three times, twice with no data. In the browser benchmark (lesson 02, four figures) those
redraws took 360-530 ms of plotly time per control change, the two empty ones 20-50 ms each.

:data:`ONE_REDRAW_JS` changes the drawing methods of plotly's view class (in the page's shared copy
of plotly's bundle, :mod:`kvlab.widgets.plotly_bundle`) so that the commands of one update are drawn
together. The figure's state is still kept by plotly's own model code (``_widget_data`` and
``_widget_layout``, updated by every command before the view sees it); the view only decides when to
draw it:

* a delete of traces waits for the add that follows it (the kernel always sends the replacement as
  delete, then layout, then add), or at most ``WAIT_FOR_ADD_MS``;
* any other command (the add, a layout change, a restyle) draws on the page's next task, so commands
  that arrive together are drawn together;
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
"""

from __future__ import annotations

#: How long a delete of traces waits for the add that replaces them before it is drawn (ms).
WAIT_FOR_ADD_MS = 400
#: How long the page must have had no figure to draw before the views report their deltas (ms).
REPORT_QUIET_MS = 100

#: Page script: ``kvlabOneRedraw(View, Plotly)`` patches plotly's ``FigureView`` class (idempotent).
ONE_REDRAW_JS = """
function kvlabOneRedraw(View, Plotly) {
  if (!View || !Plotly || typeof Plotly.react !== "function" || View.prototype.__kvlabOneRedraw) return;
  const proto = View.prototype;
  proto.__kvlabOneRedraw = true;
  const own = (object, name) => Object.prototype.hasOwnProperty.call(object, name);
  // run f while model.get("_widget_data") returns data (and every other read is the model's own)
  const readingData = (model, data, f) => {
    const mine = own(model, "get"), get = model.get;
    model.get = (name) => name === "_widget_data" ? data : get.call(model, name);
    try { f(); } finally { if (mine) model.get = get; else delete model.get; }
  };
  const drawing = new Set();  // views with a draw scheduled or under way, on the whole page
  const reports = new Map();  // view -> the deltas it has not reported yet: {trace, layout, data}
  let reportTimer = null;
  const reportWhenQuiet = () => {
    clearTimeout(reportTimer);
    if (drawing.size) return;  // the last draw to finish calls again
    reportTimer = setTimeout(() => {
      if (drawing.size) return;
      const due = [...reports];
      reports.clear();
      for (const [view, report] of due) view.__kvlabReport(report);
    }, REPORT_QUIET_MS);
  };
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
    clearTimeout(this.__kvlabTimer);
    drawing.delete(this);
    reports.delete(this);
    reportWhenQuiet();
    return remove.apply(this, arguments);
  };
  proto.__kvlabSchedule = function (delay) {
    clearTimeout(this.__kvlabTimer);
    drawing.add(this);
    clearTimeout(reportTimer);
    this.__kvlabTimer = setTimeout(() => this.__kvlabDraw(), delay);
  };
  proto.__kvlabDraw = function () {
    this.__kvlabTimer = null;
    this.__kvlabWaitingAdd = false;
    const done = () => {
      if (this.__kvlabTimer === null) drawing.delete(this);  // not scheduled again meanwhile
      reportWhenQuiet();
    };
    if (this.__kvlabRemoved) return done();
    const edits = this.__kvlabEdits || {};
    this.__kvlabEdits = {};
    // the view's model deserializes on every get: fresh objects (data arrays are views of the model's)
    const data = this.model.get("_widget_data");
    const layout = this.model.get("_widget_layout");
    if (!layout.height) layout.height = 360;  // as plotly's view draws a figure the first time
    Plotly.react(this.el, data, layout).then(() => {
      if (this.__kvlabRemoved) return;
      const report = reports.get(this) || {};
      if (edits.trace !== undefined) report.trace = edits.trace;
      if (edits.layout !== undefined) report.layout = edits.layout;
      report.data = data;  // plotly's full data now belongs to these traces
      reports.set(this, report);
    }).finally(done);
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
    if (name === "_py2js_deleteTraces") {
      this.__kvlabWaitingAdd = true;
      this.__kvlabSchedule(WAIT_FOR_ADD_MS);
    } else if (name === "_py2js_addTraces" || !this.__kvlabWaitingAdd) {
      this.__kvlabWaitingAdd = false;
      this.__kvlabSchedule(0);
    }
  };
  proto.do_addTraces = command("_py2js_addTraces");
  proto.do_deleteTraces = command("_py2js_deleteTraces");
  proto.do_moveTraces = command("_py2js_moveTraces");
  proto.do_restyle = command("_py2js_restyle");
  proto.do_relayout = command("_py2js_relayout");
  proto.do_update = command("_py2js_update");
}
""".replace("WAIT_FOR_ADD_MS", str(WAIT_FOR_ADD_MS)).replace("REPORT_QUIET_MS", str(REPORT_QUIET_MS))
