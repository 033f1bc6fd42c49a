"""The error-versus-bytes frontier of every KV scheme: one table (CSV) and one figure (HTML).

Samples: synthetic K/V with outlier key channels and RoPE (4 KV heads, head 128, 2,048 tokens) and
the real K/V of MiniLM-L6 (12 heads of 32 channels, 512 tokens, all six layers, mean error). For each
scheme the last 16 tokens attend over a paged cache of that scheme, in float64, against the same
attention over the original K/V (:mod:`kvlab.analysis.frontier`). Bytes per token are also given for a
Llama-3.1-8B-shaped layer (8 KV heads, head 128, block 16).

The real-model columns (``lm_*``) come from kvlab's runnable model, SmolLM2-135M-Instruct (3 KV heads
of 64 channels, 30 layers), every layer's K/V stored in a paged cache of the scheme: perplexity of the
first ``--lm-tokens`` tokens of the shipped prose, top-1 agreement and mean KL against the unquantized
(fp32) cache (:mod:`kvlab.analysis.frontier_lm`, the numbers of ``kvlab quality``).

Usage: ``PYTHONPATH=. python benchmarks/frontier.py [--lm-tokens N | --no-lm]`` (CPU; the K/V part
takes about two minutes on two cores, the model part about a minute per scheme at 512 tokens).
Writes ``benchmarks/results/frontier.csv`` and ``benchmarks/results/frontier.html``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import os
import statistics

from kvlab.analysis.frontier import FRONTIER_SCHEMES, FrontierPoint, frontier, on_frontier
from kvlab.analysis.frontier_lm import model_quality
from kvlab.kvdata.samples import MINILM_LAYERS, kv_sample
from kvlab.plots.frontier import frontier_figure
from kvlab.quantization import get_scheme, kv_bytes_per_token

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def minilm_mean(points_by_layer: list[list[FrontierPoint]]) -> list[FrontierPoint]:
    """One point per scheme: the mean error over the layers."""
    out = []
    for per_scheme in zip(*points_by_layer, strict=True):
        p = per_scheme[0]
        err = statistics.fmean(q.rel_error for q in per_scheme)
        out.append(dataclasses.replace(p, rel_error=err, source="MiniLM-L6, mean of 6 layers"))
    return out


def _fmt(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.4g}"


def real_model_columns(lm_tokens: int) -> dict[str, dict[str, str]]:
    """``lm_*`` columns per scheme (empty strings when the model is not installed or does not fit)."""
    from kvlab.lm import ModelFileMissing

    try:
        quality = model_quality(FRONTIER_SCHEMES, max_tokens=lm_tokens)
    except ModelFileMissing as err:
        print(f"real-model columns skipped: {err}")
        return {}
    base = quality["auto"]
    print(f"real model: {base.model}, {base.tokens} tokens, unquantized (fp32) cache perplexity "
          f"{base.perplexity:.4f}")
    return {name: dict(lm_perplexity=_fmt(q.perplexity), lm_top1_agreement=_fmt(q.top1_agreement),
                       lm_mean_kl=_fmt(q.mean_kl), lm_note=q.note)
            for name, q in quality.items()}


def main(lm_tokens: int | None) -> None:
    lm = real_model_columns(lm_tokens) if lm_tokens else {}
    synthetic = frontier(kv_sample("synthetic", num_tokens=2048, num_kv_heads=4, head_size=128))
    minilm_sample = kv_sample("minilm", layer=0)
    if minilm_sample.source == "minilm":
        minilm = minilm_mean([frontier(kv_sample("minilm", layer=i)) for i in range(MINILM_LAYERS)])
    else:
        print(f"MiniLM skipped: {minilm_sample.note}")
        minilm = []
    rows = []
    best = {p.scheme for p in on_frontier(synthetic)} | {p.scheme for p in on_frontier(minilm)}
    for i, name in enumerate(FRONTIER_SCHEMES):
        s, m = synthetic[i], (minilm[i] if minilm else None)
        rows.append(dict(
            scheme=name, kind="vLLM" if get_scheme(name).is_vllm else "kvlab (not in vLLM)",
            bytes_per_token_llama8b=kv_bytes_per_token(name, 8, 128),
            bits_per_element=s.bits_per_element,
            synthetic_rel_err=f"{s.rel_error:.4g}",
            minilm_bits_per_element="" if m is None or m.note else m.bits_per_element,
            minilm_rel_err="" if m is None or m.note else f"{m.rel_error:.4g}",
            on_a_frontier=name in best,
            **lm.get(name, dict(lm_perplexity="", lm_top1_agreement="", lm_mean_kl="", lm_note="")),
        ))
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "frontier.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    fig = frontier_figure(synthetic, "Synthetic K/V (outliers ×20, RoPE, 2,048 tokens)")
    html = os.path.join(RESULTS, "frontier.html")
    fig.write_html(html, include_plotlyjs="cdn")
    if minilm:
        with open(html, "a") as f:
            f.write(frontier_figure(minilm, "MiniLM-L6 K/V (512 tokens, mean of 6 layers)").to_html(
                full_html=False, include_plotlyjs=False))
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm-tokens", type=int, default=512,
                    help="tokens of the shipped prose the real model scores")
    ap.add_argument("--no-lm", action="store_true", help="skip the real-model columns")
    a = ap.parse_args()
    main(None if a.no_lm else a.lm_tokens)
