"""Quantization explorer: how much each KV-cache format changes K, V and the attention output.

Controls: data source (synthetic or real MiniLM K/V), MiniLM layer, scheme, int8 rounding, outlier
strength, head size, context length, and the head shown in the heatmaps. Figures:

* ``heatmap`` — ``|restored − original|`` per token × channel for K and V of one head;
* ``histogram`` — distribution of the errors over the whole sample (log axis);
* ``attention`` — relative error of the attention output vs context length, every scheme;
* ``bytes`` — bytes per token per layer, data and scales, every scheme.
"""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as widgets
import torch

from kvlab.analysis import (
    RoundTrip,
    attention_error_vs_context,
    context_outputs,
    default_contexts,
    effective_rounding,
    log_error_histogram,
    round_trip,
    scheme_bytes,
)
from kvlab.kvdata import MINILM_MAX_TOKENS, kv_sample, minilm_unavailable_reason
from kvlab.plots import (
    attention_error_figure,
    error_heatmaps_figure,
    error_histogram_figure,
    scale_bytes_figure,
)
from kvlab.validation import require_finite
from kvlab.widgets.explorer import Explorer, empty_figure_widget, labelled

#: The schemes compared (one name per distinct format; ``fp8`` is ``fp8_e4m3``, ``auto`` is bf16).
COMPARED_SCHEMES: tuple[str, ...] = (
    "bfloat16", "fp8_e4m3", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head",
)
#: Rows of the heatmaps (tokens); longer samples show their first rows.
HEATMAP_TOKENS = 256
#: The order in which an update's figures are sent (the attention curve follows, :meth:`Explorer.later`):
#: the heatmaps' grids (about 1 MB) last, so that the page draws the other figures meanwhile.
SEND_ORDER: tuple[str, ...] = ("histogram", "bytes", "heatmap")
#: Query tokens per context in the attention-error curve.
QUERIES_PER_CONTEXT = 4
#: KV heads and query heads of the synthetic sample (GQA group of 4).
SYNTHETIC_KV_HEADS = 4
SYNTHETIC_Q_HEADS = 16


@lru_cache(maxsize=8)
def _sample(source: str, layer: int, num_tokens: int, head_size: int, outlier: float, seed: int):
    return kv_sample(source, num_tokens=num_tokens, num_kv_heads=SYNTHETIC_KV_HEADS, head_size=head_size,
                     num_q_heads=SYNTHETIC_Q_HEADS, outlier_strength=outlier, layer=layer, seed=seed)


#: Float64 copies of a sample's K and V by (sample key, ``"k"``/``"v"``) → (tensor, copy): one per
#: tensor, shared by the five schemes' round trips and the reference attention; a copy is reused
#: only for the very tensor it was made from.
_float64_copies: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
_MAX_FLOAT64_COPIES = 16


def _as_float64(sample_key: tuple, role: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, x as float64)`` for the sample's keys (``role="k"``) or values, checked finite once."""
    sample = _sample(*sample_key)
    x = sample.keys if role == "k" else sample.values
    hit = _float64_copies.get((sample_key, role))
    if hit is not None and hit[0] is x:
        return hit
    require_finite(x, "keys" if role == "k" else "values")
    if len(_float64_copies) >= _MAX_FLOAT64_COPIES:
        _float64_copies.pop(next(iter(_float64_copies)))  # the oldest
    _float64_copies[(sample_key, role)] = (x, x.to(torch.float64))
    return _float64_copies[(sample_key, role)]


def _trip(sample_key: tuple, role: str, scheme: str, rounding: str) -> RoundTrip:
    x, x64 = _as_float64(sample_key, role)
    return round_trip(x, scheme, rounding=rounding, role=role, original=x64, check_finite=False)


#: Round trips of V by (sample key without the outlier strength, scheme, rounding) → (values, trip).
#: Synthetic values do not depend on the outlier strength (it only offsets keys and queries), so a
#: new strength reuses them; the stored values are compared with the sample's before reuse.
_value_trips: dict[tuple, tuple[torch.Tensor, RoundTrip]] = {}
_MAX_VALUE_TRIPS = 64


