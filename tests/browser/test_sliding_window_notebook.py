"""Lesson 5 in a real JupyterLab and Chromium: run every cell, move the window slider, check the figure.

The admission explorer's gate figure must change to exactly what the library's admission gate asks
for the new window (computed here with :func:`kvlab.serving.admission_need`), and the stall banner of
the uncapped policy must be on screen. A screenshot of the explorer goes to ``tests/_artifacts/``;
with ``KVLAB_UPDATE_SCREENSHOTS=1`` it replaces the one in ``docs/img/`` that the README shows.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kvlab.kvdata import workload
from kvlab.serving import admission_need
from kvlab.widgets.admission_explorer import WINDOWS, admission_config
from tests.browser.jupyterlab import error_outputs, open_notebook, run_all_cells

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "05_sliding_windows_and_admission.ipynb"
UPDATE_DOCS = os.environ.get("KVLAB_UPDATE_SCREENSHOTS") == "1"
SCREENSHOT = ROOT / ("docs/img" if UPDATE_DOCS else "tests/_artifacts") / "sliding_window_admission.png"

#: The first need the gate asked under policy B ("vllm"), read from the plotly graph in the page.
GATE_NEED_JS = """() => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const title = gd.layout && gd.layout.title && gd.layout.title.text;
    if (!title || !title.startsWith('Admission gate')) continue;
    const t = gd.data.find(t => t.name === 'need (admitted)' && t.yaxis === 'y2');
    return t ? {need: t.y[0], rid: t.customdata[0][0]} : null;
  }
  return null;
}"""


def _expected_need(window: int) -> int:
    """What the capped gate asks for the first request of the explorer's default run."""
    cfg = admission_config("gemma-3-27b", window, kv_memory_gib=8.0, kv_cache_dtype="auto", block_size=16,
                           max_model_len=32768, max_num_batched_tokens=2048, profile="vllm-0.20",
                           policy="vllm")
    first = workload("long prompts", 32768)[0]
    return admission_need(cfg, first.prompt_tokens, "vllm").total


def test_window_slider_changes_the_gate_need_as_the_library_computes_it(lab_server, page):
    open_notebook(page, lab_server.url, NOTEBOOK)
    run_all_cells(page)
    assert error_outputs(page) == [], lab_server.log_tail()

    slider = page.locator(".widget-slider", has=page.locator(".widget-label", has_text="window (tok)"))
    slider.scroll_into_view_if_needed()
    readout = slider.locator(".widget-readout")
    assert readout.inner_text().strip() == "1024"
    page.wait_for_function(GATE_NEED_JS, timeout=30_000)
    before = page.evaluate(GATE_NEED_JS)
    assert before["need"] == _expected_need(1024)

    banner = page.locator(".kvlab-banner", has_text="STALLED")
    assert banner.count() == 1 and "uncapped" in banner.inner_text()

    handle = slider.locator(".noUi-handle")
    handle.focus()
    steps = WINDOWS.index(4096) - WINDOWS.index(1024)
    for _ in range(steps):
        page.keyboard.press("ArrowRight")
    assert re.fullmatch(r"4096", readout.inner_text().strip())
    expected = _expected_need(4096)
    page.wait_for_function(f"() => {{ const r = ({GATE_NEED_JS})(); return r && r.need === {expected}; }}",
                           timeout=30_000)
    after = page.evaluate(GATE_NEED_JS)
    assert after["rid"] == before["rid"] and after["need"] == expected > before["need"]

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    explorer = page.locator(".jp-OutputArea-output", has=slider).first
    explorer.screenshot(path=str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 10_000
    widget_errors = [e for e in page.console_errors if "kvlab" in e.lower() or "widget" in e.lower()]
    assert widget_errors == [], page.console_errors
