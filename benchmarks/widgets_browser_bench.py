"""Interaction latency of every explorer in a real browser: JupyterLab 4 in Chromium, on this machine.

For each lesson with an explorer, the notebook is opened and run (Run All Cells), then one of the
explorer's dropdowns is scrolled to the top of the page and changed ``--repeats`` times (cycling
through its options). JupyterLab runs with its default notebook windowing (``contentVisibility``: the
browser skips drawing cells off screen) unless ``--windowing`` says otherwise; the browser tests turn
windowing off (``none``) to find every cell. Each change is made
in the page (the ``<select>`` gets its new value and a ``change`` event, as a click does); the latency
is the time from that event to the last redraw of a plotly figure it caused (``plotly_afterplot``,
in the page's clock), which covers the debounce delay, the kernel's update, the messages to the page
and plotly.js drawing. A redraw counts when it comes within 1.5 s of the previous one; a change with
no redraw within 60 s is an error.

Each change is also broken down (medians in the table and CSV; see :func:`breakdown`): the time to
the kernel (debounce included), the kernel's handler, the messages it sent and their size, and the
time from the kernel's idle to the last redraw, from the page's websocket frames and the dates the
kernel stamps on its messages; then the page's side: how many redraws, of how many figures, the time
plotly spent in them (each redraw from ``plotly_beforeplot`` to ``plotly_afterplot``) and the page's
long main-thread tasks.

Target (2 CPU cores): median ≤ 300 ms from a control change to the figure redrawn.

    python benchmarks/widgets_browser_bench.py [--repeats 6] [--only 02_quantization_error] [--verbose]
                                               [--windowing contentVisibility|none]
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
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.jupyterlab import (  # noqa: E402
    CHROMIUM_ARGS,
    LAB_OVERRIDES,
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

#: Page script: listen to every plotly figure's redraws (idempotent). Each full redraw
#: (plotly's ``_doPlot``, what ``Plotly.react``/``addTraces``/``deleteTraces``/``relayout`` run) is
#: recorded as [start, end, figure index]: ``plotly_beforeplot`` and ``plotly_afterplot`` in the page's
#: clock. Every main-thread task over 50 ms (the Long Tasks API) is recorded as [start, duration].
LISTEN_JS = """() => {
  window.__kvlabDraws = window.__kvlabDraws || [];
  window.__kvlabPlots = window.__kvlabPlots || [];
  window.__kvlabTasks = window.__kvlabTasks || [];
  if (!window.__kvlabTaskObserver && typeof PerformanceObserver !== 'undefined') {
    window.__kvlabTaskObserver = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__kvlabTasks.push([e.startTime, e.duration]);
    });
    try { window.__kvlabTaskObserver.observe({entryTypes: ['longtask']}); } catch (e) {}
  }
  const all = [...document.querySelectorAll('.js-plotly-plot')];
  all.forEach((gd, index) => {
    if (gd.__kvlabListening || typeof gd.on !== 'function') return;
    gd.__kvlabListening = true;
    gd.on('plotly_beforeplot', () => { gd.__kvlabStart = performance.now(); });
    gd.on('plotly_afterplot', () => {
      const t = performance.now();
      window.__kvlabDraws.push(t);
      window.__kvlabPlots.push([gd.__kvlabStart === undefined ? t : gd.__kvlabStart, t, index]);
      gd.__kvlabStart = undefined;
    });
  });
  return all.length;
}"""

#: Page script: scroll the dropdown labelled ``label`` to the top of the page (where a user's click on
#: it leaves the page); returns how many figures are ready to draw (plotly's view has initialized).
SCROLL_JS = """(label) => {
  const boxes = [...document.querySelectorAll('.widget-dropdown')].filter(
    d => d.querySelector('.widget-label') && d.querySelector('.widget-label').textContent.trim() === label);
  if (boxes.length === 1) boxes[0].scrollIntoView({block: 'start'});
  return [...document.querySelectorAll('.js-plotly-plot')].filter(gd => typeof gd.on === 'function').length;
}"""


def wait_for_figures(page, label: str, timeout_s: float = 60.0) -> int:
    """Scroll to the control and wait until the number of drawn figures has stayed the same for 2 s
    (plotly's code loads once per page, after the cells have run)."""
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        ready = page.evaluate(SCROLL_JS, label)
        if ready != last:
            last, since = ready, time.monotonic()
        elif ready > 0 and time.monotonic() - since >= 2.0:
            return ready
        time.sleep(0.25)
    raise RuntimeError(f"figures not ready within {timeout_s:.0f} s ({last} drawn)")


#: Page script: set the dropdown labelled ``label`` to ``option`` and return the time of the event.
CHANGE_JS = """([label, option]) => {
  const boxes = [...document.querySelectorAll('.widget-dropdown')].filter(
    d => d.querySelector('.widget-label') && d.querySelector('.widget-label').textContent.trim() === label);
  if (boxes.length !== 1) return {error: `${boxes.length} dropdowns labelled ${label}`};
  const select = boxes[0].querySelector('select');
  const index = [...select.options].findIndex(o => o.textContent.replace(/\u00a0/g, ' ').trim() === option);
  if (index < 0) return {error: `no option ${option} in ${label}`};
  window.__kvlabDraws = [];
  window.__kvlabPlots = [];
  window.__kvlabTasks = [];
  const t0 = performance.now();
  select.selectedIndex = index;
  select.dispatchEvent(new Event('change', {bubbles: true}));
  return {t0};
}"""


#: Page script run before JupyterLab starts: record every websocket frame from the server (page time,
#: bytes, the message type of its header, a status message's execution state, the header's date: when
#: the kernel sent it, and whether it carries a drawing command for a figure: a ``_py2js_*`` value).
RECORD_FRAMES_JS = """(() => {
  const Native = window.WebSocket;
  window.__kvlabFrames = [];
  const decoder = new TextDecoder();
  class Recorded extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (ev) => {
        const t = performance.now();
        let text = '', size = 0;
        if (typeof ev.data === 'string') { text = ev.data.slice(0, 4096); size = ev.data.length; }
        else if (ev.data instanceof ArrayBuffer) {
          size = ev.data.byteLength;
          text = decoder.decode(new Uint8Array(ev.data, 0, Math.min(size, 4096)));
        } else if (ev.data && ev.data.size !== undefined) { size = ev.data.size; }
        const type = (text.match(/"msg_type":\\s*"(\\w+)"/) || [])[1] || '';
        const state = (text.match(/"execution_state":\\s*"(\\w+)"/) || [])[1] || '';
        const date = (text.match(/"date":\\s*"([^"]+)"/) || [])[1] || '';
        const draws = /"_py2js_\\w+":\\s*\\{/.test(text);
        window.__kvlabFrames.push([t, size, type, state, date, draws]);
      });
    }
  }
  window.WebSocket = Recorded;
})();"""


def _epoch_ms(date: str) -> float | None:
    """A Jupyter message header's date as ms since the epoch (``None`` when absent)."""
    try:
        return datetime.fromisoformat(date.replace("Z", "+00:00")).timestamp() * 1e3
    except ValueError:
        return None


def breakdown(t0: float, origin: float, draws: list[float], frames: list[list],
              plots: list[list] | None = None, tasks: list[list] | None = None) -> dict:
    """Where one change's time went (ms; ``t0`` and ``draws`` in the page's clock, ``origin`` its
    epoch; the kernel's times are the dates it stamped on its messages, on the same machine).

    ``to_kernel_ms``: from the ``change`` event until the kernel reports busy (the debounce delay and
    the message's trip); ``handler_ms``: the kernel's busy → idle, the Python update and the sending
    of its messages; ``comm_msgs`` / ``comm_kb``: the messages the kernel sent meanwhile;
    ``after_kernel_ms``: from the kernel's idle to the last redraw (the messages' trip, plotly.js
    decoding and drawing them, beyond what overlapped the handler); ``kernel_done_ms``: from the
    change to the kernel's last drawing command for a figure (its views drawn after idle,
    :meth:`Explorer.later`, included): the Python side; ``page_after_ms``: from that message to the
    last redraw, the page's side that did not overlap the kernel; ``draws``: redraws counted;
    ``figures``: how many figures were redrawn (so ``draws / figures`` is the redraws per figure);
    ``plot_ms``: the sum of plotly's redraw times (``plotly_beforeplot`` → ``plotly_afterplot`` of each
    redraw in ``plots``); ``busy_ms``: the sum of the page's long main-thread tasks (> 50 ms, from
    ``tasks``) from the change to the last redraw: plotly drawing, decoding the messages, the widget
    manager's work.
    """
    stamped = [(f, _epoch_ms(f[4])) for f in frames]
    change = origin + t0
    stamped = [(f, d) for f, d in stamped if d is not None and d >= change - 5.0]
    busy = next((d for f, d in stamped if f[2] == "status" and f[3] == "busy"), None)
    idle = next((d for f, d in stamped if busy is not None and d >= busy and f[2] == "status"
                 and f[3] == "idle"), None)
    comms = [f for f, d in stamped if f[2] == "comm_msg" and busy is not None and busy <= d
             and (idle is None or d <= idle)]
    # the kernel's last drawing command for this change: the views it draws after its idle
    # (Explorer.later) included
    sent = [d for f, d in stamped if f[2] == "comm_msg" and len(f) > 5 and f[5] and busy is not None
            and busy <= d]
    last = origin + max(draws) if draws else None
    plots = [p for p in plots or () if p[1] >= t0]
    end = max(draws) if draws else t0
    tasks = [t for t in tasks or () if t[0] + t[1] >= t0 and t[0] <= end]
    return dict(to_kernel_ms=None if busy is None else busy - change,
                handler_ms=None if idle is None or busy is None else idle - busy,
                comm_msgs=len(comms), comm_kb=sum(f[1] for f in comms) / 1e3,
                after_kernel_ms=None if idle is None or last is None else last - idle, draws=len(draws),
                kernel_done_ms=max(sent) - change if sent else None,
                page_after_ms=None if not sent or last is None else last - max(sent),
                figures=len({p[2] for p in plots}),
                plot_ms=sum(p[1] - max(p[0], t0) for p in plots),
                busy_ms=sum(min(t[0] + t[1], end) - max(t[0], t0) for t in tasks),
                each_plot=[(p[2], round(p[1] - max(p[0], t0))) for p in sorted(plots)])


def measure_change(page, label: str, option: str, timeout_s: float = 60.0) -> tuple[float, dict]:
    """Latency of one dropdown change: ms from the ``change`` event to the last redraw it caused,
    and its :func:`breakdown`."""
    page.evaluate(LISTEN_JS)
    page.evaluate("() => { window.__kvlabFrames = []; }")
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
            frames, origin, plots, tasks = page.evaluate(
                "() => [window.__kvlabFrames, performance.timeOrigin, window.__kvlabPlots,"
                " window.__kvlabTasks]")
            return after[-1] - t0, breakdown(t0, origin, after, frames, plots, tasks)
    raise RuntimeError(f"no figure redrawn within {timeout_s:.0f} s after {label} = {option}")


#: The breakdown columns (medians over the changes), as :func:`breakdown` names them.
BREAKDOWN = ("to_kernel_ms", "handler_ms", "comm_msgs", "comm_kb", "after_kernel_ms", "kernel_done_ms",
             "page_after_ms", "draws", "figures", "plot_ms", "busy_ms")


def _median(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _cell(value: float | None) -> str:
    return f"{'–':>9}" if value is None else f"{value:>9.0f}"


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation."""
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def bench(lessons: list[str], repeats: int, verbose: bool = False,
          windowing: str = "contentVisibility") -> list[dict]:
    from playwright.sync_api import sync_playwright

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("Chromium not found: install it (apt-get install chromium) or set CHROMIUM")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "root", Path(tmp) / "home"
        home.mkdir()
        copy_notebooks(ROOT / "notebooks", root)
        overrides = {**LAB_OVERRIDES, "@jupyterlab/notebook-extension:tracker": {"windowingMode": windowing}}
        server = LabServer(root, home, overrides)
        server.start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                for lesson in lessons:
                    name, label, options = INTERACTIONS[lesson]
                    context = browser.new_context(viewport={"width": 1400, "height": 1800})
                    context.add_init_script(RECORD_FRAMES_JS)
                    page = context.new_page()
                    console_errors: list[str] = []
                    page.on("console", lambda m, errs=console_errors: errs.append(m.text)
                            if m.type == "error" else None)
                    open_notebook(page, server.url, f"{lesson}.ipynb")
                    run_all_cells(page)
                    tracebacks = error_outputs(page)
                    if tracebacks:
                        raise RuntimeError(f"{lesson} raised while running: {tracebacks[0][:500]}")
                    times, parts = [], []
                    try:
                        wait_for_figures(page, label)
                        for i in range(repeats):
                            latency, part = measure_change(page, label, options[i % len(options)])
                            times.append(latency)
                            parts.append(part)
                    except RuntimeError as exc:  # recorded in the table, the other explorers still run
                        rows.append(dict(kind="browser", name=name, lesson=lesson, control=label,
                                         n=len(times), error=str(exc), console_errors=len(console_errors)))
                        print(f"{name:<20}{label:<12} ERROR {exc}", flush=True)
                        context.close()
                        continue
                    medians = {k: _median([p[k] for p in parts]) for k in BREAKDOWN}
                    rows.append(dict(kind="browser", name=name, lesson=lesson, control=label, n=len(times),
                                     median_ms=statistics.median(times), p95_ms=percentile(times, 95),
                                     max_ms=max(times), console_errors=len(console_errors), error="",
                                     **medians))
                    print(f"{name:<20}{label:<12}{rows[-1]['median_ms']:>9.0f}{rows[-1]['p95_ms']:>9.0f}"
                          f"{rows[-1]['max_ms']:>9.0f}" + "".join(_cell(medians[k]) for k in BREAKDOWN)
                          + "  " + " ".join(f"{t:.0f}" for t in times), flush=True)
                    if verbose:
                        for t, p in zip(times, parts, strict=True):
                            print(f"    {t:7.0f} ms: " + ", ".join(
                                f"{k} {'–' if p[k] is None else round(p[k])}" for k in BREAKDOWN)
                              + "; each redraw (figure, ms): "
                              + " ".join(f"{f}:{ms}" for f, ms in p["each_plot"]),
                              flush=True)
                    context.close()
                browser.close()
        finally:
            server.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=6, help="changes per explorer")
    parser.add_argument("--only", action="append", choices=sorted(INTERACTIONS), help="lessons to run")
    parser.add_argument("--verbose", action="store_true", help="print each change's breakdown")
    parser.add_argument("--windowing", default="contentVisibility",
                        choices=["contentVisibility", "none", "full", "defer"],
                        help="JupyterLab's notebook windowing mode (its default: contentVisibility)")
    parser.add_argument("--label", default="", help="name of the version measured (a CSV column)")
    parser.add_argument("--append", action="store_true", help="add rows to --out instead of replacing it")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "widgets_browser.csv"))
    args = parser.parse_args(argv)
    machine = dict(cpus=os.cpu_count(), load_1min=round(os.getloadavg()[0], 2), label=args.label)
    print(f"CPU cores {machine['cpus']}, load average at start {machine['load_1min']}")
    print(f"{'explorer':<20}{'control':<12}{'median':>9}{'p95':>9}{'max':>9}{'→kernel':>9}{'handler':>9}"
          f"{'msgs':>9}{'kB':>9}{'→drawn':>9}{'py done':>9}{'page':>9}{'draws':>9}{'figures':>9}"
          f"{'plot ms':>9}{'busy ms':>9}"
          "  each change (ms); "
          f"target median ≤ {TARGET_MEDIAN_MS:.0f} ms")
    rows = bench(args.only or list(INTERACTIONS), args.repeats, args.verbose, args.windowing)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = ["label", "kind", "name", "lesson", "control", "n", "median_ms", "p95_ms", "max_ms", *BREAKDOWN,
              "console_errors", "error", "target", "meets_target", "cpus", "load_1min"]
    write_rows(out, fields, [{**r, **machine, "target": f"median <= {TARGET_MEDIAN_MS:.0f} ms",
                              "meets_target": not r["error"] and r["median_ms"] <= TARGET_MEDIAN_MS}
                             for r in rows], append=args.append)
    print(f"written {out}")
    return 0


def write_rows(out: Path, fields: list[str], rows: list[dict], append: bool = False) -> None:
    """Write ``rows`` to the CSV ``out`` (after its rows with ``append``). Rows written by an earlier
    version of this script, with fewer columns, are kept: the file is rewritten with the new columns
    (left empty for them)."""
    kept: list[dict] = []
    if append and out.exists():
        with out.open(newline="") as fh:
            reader = csv.DictReader(fh)
            kept = list(reader)
            fields = fields + [f for f in reader.fieldnames or () if f not in fields]
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, restval="", extrasaction="ignore")
        w.writeheader()
        w.writerows(kept + rows)


if __name__ == "__main__":
    sys.exit(main())
