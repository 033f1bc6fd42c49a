"""plotly's 5 MB front-end bundle travels once per kernel, not once per figure.

With plotly's own ``FigureWidget`` every figure's state carried the whole bundle, and the browser
compiled it once per figure; on a busy machine the later figures missed anywidget's 2 s deadline
("[anywidget] Failed to initialize model." in the console). The browser side is checked by
``tests/browser/test_every_notebook.py`` and ``tests/browser/test_plotly_bundle_order.py``; here,
what the kernel sends.
"""

from __future__ import annotations

import comm
import comm.base_comm
import plotly.graph_objects as go

from kvlab.widgets import build_kernel_explorer
from kvlab.widgets.explorer import empty_figure_widget
from kvlab.widgets.plotly_bundle import (
    BUNDLE_PATH,
    FIGURE_ESM,
    PlotlyBundle,
    SharedBundleFigureWidget,
    shared_bundle,
)


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


def test_the_kernel_counts_each_figure_before_the_page_receives_it(monkeypatch):
    # the page evaluates plotly's bundle only once every counted figure has initialized; a figure
    # sent before its count could be caught loading while the bundle holds the page's thread
    sent: list[tuple[str, str, object]] = []

    class RecordingComm(comm.base_comm.BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            sent.append((msg_type, self.comm_id, (data or {}).get("state", {}).get("figures_opened")))

    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    shared_bundle.cache_clear()
    try:
        first, second = SharedBundleFigureWidget(), SharedBundleFigureWidget()
        bundle = shared_bundle()
        figures = {first.comm.comm_id: "figure 1", second.comm.comm_id: "figure 2"}
        order = []
        for kind, comm_id, count in sent:
            if kind == "comm_msg" and comm_id == bundle.comm.comm_id:
                order.append(("count", count))
            elif kind == "comm_open" and comm_id in figures:
                order.append(figures[comm_id])
        assert order == [("count", 1), "figure 1", ("count", 2), "figure 2"]
    finally:
        shared_bundle().close()
        shared_bundle.cache_clear()
