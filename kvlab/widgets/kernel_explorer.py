"""Kernel explorer: the float64 reference and the Triton kernel on one small paged batch, and the
committed GPU benchmark results.

Controls drive the *reference* live: scheme, context, sequences, query tokens per sequence, head
size, sliding window, softcap and outlier K/V. The Triton kernel (Triton's interpreter on a CPU)
runs only when ``run`` is pressed, in a background thread with a progress bar; the other controls
stay responsive meanwhile, and a result is shown only while the controls still match it.

Figures: ``heads`` (relative output error per query head: reference vs truth, Triton vs reference),
``difference`` (``|Triton − reference|``, or ``|reference − truth|`` before a run), ``bench_time``
(median µs vs context per scheme with each scheme's bandwidth floor) and ``bench_bandwidth``
(% of the device's copy bandwidth), from ``benchmarks/results/*.csv``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import ipywidgets as widgets

from kvlab.analysis import fastest_per_point
from kvlab.analysis.kernel_check import (
    KernelCase,
    ReferenceRun,
    per_head_relative_error,
    run_reference,
    run_triton,
)
from kvlab.kvdata import find_benchmark_csv, load_benchmark_results
from kvlab.plots.kernels import (
    benchmark_bandwidth_figure,
    benchmark_time_figure,
    head_error_figure,
    output_difference_figure,
)
from kvlab.widgets.background import BackgroundRun
from kvlab.widgets.explorer import Explorer, empty_figure_widget, labelled
from kvlab.widgets.figure_sync import sync_figure
from kvlab.widgets.stale import mark_figure_stale
from kvlab.widgets.status import StatusLine

KERNEL_SCHEMES: tuple[str, ...] = (
    "bfloat16", "float16", "fp8_e4m3", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head",
)


@lru_cache(maxsize=16)
def _reference(case: KernelCase) -> ReferenceRun:
    return run_reference(case)


def build_kernel_explorer(
    *,
    scheme: str = "int8_per_token_head",
    context: int = 64,
    num_seqs: int = 2,
    query_len: int = 1,
    benchmark_csv: str | Path | list | None = None,
    debounce_s: float = 0.15,
) -> Explorer:
    """Build the kernel explorer (see the module docstring).

    Args:
        scheme: kv-cache dtype of the cache (one of :data:`KERNEL_SCHEMES`).
        context: tokens per sequence (keep it small: the interpreter runs every program in Python).
        num_seqs: sequences in the batch.
        query_len: new tokens per sequence (1 = decode).
        benchmark_csv: results file(s) to plot; default: :func:`kvlab.kvdata.find_benchmark_csv`.
        debounce_s: quiet time before an update runs (seconds).
    """
    c = {
        "scheme": widgets.Dropdown(options=list(KERNEL_SCHEMES), value=scheme, description="KV dtype"),
        "context": widgets.SelectionSlider(options=[16, 32, 64, 128, 256], value=context,
                                           description="context (tok)", continuous_update=False),
        "num_seqs": widgets.IntSlider(value=num_seqs, min=1, max=4, description="sequences",
                                      continuous_update=False),
        "query_len": widgets.Dropdown(options=[("decode: 1", 1), ("prefill: 8", 8), ("prefill: 32", 32)],
                                      value=query_len, description="new tok/seq"),
        "head_size": widgets.Dropdown(options=[64, 128], value=64, description="head size"),
        # 0 stands for "none": ipywidgets reads a None value as "nothing selected" and shows a blank
        "sliding_window": widgets.Dropdown(options=[("none", 0), ("16", 16), ("32", 32), ("64", 64)],
                                           value=0, description="window (tok)"),
        "softcap": widgets.Dropdown(options=[("none", 0.0), ("30", 30.0)], value=0.0,
                                    description="softcap"),
        "outliers": widgets.Checkbox(value=False, description="outlier K/V (RoPE)"),
    }
    for name, w in c.items():
        if name != "outliers":
            labelled(w, "300px")
    run_button = widgets.Button(description="Run Triton kernel", icon="play", button_style="primary",
                                tooltip="Triton's interpreter on the CPU: about a second per call")
    background = BackgroundRun()
    figures = {"heads": empty_figure_widget(330), "difference": empty_figure_widget(380),
               "bench_time": empty_figure_widget(380), "bench_bandwidth": empty_figure_widget(340)}
    triton: dict = {}

    def current_case() -> KernelCase:
        return KernelCase(scheme=c["scheme"].value, context=c["context"].value, num_seqs=c["num_seqs"].value,
                          query_len=c["query_len"].value, head_size=c["head_size"].value,
                          sliding_window=c["sliding_window"].value or None,
                          softcap=c["softcap"].value or None,
                          outliers=c["outliers"].value)

    def render():
        case = current_case()
        run = _reference(case)
        fmt = per_head_relative_error(run.reference, run.truth)
        have = triton.get("case") == case
        kern = per_head_relative_error(triton["out"], run.reference) if have else None
        figs = {"heads": head_error_figure(fmt, kern, title=f"{case.scheme}: output error per query head")}
        ex = run.example
        if have:
            diff = (triton["out"].double() - run.reference).abs()
            what, name = "Triton − reference", "the kernel's own arithmetic"
        else:
            diff = (run.reference - run.truth).abs()
            what, name = "reference − truth", "the format (run Triton to see the kernel)"
        rows = diff.reshape(-1, diff.shape[-1]).numpy()
        figs["difference"] = output_difference_figure(
            rows, what=what,
            title=f"|{what}|: {name}; {ex.batch.num_tokens} tokens × {case.num_q_heads} heads",
        )
        shape = (f"{case.num_seqs} seq × {case.context} tokens, {case.query_len} new each, "
                 f"{case.num_q_heads}/{case.num_kv_heads} heads × {case.head_size}")
        message = f"{case.scheme}, {shape}: reference vs truth {max(fmt):.2e} (worst head)"
        if have:
            explorer.status.ok(f"{message}; Triton vs reference {max(kern):.2e} "
                               f"(interpreter run took {triton['seconds']:.1f} s).")
        elif triton:
            explorer.status.note(f"{message}. The Triton result shown earlier was for other settings: "
                                 "press Run again.")
        else:
            explorer.status.ok(f"{message}. Press Run to compare the Triton kernel.")
        return figs

    explorer = Explorer(c, figures, render, debounce_s=debounce_s)
    explorer.triton = triton
    explorer.background = background
    explorer.controls["run"] = run_button

    def on_done(out, seconds: float) -> None:
        triton.update(case=pending["case"], out=out, seconds=seconds)
        run_button.disabled = False
        explorer.update()

    def on_error(exc: Exception) -> None:
        run_button.disabled = False
        explorer.fail(f"Triton run failed: {type(exc).__name__}: {exc}")

    pending: dict = {}

    def on_click(_button=None) -> None:
        try:
            case = current_case()
            run = _reference(case)
        except ValueError as exc:
            explorer.fail(str(exc))
            return
        if background.running:
            explorer.status.note("The Triton kernel is still running; its result will show when it finishes.")
            return
        pending["case"] = case
        run_button.disabled = True
        explorer.status.busy(f"Triton kernel running in the interpreter on {case.scheme}, "
                             f"{case.num_seqs} × {case.context} tokens… the controls stay live.")
        background.start(lambda: run_triton(run, case), on_done, on_error)

    run_button.on_click(on_click)
    explorer.run_triton = on_click

    # -- benchmark results (GPU, committed CSV) -----------------------------------------------------
    bench_status = StatusLine()
    paths = find_benchmark_csv() if benchmark_csv is None else benchmark_csv
    results = None
    try:
        results = load_benchmark_results(paths) if paths else None
    except ValueError as exc:
        bench_status.error(str(exc))
    kinds = [k for k in ("decode", "prefill") if results and results.select(kind=k)] or ["decode"]
    files = results.values("source") if results else []
    bench = {
        "file": widgets.Dropdown(options=files, value=files[0] if files else None, description="file"),
        "kind": widgets.Dropdown(options=kinds, value=kinds[0], description="kind"),
        "batch": widgets.Dropdown(options=[], description="batch (seqs)"),
        "device": widgets.Dropdown(options=results.values("device") if results else [], description="device"),
    }
    for w in bench.values():
        labelled(w, "300px")

    def bench_batches() -> list[int]:
        if not results:
            return []
        rows = results.select(kind=bench["kind"].value, device=bench["device"].value,
                              source=bench["file"].value)
        return sorted({r["batch"] for r in rows})

    def render_bench(_change=None) -> None:
        rows: list[dict] = []
        try:
            if results is None:
                if bench_status.level != "error":
                    bench_status.note("No GPU benchmark results found in benchmarks/results/ "
                                      "(run `kvlab bench` on a GPU to make them).")
            else:
                batches = bench_batches()
                if list(bench["batch"].options) != batches:
                    keep = bench["batch"].value
                    bench["batch"].options = batches
                    if batches:
                        default = 16 if 16 in batches else batches[-1]
                        bench["batch"].value = keep if keep in batches else default
                if not batches:
                    bench_status.note(f"{bench['file'].value} has no {bench['kind'].value} rows on "
                                      f"{bench['device'].value}.")
                else:
                    rows, dropped = fastest_per_point(results.select(
                        kind=bench["kind"].value, batch=bench["batch"].value, device=bench["device"].value,
                        source=bench["file"].value))
                    extra = f" (fastest of several launch settings at {dropped} point(s))" if dropped else ""
                    bench_status.ok(f"{len(rows)} measurements from {bench['file'].value} on "
                                    f"{bench['device'].value}{extra}; dashed: the time to move the same "
                                    "bytes at the device's copy bandwidth.")
            what = f"{bench['kind'].value}, batch {bench['batch'].value}" if rows else "no data"
            sync_figure(figures["bench_time"],
                        benchmark_time_figure(rows, title=f"GPU: time per call ({what})"))
            sync_figure(figures["bench_bandwidth"],
                        benchmark_bandwidth_figure(rows, title=f"GPU: share of copy bandwidth ({what})"))
            explorer.stale -= {"bench_time", "bench_bandwidth"}
        except (ValueError, KeyError, IndexError) as exc:
            bench_status.error(f"cannot plot these results: {exc}")
            for name in ("bench_time", "bench_bandwidth"):  # the previous selection's: not current
                if figures[name].data:
                    mark_figure_stale(figures[name])
                    explorer.stale.add(name)

    for w in bench.values():
        w.observe(render_bench, names="value")
    explorer.controls.update({f"bench_{k}": w for k, w in bench.items()})
    explorer.bench_results = results
    explorer.bench_status = bench_status
    render_bench()

    explorer.ui = widgets.VBox([
        widgets.HBox([c["scheme"], c["context"], c["num_seqs"]]),
        widgets.HBox([c["query_len"], c["head_size"], c["sliding_window"]]),
        widgets.HBox([c["softcap"], c["outliers"]]),
        widgets.HBox([run_button, background.progress, background.label]),
        explorer.status.widget, figures["heads"], figures["difference"],
        widgets.HTML("<b>Committed GPU benchmark results</b>"),
        widgets.HBox([bench["file"], bench["device"]]),
        widgets.HBox([bench["kind"], bench["batch"]]),
        bench_status.widget, figures["bench_time"], figures["bench_bandwidth"],
    ])
    explorer.update()
    return explorer
