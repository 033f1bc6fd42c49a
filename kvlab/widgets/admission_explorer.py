"""Admission explorer: two admission policies side by side on one sliding-window configuration.

Controls: model (presets with sliding-window layers), sliding window, chunk size
(``max_num_batched_tokens``), block size, KV-cache dtype, KV-cache memory of one GPU,
``max_model_len``, vLLM profile, workload, and the two policies compared (``policy_a``, ``policy_b``).
Each run is :func:`kvlab.serving.simulate`; the explorer only draws its timeline.

Figures (one panel per policy): ``timeline`` (requests waiting / prefill / decode / preempted),
``blocks`` (blocks in use per group against the pool), ``gate`` (the gate's need vs the free blocks at
each admission attempt). ``banners`` holds one HTML banner per policy that says whether the run
finished or stalled, and why.

In seconds: every step of the run is timed on the chosen ``gpu``
(:func:`kvlab.widgets.timed_runs.timed_run`): ``throughput`` draws tokens per second over time for
both policies, ``ttft`` their TTFT distributions, and the ``time`` panel sets wall time, prompt and
output tokens/s, TTFT and TPOT side by side. These are drawn just after the figures in steps
(:meth:`~kvlab.widgets.explorer.Explorer.later`; until they arrive they are marked as computing, since
they still show the previous setting).

One run per policy gives both views: the figures in steps read its steps, the views in seconds its
clock, so every number on screen comes from the same run. A workload whose requests all arrive at
once is scheduled the same in steps and in seconds. One whose requests arrive over time (chat burst,
shared system prompt, multi-turn) arrives in seconds, at
:data:`~kvlab.widgets.timed_runs.SECONDS_PER_STEP` per step of the workload: how many steps pass
between two arrivals depends on how long the GPU takes per step, so for such a workload another GPU
can change the figures in steps too (the workload note says so).
"""

from __future__ import annotations

import html
from functools import lru_cache

import ipywidgets as widgets

from kvlab.admission import POLICY_NAMES
from kvlab.analysis import (
    blocks_in_use,
    gate_points,
    latency_samples_ms,
    request_state_spans,
    sliding_window_of,
    tokens_per_second,
    with_sliding_window,
)
from kvlab.hardware import GPU_NAMES
from kvlab.kvdata import WORKLOAD_NAMES, WORKLOADS, workload
from kvlab.models import PRESET_NAMES, ModelKV, get_model
from kvlab.plots.admission import blocks_figure, gate_figure, timeline_figure
from kvlab.plots.palette import OKABE_ITO, categorical
from kvlab.plots.plain import plain_figures
from kvlab.plots.timing import latency_figure
from kvlab.plots.timing import timeline_figure as time_figure
from kvlab.quantization import SCHEME_NAMES
from kvlab.serving import EngineConfig, capacity
from kvlab.simulator import SimulationResult
from kvlab.sizing import PROFILE_NAMES
from kvlab.widgets.explorer import Explorer, empty_figure_widget, labelled
from kvlab.widgets.stale import NumberPanel
from kvlab.widgets.timed_runs import SECONDS_PER_STEP, arrives_at_once, time_table, timed_run

GIB = 2**30
WINDOWS: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
CHUNKS: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384)
MAX_MODEL_LENS: tuple[int, ...] = (8192, 16384, 32768, 65536, 131072)
#: Presets with sliding-window layers (the ones admission budgets are about).
WINDOWED_MODELS: tuple[str, ...] = tuple(n for n in PRESET_NAMES if get_model(n).count("sliding_window"))
#: A run stops after this many steps (the presets finish in a few hundred).
MAX_STEPS = 3000
#: Width of the windows tokens per second are counted in (seconds).
THROUGHPUT_WINDOW_S = 0.25


@lru_cache(maxsize=64)
def _windowed_model(model: str, window: int) -> ModelKV:
    """Preset ``model`` with its sliding layers' window set to ``window`` (one object per pair, shared
    by both policies' configs and by revisits)."""
    return with_sliding_window(get_model(model), window)


def admission_config(
    model: str, window: int, *, kv_memory_gib: float, kv_cache_dtype: str, block_size: int,
    max_model_len: int, max_num_batched_tokens: int, profile: str, policy: str,
) -> EngineConfig:
    """The :class:`EngineConfig` the explorer simulates for one policy (the window replaces the model's)."""
    return EngineConfig(
        _windowed_model(model, window), kv_cache_memory=kv_memory_gib * GIB,
        kv_cache_dtype=kv_cache_dtype, block_size=block_size, max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens, profile=profile, policy=policy,
    )


