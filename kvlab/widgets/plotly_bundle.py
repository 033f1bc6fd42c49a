"""Plotly figure widgets that share one copy of plotly's browser code per page.

plotly's ``FigureWidget`` is an anywidget whose front-end module (``_esm``, plotly.js and its widget
code, about 5 MB of JavaScript) travels in every figure's state. The browser turns each copy into
its own module and compiles it again, so an explorer with four figures sends 20 MB and compiles
plotly.js four times.

Here the bundle travels once per kernel, in :class:`PlotlyBundle` (a hidden model), and every
:class:`SharedBundleFigureWidget` carries a 1 kB module that waits for the shared one
(``globalThis.__kvlabPlotlyWidget``) before it initializes and renders the figure. The Python side is
plotly's ``FigureWidget`` unchanged.

**When the bundle is evaluated.** anywidget gives each model 2 s, from the moment the page creates it,
to load its module and return from ``initialize``; otherwise the console shows ``[anywidget] Failed
to initialize model.`` and the figure never appears. Evaluating plotly's bundle holds the page's only
thread for 1.3 s on a quick machine and 7 s with the CPU slowed 4× (a busy classroom laptop), so any
model created but not yet initialized when it starts misses its deadline. The page therefore starts
it only when (1) a figure asks to be drawn, which the kernel sends after the figures of a cell exist,
and (2) every figure the kernel has opened has initialized: the kernel counts its figures in
``PlotlyBundle.figures_opened`` *before* opening each one, so the page never sees a figure it was not
told about. A figure that never initializes (closed at once, or its construction failed) holds the
bundle back for at most ``SETTLE_FALLBACK_MS`` after the last sign of progress.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import anywidget
import plotly
import plotly.graph_objects as go
import traitlets
from plotly.serializers import _js_to_py

from kvlab.widgets.grid_transport import GRID_ROWS_JS, grid_to_js
from kvlab.widgets.one_redraw import ONE_REDRAW_JS

#: plotly's front-end bundle for ``FigureWidget``.
BUNDLE_PATH = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"

#: Longest the page waits, after its last figure initialized or was announced, for a figure the
#: kernel announced but the page never initialized (ms).
SETTLE_FALLBACK_MS = 3000

#: Shared by both modules: the page-wide state of plotly's widget (created by whichever runs first)
#: and the rule for when its bundle may be evaluated (the module docstring says why).
_SLOT_JS = """
function kvlabPlotlySlot() {
  const g = globalThis;
  if (!g.__kvlabPlotlyWidget) {
    let resolve, reject;
    const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
    g.__kvlabPlotlyWidget = {
      promise, resolve, reject,
      state: "waiting",         // then "loading", "loaded" or "failed"
      announced: new Map(),     // bundle model (one per kernel) -> figures its kernel opened
      initialized: 0,           // figures on this page whose initialize has run
      wanted: false,            // a figure asked to be drawn
      load: null,               // set by the bundle model's module: evaluates the bundle
      timer: null,
    };
  }
  return g.__kvlabPlotlyWidget;
}

// Called on every sign of progress (a figure announced, initialized or drawn). Never evaluates at
// once: the caller's own initialize must finish first, so the decision runs in a later task.
function kvlabPlotlyMaybeLoad(slot) {
  if (slot.state !== "waiting" || !slot.wanted || !slot.load) return;
  const pending = () => [...slot.announced.values()].reduce((a, b) => a + b, 0) > slot.initialized;
  const settled = !pending();
  clearTimeout(slot.timer);
  slot.timer = setTimeout(() => {
    if (slot.state !== "waiting") return;
    if (settled && pending()) return kvlabPlotlyMaybeLoad(slot);  // a figure came meanwhile
    slot.load();
  }, settled ? 0 : SETTLE_FALLBACK_MS);
}
""".replace("SETTLE_FALLBACK_MS", str(SETTLE_FALLBACK_MS))

#: Module of the bundle model: remember how many figures its kernel opened, and how to import
#: plotly's code (once per page), make its view draw each update once (:mod:`kvlab.widgets.one_redraw`)
#: and its model read 2-D grids as rows (:mod:`kvlab.widgets.grid_transport`), and publish its widget.
LOADER_ESM = _SLOT_JS + ONE_REDRAW_JS + GRID_ROWS_JS + """
export default {
  initialize({ model }) {
    const slot = kvlabPlotlySlot();
    const count = () => {
      slot.announced.set(model, model.get("figures_opened"));
      kvlabPlotlyMaybeLoad(slot);
    };
    model.on("change:figures_opened", count);
    // the kernel holds the page's draws while it sends one update's figures (kvlab.widgets.one_redraw)
    model.on("msg:custom", (msg) => {
      const draws = msg && msg.kvlab_draws;
      if (draws === "hold") kvlabDrawQueue().hold(model, msg.hold);
      else if (draws === "release") kvlabDrawQueue().release(model, msg.hold);
    });
    if (!slot.load) {
      slot.load = () => {
        slot.state = "loading";
        const url = URL.createObjectURL(new Blob([model.get("bundle")], { type: "text/javascript" }));
        import(/* webpackIgnore: true */ url)
          .then((mod) => {
            kvlabOneRedraw(mod.FigureView, globalThis.Plotly);  // plotly's bundle sets window.Plotly
            kvlabGridModel(mod.FigureModel);
            slot.state = "loaded";
            slot.resolve(mod.default);
          })
          .catch((err) => {
            slot.state = "failed";
            slot.reject(err);
            console.error("kvlab: plotly failed to load", err);
          })
          .finally(() => URL.revokeObjectURL(url));
      };
    }
    count();
  },
};
"""

#: Module of every figure: plotly's own widget, once the shared bundle is there. Both modules are
#: factories, as plotly's is: anywidget calls the factory once per model, so each figure keeps its
#: own plotly widget. Until plotly's code has initialized the figure, the kernel's drawing commands
#: (``_py2js_*``: add/delete traces, restyle, relayout…) are recorded and then replayed in order, as
#: plotly would have received them.
FIGURE_ESM = _SLOT_JS + """
const COMMANDS = ["_py2js_addTraces", "_py2js_deleteTraces", "_py2js_moveTraces", "_py2js_restyle",
                  "_py2js_relayout", "_py2js_update", "_py2js_animate", "_py2js_removeLayoutProps",
                  "_py2js_removeTraceProps"];

