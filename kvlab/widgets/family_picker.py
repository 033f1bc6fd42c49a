"""Model-family picker: one sentence on each family's memory trick, and where a request's bytes go.

Controls: ``family`` (see :data:`kvlab.analysis.family_views.FAMILY_NAMES`), ``max_model_len``,
``kv_memory_gib`` (KV-cache memory of one GPU). The ``bytes`` figure stacks, for every family's
example, the memory one ``max_model_len`` request holds (attention K/V, state pages, draft K/V), with
the picked family in bold; the ``summary`` pane gives its sentence and its capacity in that memory.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from kvlab.analysis.family_views import FAMILY_NAMES, family_config, family_request_bytes, get_family
from kvlab.plots.family import family_bytes_figure
from kvlab.serving import capacity
from kvlab.widgets.explorer import Explorer, empty_figure_widget, labelled
from kvlab.widgets.memory_explorer import MAX_MODEL_LENS

GIB = 2**30


def build_family_picker(
    *, family: str = FAMILY_NAMES[0], max_model_len: int = 32768, kv_memory_gib: float = 40.0,
    debounce_s: float = 0.15,
) -> Explorer:
    """Build the family picker (see the module docstring); arguments are the initial control values."""
    c = {
        "family": widgets.Dropdown(options=list(FAMILY_NAMES), value=family, description="family"),
        "max_model_len": widgets.SelectionSlider(options=list(MAX_MODEL_LENS), value=max_model_len,
                                                 description="max len (tok)", continuous_update=False),
        "kv_memory_gib": widgets.FloatSlider(value=kv_memory_gib, min=1.0, max=160.0, step=1.0,
                                             description="KV mem/GPU (GiB)", continuous_update=False),
    }
    summary = widgets.HTML()

    def render():
        fam = get_family(c["family"].value)
        length = c["max_model_len"].value
        figs = {}
        if explorer.changed("bytes", (fam.name, length)):
            figs["bytes"] = family_bytes_figure(
                family_request_bytes(length), selected=fam.name,
                title=f"Where one {length:,}-token request's bytes go (one GPU of each example)",
            )
        config = family_config(fam, length).replace(kv_cache_memory=int(c["kv_memory_gib"].value * GIB))
        try:
            plan = capacity(config)
            fit = (f"{plan.max_concurrency:.2f} requests of {length:,} tokens fit in "
                   f"{c['kv_memory_gib'].value:g} GiB per GPU ({plan.num_blocks:,} blocks of "
                   f"{plan.bytes_per_block:,} B, {len(plan.config.groups)} groups)")
        except ValueError as exc:
            fit = f"vLLM would not start: {exc}"
        tp = f", TP {fam.tensor_parallel_size}" if fam.tensor_parallel_size > 1 else ""
        spec = " with MTP (2 tokens)" if fam.speculative_config else ""
        summary.value = (f"<p><b>{html.escape(fam.name)}</b> — <code>{fam.preset}</code>{tp}{spec}</p>"
                         f"<p>{html.escape(fam.trick)}</p><p>{html.escape(fit)}</p>")
        return figs

    figures = {"bytes": empty_figure_widget(height=380)}
    explorer = Explorer(c, figures, render, debounce_s=debounce_s)
    explorer.summary = summary
    explorer.ui = widgets.VBox([
        widgets.HBox([labelled(c["family"]), labelled(c["max_model_len"]), labelled(c["kv_memory_gib"])]),
        explorer.status.widget, summary, figures["bytes"],
    ])
    explorer.update()
    return explorer