def stall_banner(label: str, result: SimulationResult) -> str:
    """HTML banner: finished, stalled (with the reason) or stopped at the step cap."""
    s = result.summary
    n = s.finished + s.rejected + s.unfinished
    if s.stalled is not None:
        st = s.stalled
        text = (f"⚠ {label}: STALLED at step {st.step}. {st.request_id}: {st.reason}. It can never "
                f"proceed, and every request behind it would wait forever; the run stops here "
                f"({s.finished} of {n} requests had finished).")
        color, weight = OKABE_ITO["vermillion"], 700
    elif s.step_cap_reached:
        text = f"⚠ {label}: stopped after {s.steps:,} steps with {s.unfinished} requests unfinished."
        color, weight = OKABE_ITO["orange"], 600
    else:
        text = (f"✓ {label}: all {s.finished} requests finished in {s.steps:,} steps; "
                f"{s.preemptions} preemption(s); at most {s.peak_running} running at once.")
        if s.rejected:
            text += f" {s.rejected} rejected (longer than max_model_len)."
        color, weight = OKABE_ITO["bluish_green"], 500
    return (f'<div class="kvlab-banner" style="border-left:6px solid {color};padding:4px 8px;'
            f'margin:2px 0;font-weight:{weight}">{html.escape(text)}</div>')


def workload_note_html(workload_name: str, max_model_len: int, gpu: str) -> str:
    """The note under the controls: what the workload is and, when its requests arrive over time,
    that their arrivals are in seconds on ``gpu``'s clock (so the figures in steps depend on the GPU)."""
    about = WORKLOADS[workload_name][0]
    text = f"{workload_name}: {about}; the same requests under both policies."
    if not arrives_at_once(workload(workload_name, max_model_len)):
        text += (f" They arrive in seconds ({SECONDS_PER_STEP * 1e3:.0f} ms per step of the workload), "
                 f"and the steps follow the clock of the {gpu}: another GPU can change the figures in "
                 "steps too.")
    return f"<i>{html.escape(text)}</i>"