def _value_round_trip(sample_key: tuple, scheme: str, rounding: str) -> RoundTrip:
    values = _sample(*sample_key).values
    source, layer, num_tokens, head_size, _outlier, seed = sample_key
    key = ((source, layer, num_tokens, head_size, seed), scheme, rounding)
    hit = _value_trips.get(key)
    if hit is not None and hit[0].shape == values.shape and torch.equal(hit[0], values):
        return hit[1]
    trip = _trip(sample_key, "v", scheme, rounding)
    if len(_value_trips) >= _MAX_VALUE_TRIPS:
        _value_trips.pop(next(iter(_value_trips)))  # the oldest
    _value_trips[key] = (values, trip)
    return trip


@lru_cache(maxsize=64)
def _round_trips(sample_key: tuple, scheme: str, rounding: str):
    return _trip(sample_key, "k", scheme, rounding), _value_round_trip(sample_key, scheme, rounding)


@lru_cache(maxsize=64)
def _error_histograms(sample_key: tuple, scheme: str, rounding: str):
    """The K and V error histograms of one round trip (computed once: a few ms each per update)."""
    k, v = _round_trips(sample_key, scheme, rounding)
    return log_error_histogram(k.abs_error), log_error_histogram(v.abs_error)


@lru_cache(maxsize=8)
def _truth(sample_key: tuple, contexts: tuple[int, ...]):
    s = _sample(*sample_key)
    return context_outputs(s.queries, _as_float64(sample_key, "k")[1], _as_float64(sample_key, "v")[1],
                           contexts, num_queries=QUERIES_PER_CONTEXT)


@lru_cache(maxsize=64)
def _attention_errors(sample_key: tuple, scheme: str, rounding: str, contexts: tuple[int, ...]):
    s = _sample(*sample_key)
    k, v = _round_trips(sample_key, scheme, rounding)
    return attention_error_vs_context(s.queries, k, v, contexts, num_queries=QUERIES_PER_CONTEXT,
                                      truth=_truth(sample_key, contexts))


