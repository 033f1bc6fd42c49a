"""Answer explorer (lesson 07): does a quantized KV cache change what a real model says?

Controls: KV scheme, int8 rounding, a sliding window (a what-if: SmolLM2 was trained without one),
the prompt, and the metric plotted against position. Views:

* ``generation`` (HTML) — the greedy continuation of the prompt with the fp32 cache and with the
  chosen cache, token by token, highlighted from the first token where they differ;
* ``bars`` — perplexity, top-1 agreement and mean KL of every scheme on the shipped text;
* ``position`` — the chosen metric in bins of positions, every scheme, the chosen one emphasised.

Every number comes from :mod:`kvlab.lm` (SmolLM2-135M through kvlab's paged cache). A run is cached
per (window) for the scores and per (scheme, rounding, window) for the generations of all prompts,
so once a scheme has been seen, changing the prompt or the metric only redraws. Without the model
file the explorer says how to install it and shows nothing else (it never raises).
"""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as widgets

from kvlab.lm import INSTALL_HINT, CacheVariant, find_model_file
from kvlab.lm.prompts import GENERATION_PROMPTS
from kvlab.lm.variants import BASELINE_SCHEME, has_rounding_choice
from kvlab.plots.lm_quality import error_by_position_figure, quality_bars_figure, token_diff_html
from kvlab.widgets.explorer import Explorer, empty_figure_widget, labelled

#: Windows offered (0 = full attention, as the model was trained).
WINDOWS: tuple[int, ...] = (0, 16, 64, 256)


def _model():
    from kvlab.lm import load_model

    return load_model()


@lru_cache(maxsize=4)
def cached_scores(num_tokens: int, window: int):
    """Scores of every scheme on the first ``num_tokens`` tokens of the shipped text (cached)."""
    from kvlab.lm import all_variants, score_tokens
    from kvlab.lm.corpus import corpus_text
    from kvlab.lm.generation import one_cpu_thread

    model = _model()
    ids = model.encode(corpus_text())[:num_tokens]
    with one_cpu_thread(model.device):  # a few hundred tokens: small operations, see one_cpu_thread
        return score_tokens(model, ids, all_variants(model.config.head_size), sliding_window=window or None)


@lru_cache(maxsize=64)
def cached_generations(scheme: str, rounding: str, window: int,
                       new_tokens: int) -> tuple[tuple[str, ...], ...]:
    """Token texts of the greedy continuation of every prompt under one cache (cached)."""
    from kvlab.lm import generate_greedy

    model = _model()
    gens = generate_greedy(model, GENERATION_PROMPTS, CacheVariant(scheme, rounding),
                           max_new_tokens=new_tokens, sliding_window=window or None)
    return tuple(tuple(model.token_strings(list(g.token_ids))) for g in gens)


def build_answer_explorer(
    *,
    scheme: str = "int8_per_token_head",
    rounding: str = "truncate",
    window: int = 0,
    prompt: int = 0,
    num_tokens: int = 256,
    new_tokens: int = 16,
    debounce_s: float = 0.15,
) -> Explorer:
    """Build the answer explorer (see the module docstring).

    Args:
        scheme: initial kv-cache dtype.
        rounding: int8 rounding, ``"truncate"`` (vLLM's store) or ``"nearest"``.
        window: sliding window in tokens, 0 for full attention.
        prompt: index into :data:`kvlab.lm.prompts.GENERATION_PROMPTS`.
        num_tokens: tokens of the shipped text scored for the bars and the position curves.
        new_tokens: greedy tokens generated per prompt.
        debounce_s: quiet time before an update runs, seconds.
    """
    from kvlab.lm.variants import all_variants

    names = list(dict.fromkeys(v.scheme for v in all_variants(64) if v.scheme != BASELINE_SCHEME))
    c = {
        "scheme": widgets.Dropdown(options=names, value=scheme, description="KV dtype"),
        "rounding": widgets.ToggleButtons(options=["truncate", "nearest"], value=rounding,
                                          description="int8 rounding"),
        "window": widgets.Dropdown(options=[("none (as trained)", 0)] + [(f"{w} tokens", w)
                                                                         for w in WINDOWS[1:]],
                                   value=window, description="window (what-if)"),
        "prompt": widgets.Dropdown(options=[(p.replace("\n", " ")[:48], i)
                                            for i, p in enumerate(GENERATION_PROMPTS)],
                                   value=prompt, description="prompt"),
        "metric": widgets.Dropdown(options=[("mean KL", "mean_kl"), ("top-1 agreement", "top1_agreement"),
                                            ("perplexity", "perplexity")], value="mean_kl",
                                   description="vs position"),
    }
    for w in c.values():
        labelled(w)
    c["rounding"].style.button_width = "80px"
    generation = widgets.HTML()
    figures = {"bars": empty_figure_widget(460), "position": empty_figure_widget(380)}

    def render():
        if find_model_file() is None:
            explorer.status.note(f"The SmolLM2 model file is not installed: {INSTALL_HINT}. "
                                 "Lesson 02's explorer shows the same schemes on MiniLM and synthetic K/V.")
            return {}
        sch, win, metric = c["scheme"].value, c["window"].value, c["metric"].value
        c["rounding"].disabled = not has_rounding_choice(sch)
        rnd = c["rounding"].value if has_rounding_choice(sch) else "nearest"
        variant = CacheVariant(sch, rnd)
        base = cached_generations(BASELINE_SCHEME, "nearest", win, new_tokens)
        mine = cached_generations(sch, rnd, win, new_tokens)
        i = c["prompt"].value
        generation.value = token_diff_html(base[i], mine[i], prompt=GENERATION_PROMPTS[i],
                                           names=("fp32 cache (auto)", variant.label))
        scores = cached_scores(num_tokens, win)
        from kvlab.lm.quality import error_by_position, quality_rows

        figs = {}
        where = f"first {num_tokens} tokens of the shipped text" + (f", window {win}" if win else "")
        if explorer.changed("bars", (win, variant.label)):
            figs["bars"] = quality_bars_figure(quality_rows(scores), highlight=variant.label,
                                               title=f"Every scheme, teacher-forced on the {where}")
        if explorer.changed("position", (win, variant.label, metric)):
            bins = max(16, num_tokens // 8)
            series = {k: error_by_position(v, bins) for k, v in scores.items()
                      if k != BASELINE_SCHEME}
            title = f"Against position ({bins}-token bins), {where}"
            figs["position"] = error_by_position_figure(series, metric, highlight=variant.label, title=title)
        s = scores[variant.label]
        diverged = sum(a != b for a, b in zip(base, mine, strict=True))
        explorer.status.ok(f"{variant.label}: perplexity {s.perplexity:.3f} (fp32 cache "
                           f"{scores[BASELINE_SCHEME].perplexity:.3f}), top-1 agreement "
                           f"{s.top1_agreement:.3f}, mean KL {s.mean_kl:.2e}; "
                           f"{diverged}/{len(base)} generations differ")
        return figs

    explorer = Explorer(c, figures, render, debounce_s=debounce_s)
    explorer.generation = generation
    explorer.ui = widgets.VBox([
        widgets.HBox([c["scheme"], c["rounding"], c["window"]]),
        widgets.HBox([c["prompt"], c["metric"]]),
        explorer.status.widget, generation, figures["bars"], figures["position"],
    ], layout=widgets.Layout(width="100%"))
    explorer.update()
    return explorer
