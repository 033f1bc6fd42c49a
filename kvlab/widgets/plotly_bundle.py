"""Plotly figure widgets that share one copy of plotly's browser code per page.

plotly's ``FigureWidget`` is an anywidget whose front-end module (``_esm``, plotly.js and its widget
code, about 5 MB of JavaScript) travels in every figure's state. The browser turns each copy into
its own module and compiles it again, so an explorer with four figures sends 20 MB and compiles
plotly.js four times. anywidget gives each model 2 s to load and initialize its module; on a busy
2-core machine the compilations queue up, the later figures miss the deadline and the console
shows ``[anywidget] Failed to initialize model.`` (an unhandled rejection).

Here the bundle travels once per kernel, in :class:`PlotlyBundle` (a hidden model whose
``initialize`` starts loading it and returns at once, so its own deadline is never at stake), and
every :class:`SharedBundleFigureWidget` carries a 1 kB module that waits for the shared one
(``globalThis.__kvlabPlotlyWidget``) before it initializes and renders the figure. The Python side is
plotly's ``FigureWidget`` unchanged.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import anywidget
import plotly
import plotly.graph_objects as go
import traitlets

from kvlab.widgets.one_redraw import ONE_REDRAW_JS

#: plotly's front-end bundle for ``FigureWidget``.
BUNDLE_PATH = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"

#: Shared by both modules: the page-wide promise of plotly's widget (created by whichever runs first).
_SLOT_JS = """
function kvlabPlotlySlot() {
  const g = globalThis;
  if (!g.__kvlabPlotlyWidget) {
    let resolve, reject;
    const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
    g.__kvlabPlotlyWidget = { promise, resolve, reject, loading: false };
  }
  return g.__kvlabPlotlyWidget;
}
"""

#: Module of the bundle model: import plotly's code once per page, make its view draw each update
#: once (:mod:`kvlab.widgets.one_redraw`) and publish its widget.
LOADER_ESM = _SLOT_JS + ONE_REDRAW_JS + """
export default {
  initialize({ model }) {
    const slot = kvlabPlotlySlot();
    if (slot.loading) return;
    slot.loading = true;
    const url = URL.createObjectURL(new Blob([model.get("bundle")], { type: "text/javascript" }));
    import(/* webpackIgnore: true */ url)
      .then((mod) => {
        kvlabOneRedraw(mod.FigureView, globalThis.Plotly);  // plotly's bundle sets window.Plotly
        slot.resolve(mod.default);
      })
      .catch((err) => {
        slot.loading = false;
        slot.reject(err);
        console.error("kvlab: plotly failed to load", err);
      })
      .finally(() => URL.revokeObjectURL(url));
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
      const pending = [];
      const record = {};
      for (const name of COMMANDS) {
        record[name] = () => {
          const value = model.get(name);
          if (value !== null && value !== undefined) pending.push([name, value]);
        };
        model.on(`change:${name}`, record[name]);
      }
      ready = kvlabPlotlySlot().promise.then(async (factory) => {
        const widget = typeof factory === "function" ? await factory() : factory;
        if (widget.initialize) await widget.initialize(ctx);
        for (const name of COMMANDS) model.off(`change:${name}`, record[name]);
        for (const [name, value] of pending) {
          model.set(name, value);
          model.set(name, null);
        }
        return widget;
      });
    },
    async render(ctx) {
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


class SharedBundleFigureWidget(go.FigureWidget):
    """plotly's ``FigureWidget`` with a small front-end module that uses the page's shared bundle.

    Build it like ``go.FigureWidget``; the first one in a process opens the :class:`PlotlyBundle`.
    """

    _esm = FIGURE_ESM

    def __init__(self, *args, **kwargs) -> None:
        shared_bundle()
        super().__init__(*args, **kwargs)


@cache
def shared_bundle() -> PlotlyBundle:
    """The process's :class:`PlotlyBundle` (opened on first use and kept open)."""
    return PlotlyBundle(bundle=BUNDLE_PATH.read_text(encoding="utf-8"))