def build_admission_explorer(
    *,
    model: str = "gemma-3-27b",
    sliding_window: int | None = None,
    max_num_batched_tokens: int = 2048,
    block_size: int = 16,
    kv_cache_dtype: str = "auto",
    kv_memory_gib: float = 8.0,
    max_model_len: int = 32768,
    profile: str = "vllm-0.20",
    workload_name: str = "long prompts",
    policy_a: str = "uncapped",
    policy_b: str = "vllm",
    gpu: str = "h100-sxm",
    debounce_s: float = 0.15,
) -> Explorer:
    """Build the admission explorer (see the module docstring).

    Args:
        model: a preset with sliding-window layers (:data:`WINDOWED_MODELS`).
        sliding_window: window of the sliding layers (tokens); ``None`` = the model's own.
        max_num_batched_tokens: chunk size, the token budget per step (tokens).
        block_size: tokens per block.
        kv_cache_dtype: ``--kv-cache-dtype``.
        kv_memory_gib: KV-cache memory of one GPU (GiB).
        max_model_len: tokens per request.
        profile: the vLLM version imitated (:data:`kvlab.sizing.PROFILE_NAMES`).
        workload_name: one of :data:`kvlab.kvdata.WORKLOAD_NAMES`.
        policy_a, policy_b: the two admission policies compared (:data:`kvlab.admission.POLICY_NAMES`).
        gpu: the GPU the timed runs use (:data:`kvlab.hardware.GPU_NAMES`).
        debounce_s: quiet time before an update runs (seconds).
    """
    window = sliding_window or sliding_window_of(get_model(model))
    c = {
        "model": widgets.Dropdown(options=list(WINDOWED_MODELS), value=model, description="model"),
        "sliding_window": widgets.SelectionSlider(options=list(WINDOWS), value=window,
                                                  description="window (tok)", continuous_update=False),
        "max_num_batched_tokens": widgets.SelectionSlider(options=list(CHUNKS), value=max_num_batched_tokens,
                                                          description="chunk (tok)", continuous_update=False),
        "block_size": widgets.Dropdown(options=[16, 32, 64], value=block_size, description="block (tok)"),
        "kv_cache_dtype": widgets.Dropdown(options=list(SCHEME_NAMES), value=kv_cache_dtype,
                                           description="KV dtype"),
        "kv_memory_gib": widgets.FloatSlider(value=kv_memory_gib, min=1.0, max=80.0, step=0.5,
                                             description="KV mem/GPU (GiB)", continuous_update=False),
        "max_model_len": widgets.SelectionSlider(options=list(MAX_MODEL_LENS), value=max_model_len,
                                                 description="max len (tok)", continuous_update=False),
        "profile": widgets.Dropdown(options=list(PROFILE_NAMES), value=profile, description="profile"),
        "workload": widgets.Dropdown(options=list(WORKLOAD_NAMES), value=workload_name,
                                     description="workload"),
        "policy_a": widgets.Dropdown(options=list(POLICY_NAMES), value=policy_a, description="policy A"),
        "policy_b": widgets.Dropdown(options=list(POLICY_NAMES), value=policy_b, description="policy B"),
        "gpu": widgets.Dropdown(options=list(GPU_NAMES), value=gpu, description="GPU"),
    }
    for w in c.values():
        labelled(w)
    figures = {"timeline": empty_figure_widget(470), "blocks": empty_figure_widget(430),
               "gate": empty_figure_widget(430), "throughput": empty_figure_widget(360),
               "ttft": empty_figure_widget(360)}
    banners = NumberPanel()
    time_panel = NumberPanel()
    workload_note = NumberPanel()

    def render():
        v = {name: w.value for name, w in c.items()}
        if v["sliding_window"] >= v["max_model_len"]:
            explorer.fail(f"window ({v['sliding_window']:,} tokens) ≥ max_model_len "
                          f"({v['max_model_len']:,}): every layer would see the whole request, so the window "
                          "changes nothing. Pick a smaller window or a longer max_model_len.")
            return {}
        workload_note.value = workload_note_html(v["workload"], v["max_model_len"], v["gpu"])
        results = {}
        for key in ("policy_a", "policy_b"):
            cfg = admission_config(
                v["model"], v["sliding_window"], kv_memory_gib=v["kv_memory_gib"],
                kv_cache_dtype=v["kv_cache_dtype"], block_size=v["block_size"],
                max_model_len=v["max_model_len"], max_num_batched_tokens=v["max_num_batched_tokens"],
                profile=v["profile"], policy=v[key],
            )
            try:
                capacity(cfg)
            except ValueError as exc:  # vLLM's startup errors (too little memory)
                explorer.fail(f"vLLM would not start: {exc}")
                return {}
            label = f"{key[-1].upper()} · {v[key]} ({v['profile']})"
            # one run for both views: its steps for the figures in steps, its clock for the seconds
            results[label] = timed_run(cfg, v["workload"], v["gpu"], MAX_STEPS)
        banners.value = "".join(stall_banner(label, r) for label, r in results.items())
        stalls = {k: r.summary.stalled.step if r.summary.stalled else None for k, r in results.items()}
        explorer.results = results
        explorer.later(lambda: time_view(results, v["gpu"]), views=("throughput", "ttft", "time"))
        stalled = [label for label, s in stalls.items() if s is not None]
        summary = " · ".join(f"{label.split(' (')[0]}: peak {r.summary.peak_blocks_in_use:,} blocks"
                             for label, r in results.items())
        if stalled:
            explorer.status.note(f"{' and '.join(stalled)} stalled. {summary}")
        else:
            explorer.status.ok(summary)
        pools = {k: r.timeline[0].pool_size if r.timeline else 0 for k, r in results.items()}
        with plain_figures():  # copied into the widgets from their dicts, no plotly objects built
            return {
                "timeline": timeline_figure({k: request_state_spans(r) for k, r in results.items()},
                                            stalls=stalls, title="Requests over time"),
                "blocks": blocks_figure({k: blocks_in_use(r) for k, r in results.items()},
                                        title="Blocks in use per group, against the pool"),
                "gate": gate_figure({k: gate_points(r) for k, r in results.items()},
                                    pools,
                                    title="Admission gate: blocks asked vs blocks free at each attempt"),
            }

    def time_view(timed: dict[str, SimulationResult], gpu: str):
        """The views in seconds of the runs (drawn after the figures in steps: see :meth:`Explorer.later`)."""
        explorer.timed = timed
        time_panel.value = time_table(timed, gpu)
        return {
            "throughput": time_figure(
                {k: tokens_per_second(r, THROUGHPUT_WINDOW_S) for k, r in timed.items()},
                what=f"throughput on {gpu}", unit="tokens/s",
            ),
            "ttft": latency_figure({k: latency_samples_ms(r)["ttft"] for k, r in timed.items()}, what="TTFT",
                                   colors={k: categorical(i) for i, k in enumerate(timed)}),
        }

    explorer = Explorer(c, figures, render,
                        panels={"banners": banners, "workload": workload_note, "time": time_panel},
                        debounce_s=debounce_s, merge_traces=True)  # small traces: update, never replace
    explorer.banners = banners
    explorer.time_panel = time_panel
    explorer.results = {}
    explorer.timed = {}
    explorer.ui = widgets.VBox([
        widgets.HBox([c["model"], c["sliding_window"], c["max_num_batched_tokens"]]),
        widgets.HBox([c["kv_memory_gib"], c["max_model_len"], c["block_size"]]),
        widgets.HBox([c["kv_cache_dtype"], c["profile"], c["workload"]]),
        widgets.HBox([c["policy_a"], c["policy_b"], c["gpu"]]),
        workload_note, explorer.status.widget, banners,
        figures["timeline"], figures["blocks"], figures["gate"],
        time_panel, figures["throughput"], figures["ttft"],
    ])
    explorer.update()
    return explorer
