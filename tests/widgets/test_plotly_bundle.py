"""plotly's 5 MB front-end bundle travels once per kernel, not once per figure.

With plotly's own ``FigureWidget`` every figure's state carried the whole bundle, and the browser
compiled it once per figure; on a busy machine the later figures missed anywidget's 2 s deadline
("[anywidget] Failed to initialize model." in the console). The browser side is checked by
``tests/browser/test_every_notebook.py``; here, what the kernel sends.
"""

from __future__ import annotations

import plotly.graph_objects as go

from kvlab.widgets import build_kernel_explorer
from kvlab.widgets.explorer import empty_figure_widget
from kvlab.widgets.plotly_bundle import BUNDLE_PATH, FIGURE_ESM, PlotlyBundle, shared_bundle


def test_plotly_own_figure_widget_carries_the_whole_bundle():
    # the problem this module solves: 4.9 MB of JavaScript in every figure's state (plotly 6+)
    assert len(go.FigureWidget().get_state()["_esm"]) == len(BUNDLE_PATH.read_text(encoding="utf-8")) > 10**6


def test_every_explorer_figure_sends_a_small_module_and_one_bundle_per_kernel():
    explorer = build_kernel_explorer(debounce_s=0)
    states = [fig.get_state() for fig in explorer.figures.values()]
    assert len(states) >= 2
    for state in states:
        assert state["_esm"] == FIGURE_ESM and len(state["_esm"]) < 4_000
    bundle = shared_bundle()
    assert isinstance(bundle, PlotlyBundle) and bundle.comm is not None  # open: the page receives it
    assert bundle.get_state()["bundle"] == BUNDLE_PATH.read_text(encoding="utf-8")
    assert shared_bundle() is bundle and empty_figure_widget() is not None and shared_bundle() is bundle


def test_the_figure_module_waits_for_the_shared_bundle_without_blocking_initialize():
    # initialize must return at once (anywidget rejects a model whose initialize takes over 2 s)
    init = FIGURE_ESM[FIGURE_ESM.index("initialize(ctx)"):FIGURE_ESM.index("async render")]
    assert "await kvlabPlotlySlot" not in init and "ready = kvlabPlotlySlot().promise.then" in init
    assert "const widget = await ready" in FIGURE_ESM
