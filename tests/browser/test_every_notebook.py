"""Every lesson and exercise notebook in a real JupyterLab and Chromium: it opens, runs every cell
without a traceback and leaves the browser console without errors (uncaught promise rejections
included: anywidget reports "Failed to initialize model." that way). Each lesson's explorer then
gets one dropdown change, and its figure must be redrawn for the new setting.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.widgets.stale import STALE_TITLE_PREFIX
from tests.browser.jupyterlab import error_outputs, open_notebook, run_all_cells

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))
EXERCISES = sorted(f"exercises/{p.stem}" for p in (ROOT / "notebooks" / "exercises").glob("*.py"))

#: Page script: set the only dropdown labelled ``label`` to the option shown as ``option``.
SELECT_JS = """([label, option]) => {
  const boxes = [...document.querySelectorAll('.widget-dropdown')].filter(
    d => d.querySelector('.widget-label') && d.querySelector('.widget-label').textContent.trim() === label);
  if (boxes.length !== 1) return `${boxes.length} dropdowns labelled ${label}`;
  const select = boxes[0].querySelector('select');
  const index = [...select.options].findIndex(o => o.textContent.replace(/\u00a0/g, ' ').trim() === option);
  if (index < 0) return `no option ${option} in ${label}`;
  select.selectedIndex = index;
  select.dispatchEvent(new Event('change', {bubbles: true}));
  return '';
}"""

#: Page script: titles of every plotly figure on the page.
TITLES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(
  gd => (gd.layout && gd.layout.title && gd.layout.title.text) || '')"""

#: Page script: text of every explorer status line on the page.
STATUS_JS = """() => [...document.querySelectorAll('.kvlab-status')].map(e => e.textContent)"""


def _serving_status(dtype: str) -> str:
    """The dashboard's status for ``dtype`` at lesson 06's defaults, from the library's capacity."""
    from kvlab.serving import EngineConfig, capacity

    cfg = EngineConfig("gemma-4-31b", kv_cache_memory=16 * 2**30, kv_cache_dtype=dtype,
                       max_model_len=32768, max_num_batched_tokens=2048, tensor_parallel_size=2,
                       profile="vllm-0.33", policy="vllm")
    return f"{dtype}: max concurrency {capacity(cfg).max_concurrency:.2f}"


#: lesson → (dropdown label, option chosen, where the new setting must show: "title" of a figure or
#: "status" line, and the text it must then contain).
INTERACTIONS: dict[str, tuple[str, str, str, object]] = {
    "01_memory_and_capacity": ("KV dtype", "fp8", "title", "bytes per token per layer on one GPU (fp8)"),
    "02_quantization_error": ("KV dtype", "fp8_e5m2", "title", "fp8_e5m2: |error| of head 0"),
    "03_paged_attention_kernels": ("KV dtype", "fp8_e4m3", "title", "fp8_e4m3: output error per query head"),
    "04_block_allocator_and_prefix_caching": ("workload", "chat burst", "title", "chat burst)"),
    "05_sliding_windows_and_admission": ("policy B", "exact", "status", "B · exact"),
    "06_serving_what_if": ("KV dtype", "fp8", "status", lambda: _serving_status("fp8")),
}


#: Longest a notebook may take to run in the browser (lesson 07 generates text with a real model:
#: over 3 minutes on a busy 2-core machine).
RUN_TIMEOUT_MS = 600_000


def _run(page, lab_server, name: str) -> None:
    open_notebook(page, lab_server.url, f"{name}.ipynb")
    run_all_cells(page, timeout_ms=RUN_TIMEOUT_MS)
    assert error_outputs(page) == [], f"{name} showed a traceback\n{lab_server.log_tail()}"


@pytest.mark.parametrize("name", EXERCISES)
def test_exercise_notebook_runs_without_errors(lab_server, page, name):
    _run(page, lab_server, name)
    assert page.console_errors == [], page.console_errors


@pytest.mark.parametrize("name", LESSONS)
def test_lesson_runs_and_its_explorer_redraws_without_errors(lab_server, page, name):
    _run(page, lab_server, name)
    if name in INTERACTIONS:
        label, option, where, expected = INTERACTIONS[name]
        expected = expected() if callable(expected) else expected
        script = TITLES_JS if where == "title" else STATUS_JS
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length > 0",
                               timeout=60_000)
        assert not any(expected in t for t in page.evaluate(script)), "the setting was already on screen"
        assert page.evaluate(SELECT_JS, [label, option]) == ""
        page.wait_for_function(f"() => ({script})().some(t => t.includes({expected!r}))", timeout=60_000)
        titles = page.evaluate(TITLES_JS)
        assert not any(t.startswith(STALE_TITLE_PREFIX) for t in titles), titles
        assert page.locator(".kvlab-status-error").count() == 0
    assert page.console_errors == [], page.console_errors


#: CPU slow-down of the page in the test below (Chrome DevTools' throttling: a busy classroom laptop).
SLOW_CPU_RATE = 4


def test_figures_initialize_on_a_slow_machine(lab_server, page):
    """Lesson 03's explorer (four figures) on a page with its CPU slowed down 4×.

    With plotly's own ``FigureWidget`` each figure compiled the 5 MB plotly bundle again and missed
    anywidget's 2 s deadline: "[anywidget] Failed to initialize model." once per figure. With one
    shared bundle evaluated as soon as it arrived, a figure still loading its module when the
    evaluation began (7 s at this slow-down) missed it too, on some runs only.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": SLOW_CPU_RATE})
    _run(page, lab_server, "03_paged_attention_kernels")
    try:
        page.wait_for_function(f"() => ({TITLES_JS})().filter(t => t).length >= 4", timeout=300_000)
    except PlaywrightTimeoutError:
        pytest.fail(f"fewer than 4 figures drawn in 300 s: titles {page.evaluate(TITLES_JS)}, "
                    f"console errors {page.console_errors}")
    assert page.console_errors == [], page.console_errors