def build_quantization_explorer(
    *,
    source: str = "synthetic",
    scheme: str = "int8_per_token_head",
    rounding: str = "nearest",
    outlier_strength: float = 20.0,
    head_size: int = 128,
    context: int = 512,
    seed: int = 0,
    debounce_s: float = 0.15,
) -> Explorer:
    """Build the quantization explorer (see the module docstring for what it shows).

    Args:
        source: ``"synthetic"`` or ``"minilm"`` (falls back to synthetic with a note when MiniLM is missing).
        scheme: initial kv-cache dtype (one of :data:`COMPARED_SCHEMES`).
        rounding: int8 rounding, ``"nearest"`` or ``"truncate"``.
        outlier_strength: synthetic outlier offset (× the ordinary channels' std).
        head_size: synthetic head size (channels).
        context: tokens in the sample (MiniLM: at most 512).
        seed: seed of the synthetic sample.
        debounce_s: quiet time before an update runs, seconds.
    """
    c = {
        "source": widgets.Dropdown(options=[("synthetic: outliers + RoPE", "synthetic"),
                                            ("MiniLM-L6: real K/V", "minilm")],
                                   value=source, description="K/V data"),
        "layer": widgets.IntSlider(value=2, min=0, max=5, description="MiniLM layer",
                                   continuous_update=False),
        "scheme": widgets.Dropdown(options=list(COMPARED_SCHEMES), value=scheme, description="KV dtype"),
        "rounding": widgets.ToggleButtons(options=["nearest", "truncate"], value=rounding,
                                          description="int8 rounding"),
        "outlier_strength": widgets.FloatSlider(value=outlier_strength, min=0.0, max=50.0, step=2.5,
                                                description="outliers (×σ)", continuous_update=False),
        "head_size": widgets.Dropdown(options=[64, 128, 256], value=head_size, description="head size"),
        "context": widgets.SelectionSlider(options=[64, 128, 256, 512, 1024, 2048], value=context,
                                           description="context (tok)", continuous_update=False),
        "head": widgets.IntSlider(value=0, min=0, max=SYNTHETIC_KV_HEADS - 1, description="heatmap head"),
    }
    for w in c.values():
        labelled(w)
    c["rounding"].style.button_width = "80px"
    figures = {
        "heatmap": empty_figure_widget(420),
        "histogram": empty_figure_widget(),
        "attention": empty_figure_widget(),
        "bytes": empty_figure_widget(),
    }

    def render():
        src = c["source"].value
        notes = []
        if src == "minilm" and minilm_unavailable_reason() is not None:
            notes.append(f"Real K/V unavailable ({minilm_unavailable_reason()}); showing synthetic K/V.")
            src = "synthetic"
        real = src == "minilm"
        c["layer"].disabled = not real
        c["outlier_strength"].disabled = real
        c["head_size"].disabled = real
        sch, rounding = c["scheme"].value, c["rounding"].value
        c["rounding"].disabled = effective_rounding(sch, "truncate") != "truncate"
        context = c["context"].value
        if real and context > MINILM_MAX_TOKENS:
            notes.append(f"MiniLM reads at most {MINILM_MAX_TOKENS} tokens; using {MINILM_MAX_TOKENS}.")
            context = MINILM_MAX_TOKENS
        key = (src, c["layer"].value if real else 0, context,
               c["head_size"].value if not real else 0, c["outlier_strength"].value if not real else 0.0,
               seed if not real else 0)
        sample = _sample(*key)
        used = effective_rounding(sch, rounding)
        c["head"].max = sample.num_kv_heads - 1
        head = min(c["head"].value, sample.num_kv_heads - 1)

        k_rt, v_rt = _round_trips(key, sch, used)
        what = f"{sch}{' (truncate)' if used == 'truncate' else ''}"
        figs = {}
        if explorer.changed("heatmap", (key, sch, used, head)):
            rows = min(HEATMAP_TOKENS, sample.num_tokens)
            k_err, v_err = k_rt.abs_error[:rows, head].numpy(), v_rt.abs_error[:rows, head].numpy()
            figs["heatmap"] = error_heatmaps_figure(
                k_err, v_err, k_rt.original[:rows, head].numpy(), v_rt.original[:rows, head].numpy(),
                title=f"{what}: |error| of head {head}, tokens 0–{rows - 1}, {sample.label}",
            )
        if explorer.changed("histogram", (key, sch, used)):
            figs["histogram"] = error_histogram_figure(
                *_error_histograms(key, sch, used),
                title=f"{what}: error distribution, all {sample.num_kv_heads} heads",
            )
        contexts = tuple(default_contexts(sample.num_tokens))
        if explorer.changed("attention", (key, sch, rounding)):
            def attention():
                """Every compared scheme's curve: drawn after the other figures (:meth:`Explorer.later`)."""
                series = {s: _attention_errors(key, s, effective_rounding(s, rounding), contexts)
                          for s in COMPARED_SCHEMES}
                return {"attention": attention_error_figure(
                    series, highlight=sch,
                    title=(f"Attention-output error vs context ({QUERIES_PER_CONTEXT} queries, "
                           "float64 reference)"),
                )}

            explorer.later(attention, figures=("attention",), views=("attention",))
        if explorer.changed("bytes", (sample.num_kv_heads, sample.head_size, sch)):
            figs["bytes"] = scale_bytes_figure(
                scheme_bytes(COMPARED_SCHEMES, sample.num_kv_heads, sample.head_size), highlight=sch,
                title=(f"Bytes per token per layer ({sample.num_kv_heads} KV heads × "
                       f"{sample.head_size} channels)"),
            )
        last = _attention_errors(key, sch, used, contexts)[-1]
        summary = (f"{what} on {sample.label}: mean |error| K {k_rt.abs_error.mean():.3g}, "
                   f"V {v_rt.abs_error.mean():.3g}; attention error at {last.context} tokens "
                   f"{last.rel_error:.2e}")
        if k_rt.num_saturated or v_rt.num_saturated:
            notes.append(f"{k_rt.num_saturated + v_rt.num_saturated} values saturated.")
        if notes:
            explorer.status.note(" ".join(notes) + " " + summary)
        else:
            explorer.status.ok(summary)
        # sent in this order: the page draws the small figures while the heatmaps' grids travel
        return {name: figs[name] for name in SEND_ORDER if name in figs}

    explorer = Explorer(c, figures, render, debounce_s=debounce_s)
    controls = widgets.VBox([
        widgets.HBox([c["source"], c["layer"], c["scheme"]]),
        widgets.HBox([c["outlier_strength"], c["head_size"], c["context"]]),
        widgets.HBox([c["rounding"], c["head"]]),
    ])
    explorer.ui = widgets.VBox([
        controls, explorer.status.widget, figures["heatmap"], figures["attention"], figures["histogram"],
        figures["bytes"],
    ], layout=widgets.Layout(width="100%"))
    explorer.update()
    return explorer
