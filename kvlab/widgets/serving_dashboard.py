"""Serving what-if dashboard: one configuration, its capacity, and a simulated run of a workload.

Change the model, KV-cache dtype, memory, tensor parallelism, ``max_model_len``, chunk size, profile,
admission policy and workload, and see at once: how many max-length requests fit under every KV dtype
(``dtypes``), how the queues evolve (``queues``) and how full the pool gets (``pool``); on a chosen GPU
the same workload also runs in seconds (``time``: tokens per second; the summary adds wall time,
TTFT and TPOT), drawn just after the rest (marked as computing until it arrives). The summary pane
lists the plan's numbers and the run's outcome. All numbers come from :mod:`kvlab.serving` and
:mod:`kvlab.timing`.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from kvlab.admission import POLICY_NAMES
from kvlab.analysis import blocks_in_use, tokens_per_second
from kvlab.hardware import GPU_NAMES
from kvlab.kvdata import WORKLOAD_NAMES
from kvlab.models import PRESET_NAMES
from kvlab.plots.serving import dtype_capacity_figure, pool_usage_figure, queues_figure
from kvlab.plots.style import format_bytes
from kvlab.plots.tables import html_table
from kvlab.plots.timing import timeline_figure
from kvlab.serving import EngineConfig, capacity
from kvlab.sizing import PROFILE_NAMES
from kvlab.widgets.admission_explorer import stall_banner
from kvlab.widgets.explorer import Explorer, empty_figure_widget, labelled
from kvlab.widgets.stale import NumberPanel
from kvlab.widgets.timed_runs import SECONDS_PER_STEP, step_run, timed_run

__all__ = ["DASHBOARD_DTYPES", "SECONDS_PER_STEP", "build_serving_dashboard"]

GIB = 2**30
#: The KV dtypes compared (one per distinct storage cost).
DASHBOARD_DTYPES: tuple[str, ...] = ("auto", "fp8", "int8_per_token_head", "fp8_per_token_head")


#: A run stops after this many steps.
MAX_STEPS = 5000


def build_serving_dashboard(
    *,
    model: str = "gemma-4-31b",
    kv_cache_dtype: str = "auto",
    kv_memory_gib: float = 16.0,
    tensor_parallel_size: int = 2,
    max_model_len: int = 32768,
    max_num_batched_tokens: int = 2048,
    profile: str = "vllm-0.33",
    policy: str = "vllm",
    workload_name: str = "chat burst",
    gpu: str = "h100-sxm",
    debounce_s: float = 0.15,
) -> Explorer:
    """Build the dashboard (see the module docstring); arguments are the initial control values."""
    c = {
        "model": widgets.Dropdown(options=list(PRESET_NAMES), value=model, description="model"),
        "kv_cache_dtype": widgets.Dropdown(options=list(DASHBOARD_DTYPES), value=kv_cache_dtype,
                                           description="KV dtype"),
        "kv_memory_gib": widgets.FloatSlider(value=kv_memory_gib, min=1.0, max=120.0, step=0.5,
                                             description="KV mem/GPU (GiB)", continuous_update=False),
        "tensor_parallel_size": widgets.Dropdown(options=[1, 2, 4, 8], value=tensor_parallel_size,
                                                 description="TP (GPUs)"),
        "max_model_len": widgets.SelectionSlider(options=[8192, 16384, 32768, 65536, 131072],
                                                 value=max_model_len, description="max len (tok)",
                                                 continuous_update=False),
        "max_num_batched_tokens": widgets.SelectionSlider(options=[512, 1024, 2048, 4096, 8192, 16384],
                                                          value=max_num_batched_tokens,
                                                          description="chunk (tok)", continuous_update=False),
        "profile": widgets.Dropdown(options=list(PROFILE_NAMES), value=profile, description="profile"),
        "policy": widgets.Dropdown(options=list(POLICY_NAMES), value=policy, description="policy"),
        "workload": widgets.Dropdown(options=list(WORKLOAD_NAMES), value=workload_name,
                                     description="workload"),
        "gpu": widgets.Dropdown(options=list(GPU_NAMES), value=gpu, description="GPU"),
    }
    for w in c.values():
        labelled(w)
    figures = {"dtypes": empty_figure_widget(320), "queues": empty_figure_widget(300),
               "pool": empty_figure_widget(300), "time": empty_figure_widget(300)}
    summary = NumberPanel()

    def config(dtype: str) -> EngineConfig:
        return EngineConfig(
            c["model"].value, kv_cache_memory=c["kv_memory_gib"].value * GIB, kv_cache_dtype=dtype,
            max_model_len=c["max_model_len"].value, max_num_batched_tokens=c["max_num_batched_tokens"].value,
            tensor_parallel_size=c["tensor_parallel_size"].value, profile=c["profile"].value,
            policy=c["policy"].value,
        )

    def render():
        conc, errors = {}, {}
        for dtype in DASHBOARD_DTYPES:
            try:
                conc[dtype] = capacity(config(dtype)).max_concurrency
            except ValueError as exc:
                conc[dtype], errors[dtype] = None, str(exc)
        current = c["kv_cache_dtype"].value
        figs = {"dtypes": dtype_capacity_figure(
            conc, errors, current=current,
            title=f"{c['model'].value}: {c['max_model_len'].value:,}-token requests that fit, by KV dtype",
        )}
        if conc[current] is None:
            explorer.fail(f"vLLM would not start with {current}: {errors[current]}")
            summary.value = ""
            return figs
        cfg = config(current)
        plan = capacity(cfg)
        gpu = c["gpu"].value
        result = step_run(cfg, c["workload"].value, MAX_STEPS, gpu)
        explorer.result = result
        s = result.summary
        figs["queues"] = queues_figure(result, title=f"Queues over the run ({c['workload'].value})")
        figs["pool"] = pool_usage_figure(blocks_in_use(result), title="Blocks in use against the pool")
        rows = [["KV memory per GPU", format_bytes(cfg.kv_cache_memory)],
                ["groups / bytes per block", f"{len(plan.config.groups)} / {plan.bytes_per_block:,} B"],
                ["blocks (incl. null)", f"{plan.num_blocks:,}"],
                ["max concurrency", f"{plan.max_concurrency:.2f}"],
                ["steps to serve the workload", f"{s.steps:,}"],
                ["finished / rejected / unfinished", f"{s.finished} / {s.rejected} / {s.unfinished}"],
                ["preemptions", f"{s.preemptions}"],
                ["peak running / peak blocks", f"{s.peak_running} / {s.peak_blocks_in_use:,}"]]
        banner = stall_banner(f"{c['policy'].value} ({cfg.profile})", result)
        heading = ["", html.escape(f"{cfg.model_kv.name}, {current}, {cfg.profile}")]
        summary.value = html_table(heading, rows) + banner

        def time_view():
            """The run in seconds: its rows join the summary (drawn after the rest, see
            :meth:`Explorer.later`)."""
            timed = timed_run(cfg, c["workload"].value, gpu, MAX_STEPS)
            if timed.metrics is None or not timed.metrics.finished:
                return {}
            m = timed.metrics
            timed_rows = [[f"wall time on {gpu} (model)", f"{m.wall_time_s:.2f} s"],
                          ["output tokens/s", f"{m.output_tokens_per_s:,.0f}"],
                          ["mean / p99 TTFT", f"{m.ttft.mean * 1e3:,.0f} / {m.ttft.p99 * 1e3:,.0f} ms"],
                          ["mean / p99 TPOT", f"{m.tpot.mean * 1e3:,.1f} / {m.tpot.p99 * 1e3:,.1f} ms"]]
            summary.value = html_table(heading, rows + timed_rows) + banner
            return {"time": timeline_figure({current: tokens_per_second(timed, 0.25)},
                                            what=f"throughput on {gpu}", unit="tokens/s")}

        explorer.later(time_view, views=("time",))
        message = (f"{current}: max concurrency {plan.max_concurrency:.2f}; the workload takes {s.steps:,} "
                   f"steps with {s.preemptions} preemption(s).")
        if s.stalled is not None:
            explorer.status.note(f"{message} The run stalls: {s.stalled.reason}.")
        else:
            explorer.status.ok(message)
        return figs

    explorer = Explorer(c, figures, render, panels={"summary": summary}, debounce_s=debounce_s)
    explorer.summary = summary
    explorer.result = None
    explorer.ui = widgets.VBox([
        widgets.HBox([c["model"], c["kv_cache_dtype"], c["tensor_parallel_size"]]),
        widgets.HBox([c["kv_memory_gib"], c["max_model_len"], c["max_num_batched_tokens"]]),
        widgets.HBox([c["profile"], c["policy"], c["workload"]]),
        widgets.HBox([c["gpu"]]),
        explorer.status.widget, summary,
        figures["dtypes"], figures["queues"], figures["pool"], figures["time"],
    ])
    explorer.update()
    return explorer
