"""When the page evaluates plotly's shared bundle (:mod:`kvlab.widgets.plotly_bundle`), run in Chromium
with a stand-in for anywidget and for plotly's bundle.

The stand-in keeps anywidget's rule: a model must load its module and return from ``initialize``
within 2 s of being created. The stand-in bundle holds the page's thread for 2.5 s, as plotly's
does on a slow machine. Figures are created the way a cell creates them: the kernel's count of
figures arrives first, then the models, whose modules take a while to load. Evaluating the bundle
while any of them is still loading makes that figure miss its deadline (this is what the page did
before the bundle waited for every announced figure).
"""

from __future__ import annotations

import pytest

from kvlab.widgets.plotly_bundle import FIGURE_ESM, LOADER_ESM, SETTLE_FALLBACK_MS

pytestmark = pytest.mark.browser

#: How long the stand-in bundle holds the page's thread (ms): longer than anywidget's deadline.
BUNDLE_BLOCK_MS = 2500

#: The page's harness: models, anywidget's deadline, a bundle that blocks and records when it ran.
HARNESS_JS = """
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const events = [];
const mark = (what, name) => events.push([what, name, Math.round(performance.now())]);
globalThis.__events = events;
class Model {
  constructor(name, state) { this.name = name; this.state = { ...state }; this.handlers = {}; }
  get(key) { return this.state[key]; }
  set(key, value) { this.state[key] = value;
                    for (const h of this.handlers[`change:${key}`] || []) h(); }
  on(event, h) { (this.handlers[event] ||= []).push(h); }
  off(event, h) { this.handlers[event] = (this.handlers[event] || []).filter((x) => x !== h); }
}
const moduleOf = async (source) =>
  (await import(URL.createObjectURL(new Blob([source], { type: "text/javascript" })))).default;
// anywidget's side of a model: create it now, load its module after loadMs, initialize, and check the
// 2 s deadline (measured, so the check does not depend on which queued task runs first)
function create(model, source, loadMs) {
  const born = performance.now();
  const ready = (async () => {
    await sleep(loadMs);
    const def = await moduleOf(source);
    const widget = typeof def === "function" ? def() : def;
    await widget.initialize({ model });
    const took = performance.now() - born;
    mark(took > 2000 ? "deadline missed" : "initialized", model.name);
    return widget;
  })();
  return {
    ready,
    draw: async () => {
      const widget = await ready;
      const el = { textContent: "" };
      await widget.render({ model, el });
      mark("drawn", el.textContent);
    },
  };
}
const BUNDLE = `
  const start = performance.now();
  while (performance.now() - start < %BLOCK%) {}  // plotly's code, evaluated on a slow machine
  globalThis.__events.push(["bundle evaluated", "", Math.round(start)]);
  export class FigureView {}
  export default () => ({ initialize() {}, render({ model, el }) { el.textContent = model.get("title"); } });
`;
""".replace("%BLOCK%", str(BUNDLE_BLOCK_MS))


def _run(browser, script: str) -> list[list]:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.evaluate(
            "async ([loader, figure]) => { globalThis.LOADER_ESM = loader; globalThis.FIGURE_ESM = figure; }",
            [LOADER_ESM, FIGURE_ESM])
        return page.evaluate(f"async () => {{ {HARNESS_JS}\n{script}\n return events; }}")
    finally:
        context.close()


def _times(events: list[list], what: str) -> list[int]:
    return [t for w, _, t in events if w == what]


def test_the_bundle_waits_until_every_announced_figure_has_initialized(browser):
    # a cell's explorer: the bundle model, then three figures announced and created one after
    # another; the first is drawn while the third is still loading its module
    events = _run(browser, """
      const bundle = new Model("bundle", { bundle: BUNDLE, figures_opened: 0 });
      create(bundle, LOADER_ESM, 0);
      const figures = [];
      for (const [i, loadMs] of [[1, 20], [2, 40], [3, 600]]) {
        bundle.set("figures_opened", i);
        figures.push(create(new Model(`figure ${i}`, { title: `title ${i}` }), FIGURE_ESM, loadMs));
      }
      await figures[0].ready;
      await Promise.all(figures.map((f) => f.draw()));
    """)
    assert [w for w, _, _ in events].count("deadline missed") == 0, events
    assert sorted(n for w, n, _ in events if w == "drawn") == ["title 1", "title 2", "title 3"]
    assert len(_times(events, "bundle evaluated")) == 1
    # the evaluation began after the slowest figure had initialized (600 ms load), not before
    assert _times(events, "bundle evaluated")[0] >= max(_times(events, "initialized")), events


def test_a_figure_the_page_never_creates_holds_the_bundle_back_only_for_the_fallback_wait(browser):
    # the kernel counted two figures, but only one model reaches the page
    events = _run(browser, """
      const bundle = new Model("bundle", { bundle: BUNDLE, figures_opened: 2 });
      create(bundle, LOADER_ESM, 0);
      const figure = create(new Model("figure 1", { title: "only" }), FIGURE_ESM, 10);
      await figure.ready;
      mark("draw asked", "");
      await figure.draw();
    """)
    waited = _times(events, "bundle evaluated")[0] - _times(events, "draw asked")[0]
    assert SETTLE_FALLBACK_MS - 50 <= waited <= SETTLE_FALLBACK_MS + 1500, events
    assert [n for w, n, _ in events if w == "drawn"] == ["only"]


def test_figures_created_after_the_bundle_loaded_draw_without_a_second_evaluation(browser):
    events = _run(browser, """
      const bundle = new Model("bundle", { bundle: BUNDLE, figures_opened: 1 });
      create(bundle, LOADER_ESM, 0);
      await create(new Model("first", { title: "a" }), FIGURE_ESM, 10).draw();
      bundle.set("figures_opened", 2);
      await create(new Model("second", { title: "b" }), FIGURE_ESM, 10).draw();
    """)
    assert [n for w, n, _ in events if w == "drawn"] == ["a", "b"]
    assert len(_times(events, "bundle evaluated")) == 1
    assert [w for w, _, _ in events].count("deadline missed") == 0, events
