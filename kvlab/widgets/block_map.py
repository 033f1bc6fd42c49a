"""Block map: the allocator's pool as a grid, stepped through a simulated run.

Controls: model, workload, pool size (blocks, ``num_gpu_blocks_override``), chunk size, prefix caching,
and the ``step`` slider with a ``play`` button. The run is :func:`kvlab.serving.simulate`; the grid of
a step is the run replayed to that step with one snapshot of every block (``record_blocks=(step,)``).

Figure ``blocks``: every block id coloured by the request that holds it and shaped by its group;
free blocks grey (white with an outline when they still carry a prefix-cache hash), the null block
as a black ×, blocks shared through prefix hits outlined in black.
"""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as widgets

from kvlab.kvdata import WORKLOAD_NAMES, workload
from kvlab.plots.block_map import block_map_figure
from kvlab.serving import EngineConfig, simulate
from kvlab.simulator import SimulationResult, StepRecord
from kvlab.widgets.explorer import Explorer, empty_figure_widget, labelled

#: Models small enough per request for a legible map.
BLOCK_MAP_MODELS: tuple[str, ...] = ("gpt-oss-20b", "llama-3.1-8b", "mistral-7b-v0.1")
MAX_MODEL_LEN = 2048


def block_map_config(model: str, pool_blocks: int, chunk: int, prefix_caching: bool) -> EngineConfig:
    """The configuration the block map simulates (``max_model_len`` 2,048, profile ``vllm-0.33``)."""
    return EngineConfig(model, kv_cache_memory="64GiB", max_model_len=MAX_MODEL_LEN,
                        max_num_batched_tokens=chunk, num_gpu_blocks_override=pool_blocks,
                        enable_prefix_caching=prefix_caching, profile="vllm-0.33")


#: A run stops after this many steps.
MAX_STEPS = 5000


@lru_cache(maxsize=8)
def _run(config: EngineConfig, workload_name: str) -> SimulationResult:
    """The whole run, without block snapshots (its length, outcome and stall)."""
    return simulate(config, workload(workload_name, MAX_MODEL_LEN), max_steps=MAX_STEPS)


@lru_cache(maxsize=64)
def blocks_at(config: EngineConfig, workload_name: str, step: int) -> StepRecord:
    """The record of ``step``, with every block's state: the run replayed to that step with one
    snapshot (a snapshot of every block at every step costs 5–10 times the run itself)."""
    run = simulate(config, workload(workload_name, MAX_MODEL_LEN), max_steps=step + 1,
                   record_blocks=(step,))
    return run.timeline[step]


def build_block_map(
    *,
    model: str = "gpt-oss-20b",
    workload_name: str = "shared system prompt",
    pool_blocks: int = 512,
    chunk: int = 512,
    prefix_caching: bool = True,
    step: int = 12,
    debounce_s: float = 0.05,
) -> Explorer:
    """Build the block map (see the module docstring).

    Args:
        model: one of :data:`BLOCK_MAP_MODELS` (any preset works).
        workload_name: one of :data:`kvlab.kvdata.WORKLOAD_NAMES`.
        pool_blocks: blocks in the pool, null block included.
        chunk: token budget per step (tokens).
        prefix_caching: enable prefix caching.
        step: the step shown first.
        debounce_s: quiet time before an update runs (seconds); keep it below the play interval.
    """
    c = {
        "model": widgets.Dropdown(options=list(BLOCK_MAP_MODELS), value=model, description="model"),
        "workload": widgets.Dropdown(options=list(WORKLOAD_NAMES), value=workload_name,
                                     description="workload"),
        "pool_blocks": widgets.SelectionSlider(options=[128, 256, 384, 512, 768, 1024], value=pool_blocks,
                                               description="pool (blocks)", continuous_update=False),
        "chunk": widgets.SelectionSlider(options=[256, 512, 1024, 2048], value=chunk,
                                         description="chunk (tok)", continuous_update=False),
        "prefix_caching": widgets.Checkbox(value=prefix_caching, description="prefix caching"),
        "step": widgets.IntSlider(value=step, min=0, max=step, description="step"),
    }
    for name, w in c.items():
        if name != "prefix_caching":
            labelled(w)
    play = widgets.Play(value=step, min=0, max=step, interval=400, description="play")
    widgets.jslink((play, "value"), (c["step"], "value"))
    figures = {"blocks": empty_figure_widget(800)}

    def render():
        cfg = block_map_config(c["model"].value, c["pool_blocks"].value, c["chunk"].value,
                               c["prefix_caching"].value)
        result = _run(cfg, c["workload"].value)
        explorer.result = result
        last = len(result.timeline) - 1
        for w in (c["step"], play):
            w.max = last
        step = min(c["step"].value, last)
        rec = blocks_at(cfg, c["workload"].value, step)
        order = [r.request_id for r in workload(c["workload"].value, MAX_MODEL_LEN)]
        states = rec.block_states or []
        shared = sum(1 for b in states if b.is_shared)
        cached_free = sum(1 for b in states if b.is_free and b.is_cached)
        message = (f"step {step} of {last}: {rec.num_running} running, {rec.num_waiting} waiting; "
                   f"{rec.pool_size - rec.free_blocks:,} of {rec.pool_size:,} usable blocks in use, "
                   f"{shared} shared by a prefix hit, {cached_free} free but still cached.")
        if result.summary.stalled is not None:
            explorer.status.note(f"{message} The run stalls at step {result.summary.stalled.step}: "
                                 f"{result.summary.stalled.reason}.")
        else:
            explorer.status.ok(message)
        return {"blocks": block_map_figure(
            states, request_order=order, group_kinds=result.group_kinds,
            title=f"Block pool after step {step} ({cfg.model_kv.name}, {c['workload'].value})",
        )}

    explorer = Explorer(c, figures, render, debounce_s=debounce_s)
    explorer.result = None
    explorer.controls["play"] = play
    explorer.ui = widgets.VBox([
        widgets.HBox([c["model"], c["workload"], c["prefix_caching"]]),
        widgets.HBox([c["pool_blocks"], c["chunk"]]),
        widgets.HBox([play, c["step"]]),
        explorer.status.widget, figures["blocks"],
    ])
    explorer.update()
    return explorer
