"""Memory explorer: bytes per token, pool size, capacity and concurrency of a model as vLLM sizes it.

Controls: model (presets, or a ``config.json`` uploaded with the upload button), KV-cache dtype, block
size, KV-cache memory of one GPU, tensor parallelism, ``max_model_len``, token budget per step and
the vLLM profile. Every number comes from :func:`kvlab.serving.capacity` (the same function as
``kvlab capacity``); the explorer compares the model with the same model whose layers all use full
attention, which is what a sliding window saves.

Figures: ``bytes`` (per token per layer, by layer type), ``memory`` (pool memory one
``max_model_len`` request holds, by group), ``concurrency`` (max concurrency vs ``max_model_len``).
``summary`` (an HTML pane) shows the plan's numbers and vLLM's log lines.
"""

from __future__ import annotations

import json

import ipywidgets as widgets

from kvlab.analysis import as_full_attention, concurrency_curve, layer_type_bytes, request_blocks_by_group
from kvlab.models import PRESET_NAMES, ModelKV, get_model, model_from_hf_config
from kvlab.plots.memory import bytes_per_token_figure, concurrency_figure, request_memory_figure
from kvlab.plots.style import format_bytes
from kvlab.plots.tables import html_log_lines, html_table
from kvlab.quantization import SCHEME_NAMES
from kvlab.serving import EngineConfig, capacity
from kvlab.sizing import PROFILE_NAMES
from kvlab.widgets.explorer import Explorer, empty_figure_widget, labelled
from kvlab.widgets.stale import NumberPanel

GIB = 2**30
#: ``max_model_len`` choices (tokens).
MAX_MODEL_LENS: tuple[int, ...] = tuple(2**k for k in range(11, 19))
UPLOADED_PREFIX = "uploaded: "


def _curve_lengths(model: ModelKV) -> list[int]:
    top = max(model.max_position_embeddings, MAX_MODEL_LENS[0])
    return [n for n in MAX_MODEL_LENS if n <= top] or [MAX_MODEL_LENS[0]]


