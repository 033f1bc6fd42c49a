"""One control change that updates several figures is drawn in one page task
(:mod:`kvlab.widgets.one_redraw`), in a real JupyterLab and Chromium on lesson 05's admission explorer.

Each change of policy B (three in a row) redraws all five figures of the explorer: three in steps,
two in seconds that the explorer draws after the others (:meth:`kvlab.widgets.explorer.Explorer.later`).
Each used to be drawn in its own page task, and the page rendered a frame between two of them. Now
the kernel holds the page's draws for the whole update and the page draws them together: every
figure is redrawn once, no frame is rendered between the first and the last redraw (the page's
animation frames are counted), and every figure then shows exactly the panel labels and values of
the same explorer driven here in Python.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from kvlab.widgets.admission_explorer import build_admission_explorer
from tests.browser.jupyterlab import error_outputs, open_notebook, run_all_cells
from tests.browser.test_every_notebook import SELECT_JS, STATUS_JS

pytestmark = pytest.mark.browser

NOTEBOOK = "05_sliding_windows_and_admission.ipynb"
FIGURES = ("timeline", "blocks", "gate", "throughput", "ttft")
#: Policy B's settings, in the order the test sets them (the notebook starts with "vllm").
POLICIES = ("exact", "window_plus_chunk", "vllm")

#: Page script: count the page's rendered frames, and record every plotly redraw from now on as
#: [frame it happened in, figure title].
RECORD_JS = """() => {
  window.__frame = 0;
  const tick = () => { window.__frame += 1; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  window.__redraws = [];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    gd.on('plotly_afterplot', () => window.__redraws.push(
      [window.__frame, (gd.layout.title && gd.layout.title.text) || '']));
  }
}"""

#: Page script: every figure's title, its annotations' texts, its traces' names and y values.
FIGURES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
  title: (gd.layout.title && gd.layout.title.text) || '',
  notes: (gd.layout.annotations || []).map(a => a.text),
  traces: gd.data.map(t => ({name: t.name ?? null, y: t.y === undefined ? null : Array.from(t.y)})),
}))"""


def _figures(explorer) -> dict[str, dict]:
    """The explorer's five figures: per title, the panel labels and each trace's name and y values."""
    out = {}
    for name in FIGURES:
        fig = explorer.figures[name]
        out[fig.layout.title.text] = {
            "notes": [a.text for a in fig.layout.annotations],
            "traces": [{"name": t.name, "y": None if t.y is None else np.asarray(t.y).tolist()}
                       for t in fig.data]}
    return out


def _same(value, expected) -> bool:
    """Equal, reading a number as a float (the page has only those) and NaN as equal to NaN."""
    if isinstance(expected, (int, float)) and not isinstance(expected, bool) and value is not None:
        return float(value) == float(expected) or (np.isnan(float(value)) and np.isnan(float(expected)))
    return value == expected


def _assert_shown(page, expected: dict[str, dict]) -> None:
    shown = {f["title"]: f for f in page.evaluate(FIGURES_JS) if f["title"] in expected}
    assert shown.keys() == expected.keys()
    for title, want in expected.items():
        assert shown[title]["notes"] == want["notes"], title
        got_traces = shown[title]["traces"]
        assert [t["name"] for t in got_traces] == [t["name"] for t in want["traces"]], title
        for got, trace in zip(got_traces, want["traces"], strict=True):
            if trace["y"] is None:
                continue
            assert got["y"] is not None and len(got["y"]) == len(trace["y"]), (title, trace["name"])
            wrong = [i for i, (a, b) in enumerate(zip(got["y"], trace["y"], strict=True)) if not _same(a, b)]
            assert wrong == [], f"{title}: {trace['name']} differs at {wrong[:5]}"


def test_each_change_redraws_every_figure_once_in_one_frame_with_the_new_values(lab_server, page):
    open_notebook(page, lab_server.url, NOTEBOOK)
    run_all_cells(page)
    assert error_outputs(page) == [], lab_server.log_tail()
    page.wait_for_function(f"() => ({STATUS_JS})().some(t => t.includes('B · vllm'))", timeout=60_000)
    explorer = build_admission_explorer()  # the same explorer, driven here
    time.sleep(2.0)  # let the first draws and their reports settle
    page.evaluate(RECORD_JS)

    for policy in POLICIES:
        explorer.controls["policy_b"].value = policy
        explorer.refresh()
        assert explorer.last_error is None
        expected = _figures(explorer)
        page.evaluate("() => { window.__redraws = []; }")
        assert page.evaluate(SELECT_JS, ["policy B", policy]) == ""
        page.wait_for_function(f"() => ({STATUS_JS})().some(t => t.includes('B · {policy}'))", timeout=60_000)
        page.wait_for_function(f"() => window.__redraws.length >= {len(FIGURES)}", timeout=60_000)
        time.sleep(2.0)  # anything still to draw would come now

        redraws = page.evaluate("() => window.__redraws")
        titles = [title for _, title in redraws]
        assert sorted(titles) == sorted(expected), redraws  # each of the five figures, once
        frames = {frame for frame, _ in redraws}
        assert len(frames) == 1, f"a frame was rendered between two figures' redraws: {redraws}"
        _assert_shown(page, expected)
    assert page.console_errors == [], page.console_errors