export default () => {
  let ready = null;
  return {
    initialize(ctx) {
      // return at once (anywidget's 2 s deadline); plotly's initialize runs when its code is loaded
      const model = ctx.model;
      const slot = kvlabPlotlySlot();
      const pending = [];
      const record = {};
      for (const name of COMMANDS) {
        record[name] = () => {
          const value = model.get(name);
          if (value !== null && value !== undefined) pending.push([name, value]);
        };
        model.on(`change:${name}`, record[name]);
      }
      ready = slot.promise.then(async (factory) => {
        const widget = typeof factory === "function" ? await factory() : factory;
        if (widget.initialize) await widget.initialize(ctx);
        for (const name of COMMANDS) model.off(`change:${name}`, record[name]);
        for (const [name, value] of pending) {
          model.set(name, value);
          model.set(name, null);
        }
        return widget;
      });
      slot.initialized += 1;
      kvlabPlotlyMaybeLoad(slot);
    },
    async render(ctx) {
      const slot = kvlabPlotlySlot();
      slot.wanted = true;
      kvlabPlotlyMaybeLoad(slot);
      const widget = await ready;
      return widget.render(ctx);
    },
  };
};
"""


class PlotlyBundle(anywidget.AnyWidget):
    """Hidden model that carries plotly's front-end bundle to the page once (never displayed)."""

    _esm = LOADER_ESM
    bundle = traitlets.Unicode("").tag(sync=True)
    #: Figures this kernel has opened (each counted before its model is sent to the page).
    figures_opened = traitlets.Int(0).tag(sync=True)
    #: Holds asked of the page so far (each hold's id).
    _holds = 0

    def hold_draws(self) -> int:
        """Ask the page to hold the figures' draws until :meth:`release_draws` of the id returned: the
        figures of one update are then drawn in one page task, one frame for all
        (:mod:`kvlab.widgets.one_redraw`; the page waits at most ``MAX_HOLD_MS`` after a figure
        arrived, and forgets a hold after ``HOLD_EXPIRES_MS``)."""
        self._holds += 1
        self.send({"kvlab_draws": "hold", "hold": self._holds})
        return self._holds

    def release_draws(self, hold: int) -> None:
        """End the hold ``hold`` (from :meth:`hold_draws`): the page draws what it held, in one task."""
        self.send({"kvlab_draws": "release", "hold": hold})


#: Serializers of the traits that carry traces (plotly's own, except for 2-D arrays).
_GRIDS = dict(to_json=grid_to_js, from_json=_js_to_py)


class SharedBundleFigureWidget(go.FigureWidget):
    """plotly's ``FigureWidget`` with a small front-end module that uses the page's shared bundle,
    and 2-D numeric arrays sent to the page as binary grids (:mod:`kvlab.widgets.grid_transport`).

    Build it like ``go.FigureWidget``; the first one in a process opens the :class:`PlotlyBundle`.
    """

    _esm = FIGURE_ESM

    # the figure's data, and the messages that carry traces, send 2-D arrays as binary grids
    _widget_data = traitlets.List().tag(sync=True, **_GRIDS)
    _py2js_addTraces = traitlets.Dict(allow_none=True).tag(sync=True, **_GRIDS)
    _py2js_restyle = traitlets.Dict(allow_none=True).tag(sync=True, **_GRIDS)
    _py2js_update = traitlets.Dict(allow_none=True).tag(sync=True, **_GRIDS)

    def __init__(self, *args, **kwargs) -> None:
        bundle = shared_bundle()
        bundle.figures_opened += 1  # before this figure's model is sent (the module docstring says why)
        super().__init__(*args, **kwargs)


@cache
def shared_bundle() -> PlotlyBundle:
    """The process's :class:`PlotlyBundle` (opened on first use and kept open)."""
    return PlotlyBundle(bundle=BUNDLE_PATH.read_text(encoding="utf-8"))
