"""Low-bit explorer: pick bits, value group and residual of a KIVI scheme, see where it lands.

Controls: K/V data (synthetic with outlier channels, or MiniLM's real K/V), bits (4 or 2), value
group size G, residual length (blocks), block size and context length. The figure is the
error-versus-bytes frontier (:func:`kvlab.plots.frontier.frontier_figure`) of vLLM's formats and
kvlab's ``int4_per_token_head`` with the chosen KIVI scheme circled; the status line gives its bits
per element, its bytes per token for a Llama-3.1-8B layer, its attention error and what it does to
the maximum concurrency of Gemma 4 31B (TP=2, 16 GiB of KV cache per GPU, 128k context).
"""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as widgets

from kvlab.analysis.frontier import frontier
from kvlab.kvdata import MINILM_MAX_TOKENS, kv_sample, minilm_unavailable_reason
from kvlab.plots.frontier import frontier_figure
from kvlab.quantization import kv_bytes_per_token
from kvlab.serving import EngineConfig, capacity
from kvlab.widgets.explorer import Explorer, empty_figure_widget, labelled

#: The fixed points the chosen KIVI scheme is compared with.
BASELINE_SCHEMES: tuple[str, ...] = ("bfloat16", "fp8_e4m3", "int8_per_token_head", "fp8_per_token_head",
                                     "int4_per_token_head")


@lru_cache(maxsize=8)
def _sample(source: str, context: int):
    return kv_sample(source, num_tokens=context, num_kv_heads=4, head_size=128, num_q_heads=16, layer=2)


@lru_cache(maxsize=64)
def _points(source: str, context: int, scheme: str, block_size: int):
    return tuple(frontier(_sample(source, context), (scheme,), block_size=block_size))


@lru_cache(maxsize=32)
def gemma_concurrency(scheme: str, block_size: int) -> float:
    """Max concurrency of Gemma 4 31B, TP=2, 16 GiB of KV cache per GPU, 131,072-token requests."""
    cfg = EngineConfig("gemma-4-31b", kv_cache_memory="16GiB", tensor_parallel_size=2, max_model_len=131072,
                       kv_cache_dtype=scheme, block_size=block_size)
    return capacity(cfg).max_concurrency


def kivi_name(bits: int, group: int, residual: int) -> str:
    """``kivi<bits>_g<group>_r<residual>``, the registry name of one KIVI configuration."""
    return f"kivi{bits}_g{group}_r{residual}"


def build_frontier_explorer(*, source: str = "synthetic", bits: int = 2, group: int = 32, residual: int = 1,
                            block_size: int = 16, context: int = 512, debounce_s: float = 0.15) -> Explorer:
    """Build the low-bit explorer (see the module docstring for what it shows)."""
    c = {
        "source": widgets.Dropdown(options=[("synthetic: outliers + RoPE", "synthetic"),
                                            ("MiniLM-L6: real K/V", "minilm")], value=source,
                                   description="K/V data"),
        "bits": widgets.ToggleButtons(options=[4, 2], value=bits, description="bits"),
        "group": widgets.Dropdown(options=[32, 64, 128], value=group, description="V group G"),
        "residual": widgets.Dropdown(options=[1, 2, 4, 8], value=residual, description="residual (blocks)"),
        "block_size": widgets.Dropdown(options=[16, 32], value=block_size, description="block size"),
        "context": widgets.SelectionSlider(options=[128, 256, 512, 1024, 2048], value=context,
                                           description="context (tok)", continuous_update=False),
    }
    for w in c.values():
        labelled(w)
    figures = {"frontier": empty_figure_widget(440)}

    def render():
        src, notes = c["source"].value, []
        if src == "minilm" and minilm_unavailable_reason() is not None:
            notes.append(f"Real K/V unavailable ({minilm_unavailable_reason()}); showing synthetic K/V.")
            src = "synthetic"
        context = c["context"].value
        if src == "minilm" and context > MINILM_MAX_TOKENS:
            notes.append(f"MiniLM reads at most {MINILM_MAX_TOKENS} tokens; using {MINILM_MAX_TOKENS}.")
            context = MINILM_MAX_TOKENS
        block = c["block_size"].value
        chosen = kivi_name(c["bits"].value, c["group"].value, c["residual"].value)
        points = [p for name in BASELINE_SCHEMES for p in _points(src, context, name, block)]
        points += _points(src, context, chosen, block)
        mine = points[-1]
        if mine.note:
            raise ValueError(mine.note)
        label = _sample(src, context).label
        figs = {}
        if explorer.changed("frontier", (src, context, block, chosen)):
            figs["frontier"] = frontier_figure(points, f"{chosen} among the other formats: {label}, "
                                                       f"{context} tokens", highlight=chosen)
        llama = kv_bytes_per_token(chosen, 8, 128, block_size=block)
        ratio = gemma_concurrency(chosen, block) / gemma_concurrency("bfloat16", block)
        explorer.status.ok((" ".join(notes) + (
            f" {chosen} (kvlab scheme, not a vLLM --kv-cache-dtype): {mine.bits_per_element:.2f} bits per "
            f"element, {llama} B per token of a Llama-3.1-8B layer (bf16: 4096); attention error "
            f"{mine.rel_error:.3g}; Gemma 4 31B max concurrency {ratio:.2f}x bf16's")).strip())
        return figs

    explorer = Explorer(c, figures, render, debounce_s=debounce_s)
    explorer.ui = widgets.VBox([
        widgets.HBox([c["source"], c["bits"], c["group"]]),
        widgets.HBox([c["residual"], c["block_size"], c["context"]]),
        explorer.status.widget, figures["frontier"],
    ], layout=widgets.Layout(width="100%"))
    explorer.update()
    return explorer