def build_memory_explorer(
    *,
    model: str = "gemma-3-27b",
    kv_cache_dtype: str = "auto",
    block_size: int = 16,
    kv_memory_gib: float = 20.0,
    tensor_parallel_size: int = 1,
    max_model_len: int = 32768,
    max_num_batched_tokens: int = 8192,
    profile: str = "vllm-0.33",
    debounce_s: float = 0.15,
) -> Explorer:
    """Build the memory explorer (see the module docstring).

    Args:
        model: a preset name (:data:`kvlab.models.PRESET_NAMES`).
        kv_cache_dtype: ``--kv-cache-dtype``.
        block_size: tokens per block.
        kv_memory_gib: KV-cache memory of one GPU (GiB).
        tensor_parallel_size: GPUs the KV heads are split over.
        max_model_len: tokens per request (one of :data:`MAX_MODEL_LENS`).
        max_num_batched_tokens: token budget per step (tokens); sets the sliding-window footprint.
        profile: the vLLM version imitated.
        debounce_s: quiet time before an update runs (seconds).
    """
    uploaded: dict[str, ModelKV] = {}
    c = {
        "model": widgets.Dropdown(options=list(PRESET_NAMES), value=model, description="model"),
        "upload": widgets.FileUpload(accept=".json", multiple=False, description="config.json"),
        "kv_cache_dtype": widgets.Dropdown(options=list(SCHEME_NAMES), value=kv_cache_dtype,
                                           description="KV dtype"),
        "block_size": widgets.Dropdown(options=[16, 32, 64, 128], value=block_size,
                                       description="block (tok)"),
        "kv_memory_gib": widgets.FloatSlider(value=kv_memory_gib, min=0.5, max=160.0, step=0.5,
                                             description="KV mem/GPU (GiB)", continuous_update=False),
        "tensor_parallel_size": widgets.Dropdown(options=[1, 2, 4, 8], value=tensor_parallel_size,
                                                 description="TP (GPUs)"),
        "max_model_len": widgets.SelectionSlider(options=list(MAX_MODEL_LENS), value=max_model_len,
                                                 description="max len (tok)", continuous_update=False),
        "max_num_batched_tokens": widgets.Dropdown(options=[2048, 4096, 8192, 16384],
                                                   value=max_num_batched_tokens, description="chunk (tok)"),
        "profile": widgets.Dropdown(options=list(PROFILE_NAMES), value=profile, description="profile"),
    }
    for name, w in c.items():
        if name != "upload":
            labelled(w)
    figures = {"bytes": empty_figure_widget(340), "memory": empty_figure_widget(260),
               "concurrency": empty_figure_widget(340)}
    summary = NumberPanel()

    def on_upload(change) -> None:
        files = change["new"]
        if not files:
            return
        f = files[0]
        name = f.get("name", "config.json")
        try:
            data = json.loads(bytes(f["content"]).decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("the file must hold a JSON object")
            mdl = model_from_hf_config(data, name=name, source=f"uploaded {name}")
        except (ValueError, UnicodeDecodeError) as exc:
            explorer.status.error(f"{name}: {exc}")
            return
        label = UPLOADED_PREFIX + name
        uploaded[label] = mdl
        options = [o for o in c["model"].options if o != label] + [label]
        c["model"].options = options
        c["model"].value = label
        explorer.update()

    def engine_config(mdl: ModelKV) -> EngineConfig:
        return EngineConfig(
            mdl, kv_cache_memory=c["kv_memory_gib"].value * GIB, kv_cache_dtype=c["kv_cache_dtype"].value,
            block_size=c["block_size"].value, max_model_len=c["max_model_len"].value,
            max_num_batched_tokens=c["max_num_batched_tokens"].value,
            tensor_parallel_size=c["tensor_parallel_size"].value, profile=c["profile"].value,
        )

    def render():
        name = c["model"].value
        mdl = uploaded[name] if name in uploaded else get_model(name)
        cfg = engine_config(mdl)
        windowed = mdl.count("sliding_window") + mdl.count("chunked_local") > 0
        full_cfg = cfg.replace(model=as_full_attention(mdl)) if windowed else None
        figs = {}
        if explorer.changed("bytes", (mdl, cfg.kv_cache_dtype, cfg.block_size, cfg.tensor_parallel_size)):
            figs["bytes"] = bytes_per_token_figure(
                layer_type_bytes(mdl, cfg.kv_cache_dtype, cfg.block_size, cfg.tensor_parallel_size),
                title=f"{mdl.name}: bytes per token per layer on one GPU ({cfg.kv_cache_dtype})",
            )
        curve_key = (mdl, cfg.kv_cache_memory, cfg.kv_cache_dtype, cfg.block_size, cfg.tensor_parallel_size,
                     cfg.max_num_batched_tokens, cfg.profile, cfg.max_model_len)
        if explorer.changed("concurrency", curve_key):
            lengths = _curve_lengths(mdl)
            curves = {"as configured": concurrency_curve(cfg, lengths)}
            if full_cfg is not None:
                curves["every layer full attention"] = concurrency_curve(full_cfg, lengths)
            figs["concurrency"] = concurrency_figure(
                curves, current_len=cfg.max_model_len,
                title=(f"Requests of max_model_len that fit at once "
                       f"({format_bytes(cfg.kv_cache_memory)} per GPU)"),
            )
        try:
            plan = capacity(cfg)
        except ValueError as exc:  # vLLM's startup errors: keep the figures that still make sense
            explorer.fail(f"vLLM would not start: {exc}")
            explorer.changed("memory", None)
            return figs
        full_plan = None
        full_error = ""
        if full_cfg is not None:
            try:
                full_plan = capacity(full_cfg)
            except ValueError as exc:
                full_error = str(exc)
        if explorer.changed("memory", curve_key):
            configs = {"as configured": request_blocks_by_group(plan)}
            pools = {"as configured": (plan.num_blocks - 1) * plan.bytes_per_block}
            if full_plan is not None:
                configs["every layer full"] = request_blocks_by_group(full_plan)
                pools["every layer full"] = (full_plan.num_blocks - 1) * full_plan.bytes_per_block
            figs["memory"] = request_memory_figure(
                configs, pools,
                title=f"Pool memory one {cfg.max_model_len:,}-token request holds at its peak",
            )
        rows = [["groups", len(plan.config.groups)], ["bytes per block", f"{plan.bytes_per_block:,}"],
                ["num_blocks (incl. null)", f"{plan.num_blocks:,}"],
                ["blocks per max-length request", f"{plan.blocks_per_max_request:,}"],
                ["max concurrency", f"{plan.max_concurrency:.2f}"],
                ["GPU KV cache size (tokens)", f"{plan.kv_cache_tokens:,}"]]
        headers = ["", "as configured"]
        if full_plan is not None:
            headers.append("every layer full")
            fp = full_plan
            extra = [len(fp.config.groups), f"{fp.bytes_per_block:,}", f"{fp.num_blocks:,}",
                     f"{fp.blocks_per_max_request:,}", f"{fp.max_concurrency:.2f}", f"{fp.kv_cache_tokens:,}"]
            rows = [[*r, e] for r, e in zip(rows, extra, strict=True)]
        summary.value = (html_table(headers, rows, caption=f"{mdl.name}, {cfg.profile}")
                         + html_log_lines(plan.log_lines, caption="what vLLM logs at startup"))
        gain = ""
        if full_plan is not None:
            gain = f" ({plan.max_concurrency / full_plan.max_concurrency:.2f}× the all-full model)"
        message = (f"{mdl.name}: {plan.num_blocks:,} blocks of {format_bytes(plan.bytes_per_block)}; "
                   f"max concurrency {plan.max_concurrency:.2f} at {plan.max_model_len:,} tokens{gain}.")
        if full_error:
            explorer.status.note(f"{message} With every layer full attention vLLM would not start: "
                                 f"{full_error}")
        elif not windowed:
            explorer.status.note(message + " This model has no sliding-window layers: nothing to compare.")
        else:
            explorer.status.ok(message)
        return figs

    explorer = Explorer(c, figures, render, panels={"summary": summary}, debounce_s=debounce_s)
    explorer.summary = summary
    c["upload"].unobserve(explorer.handlers["upload"], names="value")
    c["upload"].observe(on_upload, names="value")
    explorer.ui = widgets.VBox([
        widgets.HBox([c["model"], c["upload"], c["kv_cache_dtype"]]),
        widgets.HBox([c["kv_memory_gib"], c["tensor_parallel_size"], c["block_size"]]),
        widgets.HBox([c["max_model_len"], c["max_num_batched_tokens"], c["profile"]]),
        explorer.status.widget, summary, figures["bytes"], figures["memory"], figures["concurrency"],
    ])
    explorer.update()
    return explorer
