"""Interaction latency of every explorer in a real browser: JupyterLab 4 in Chromium, on this machine.

For each lesson with an explorer, the notebook is opened and run (Run All Cells), then one of the
explorer's dropdowns is changed ``--repeats`` times (cycling through its options). Each change is made
in the page (the ``<select>`` gets its new value and a ``change`` event, as a click does); the latency
is the time from that event to the last redraw of a plotly figure it caused (``plotly_afterplot``,
in the page's clock), which covers the debounce delay, the kernel's update, the messages to the page
and plotly.js drawing. A redraw counts when it comes within 1.5 s of the previous one; a change with
no redraw within 60 s is an error.

Target (2 CPU cores): median ≤ 300 ms from a control change to the figure redrawn.

    python benchmarks/widgets_browser_bench.py [--repeats 6] [--only 02_quantization_error]
                                               [--out benchmarks/results/widgets_browser.csv]

Needs Chromium (``$CHROMIUM`` or ``/usr/bin/chromium``) and Playwright (``pip install 'kvlab[dev]'``).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.jupyterlab import (  # noqa: E402
    CHROMIUM_ARGS,
    LabServer,
    copy_notebooks,
    error_outputs,
    find_chromium,
    open_notebook,
    run_all_cells,
)

TARGET_MEDIAN_MS = 300.0
#: How long the page must stay without a redraw before a change counts as drawn (ms).
SETTLE_MS = 1500
#: lesson → (explorer, the dropdown's label, the options cycled through).
INTERACTIONS: dict[str, tuple[str, str, list[str]]] = {
    "01_memory_and_capacity": ("memory", "KV dtype", ["fp8", "int8_per_token_head", "auto"]),
    "02_quantization_error": ("quantization", "KV dtype", ["fp8_e4m3", "bfloat16", "int8_per_token_head"]),
    "03_paged_attention_kernels": ("kernel (reference)", "KV dtype", ["fp8_e4m3", "bfloat16",
                                                                      "int8_per_token_head"]),
    "04_block_allocator_and_prefix_caching": ("block_map", "workload", ["chat burst", "long prompts",
                                                                        "shared system prompt"]),
    "05_sliding_windows_and_admission": ("admission", "policy B", ["exact", "window_plus_chunk", "vllm"]),
    "06_serving_what_if": ("serving dashboard", "KV dtype", ["fp8", "int8_per_token_head", "auto"]),
}

#: Page script: listen to every plotly figure's redraws (idempotent).
LISTEN_JS = """() => {
  window.__kvlabDraws = window.__kvlabDraws || [];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    if (gd.__kvlabListening || typeof gd.on !== 'function') continue;
    gd.__kvlabListening = true;
    gd.on('plotly_afterplot', () => window.__kvlabDraws.push(performance.now()));
  }
  return document.querySelectorAll('.js-plotly-plot').length;
}"""

#: Page script: set the dropdown labelled ``label`` to ``option`` and return the time of the event.
CHANGE_JS = """([label, option]) => {
  const boxes = [...document.querySelectorAll('.widget-dropdown')].filter(
    d => d.querySelector('.widget-label') && d.querySelector('.widget-label').textContent.trim() === label);
  if (boxes.length !== 1) return {error: `${boxes.length} dropdowns labelled ${label}`};
  const select = boxes[0].querySelector('select');
  const index = [...select.options].findIndex(o => o.textContent.replace(/\u00a0/g, ' ').trim() === option);
  if (index < 0) return {error: `no option ${option} in ${label}`};
  window.__kvlabDraws = [];
  const t0 = performance.now();
  select.selectedIndex = index;
  select.dispatchEvent(new Event('change', {bubbles: true}));
  return {t0};
}"""


def measure_change(page, label: str, option: str, timeout_s: float = 60.0) -> float:
    """Latency of one dropdown change: ms from the ``change`` event to the last redraw it caused."""
    page.evaluate(LISTEN_JS)
    started = page.evaluate(CHANGE_JS, [label, option])
    if "error" in started:
        raise RuntimeError(started["error"])
    t0 = started["t0"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
        draws, now = page.evaluate("() => [window.__kvlabDraws, performance.now()]")
        after = [d for d in draws if d >= t0]
        if after and now - after[-1] >= SETTLE_MS:
            return after[-1] - t0
    raise RuntimeError(f"no figure redrawn within {timeout_s:.0f} s after {label} = {option}")


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation."""
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def bench(lessons: list[str], repeats: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("Chromium not found: install it (apt-get install chromium) or set CHROMIUM")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "root", Path(tmp) / "home"
        home.mkdir()
        copy_notebooks(ROOT / "notebooks", root)
        server = LabServer(root, home)
        server.start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                for lesson in lessons:
                    name, label, options = INTERACTIONS[lesson]
                    context = browser.new_context(viewport={"width": 1400, "height": 1800})
                    page = context.new_page()
                    console_errors: list[str] = []
                    page.on("console", lambda m, errs=console_errors: errs.append(m.text)
                            if m.type == "error" else None)
                    open_notebook(page, server.url, f"{lesson}.ipynb")
                    run_all_cells(page)
                    tracebacks = error_outputs(page)
                    if tracebacks:
                        raise RuntimeError(f"{lesson} raised while running: {tracebacks[0][:500]}")
                    times = []
                    try:
                        for i in range(repeats):
                            times.append(measure_change(page, label, options[i % len(options)]))
                    except RuntimeError as exc:  # recorded in the table, the other explorers still run
                        rows.append(dict(kind="browser", name=name, lesson=lesson, control=label,
                                         n=len(times), error=str(exc), console_errors=len(console_errors)))
                        print(f"{name:<20}{label:<12} ERROR {exc}", flush=True)
                        context.close()
                        continue
                    rows.append(dict(kind="browser", name=name, lesson=lesson, control=label, n=len(times),
                                     median_ms=statistics.median(times), p95_ms=percentile(times, 95),
                                     max_ms=max(times), console_errors=len(console_errors), error=""))
                    print(f"{name:<20}{label:<12}{rows[-1]['median_ms']:>9.0f}{rows[-1]['p95_ms']:>9.0f}"
                          f"{rows[-1]['max_ms']:>9.0f}  " + " ".join(f"{t:.0f}" for t in times), flush=True)
                    context.close()
                browser.close()
        finally:
            server.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=6, help="changes per explorer")
    parser.add_argument("--only", action="append", choices=sorted(INTERACTIONS), help="lessons to run")
    parser.add_argument("--label", default="", help="name of the version measured (a CSV column)")
    parser.add_argument("--append", action="store_true", help="add rows to --out instead of replacing it")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "widgets_browser.csv"))
    args = parser.parse_args(argv)
    machine = dict(cpus=os.cpu_count(), load_1min=round(os.getloadavg()[0], 2), label=args.label)
    print(f"CPU cores {machine['cpus']}, load average at start {machine['load_1min']}")
    print(f"{'explorer':<20}{'control':<12}{'median':>9}{'p95':>9}{'max':>9}  each change (ms); "
          f"target median ≤ {TARGET_MEDIAN_MS:.0f} ms")
    rows = bench(args.only or list(INTERACTIONS), args.repeats)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = ["label", "kind", "name", "lesson", "control", "n", "median_ms", "p95_ms", "max_ms",
              "console_errors", "error", "target", "meets_target", "cpus", "load_1min"]
    append = args.append and out.exists()
    with out.open("a" if append else "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        if not append:
            w.writeheader()
        for r in rows:
            w.writerow({**r, **machine, "target": f"median <= {TARGET_MEDIAN_MS:.0f} ms",
                        "meets_target": not r["error"] and r["median_ms"] <= TARGET_MEDIAN_MS})
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
