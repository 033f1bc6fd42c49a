"""Per-scheme quality of a KV cache on a real model: the table of ``kvlab quality`` and lesson 07.

Builds on :func:`kvlab.lm.score_tokens` (teacher-forced numbers per position) and
:func:`kvlab.lm.generate_greedy` (greedy continuations), and reduces them to one row per cache
variant, to error-against-position bins, and to first divergences of the generations.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from kvlab.lm.forward import LlamaModel
from kvlab.lm.generation import Generation, first_divergence, generate_greedy
from kvlab.lm.scoring import PositionScores
from kvlab.lm.variants import BASELINE_SCHEME, CacheVariant, has_rounding_choice


@dataclass(frozen=True)
class QualityRow:
    """One cache variant on one text.

    Attributes:
        kv_cache_dtype: scheme name.
        rounding: int8 rounding (``"truncate"`` is vLLM's store; ``None`` where it does not apply).
        tokens: tokens scored (predictions = tokens − 1).
        perplexity: ``exp(mean −log p(next token))``.
        top1_agreement: fraction of positions whose argmax equals the unquantized cache's.
        mean_kl: mean KL(unquantized ‖ this cache) of the next-token distributions, nats.
        saturated: per-tensor fp8 values clamped to the format's range while writing.
        first_divergence: per prompt, index of the first generated token that differs from the
            unquantized cache's generation (``None``: identical); empty when nothing was generated.
    """

    kv_cache_dtype: str
    rounding: str | None
    tokens: int
    perplexity: float
    top1_agreement: float
    mean_kl: float
    saturated: int = 0
    first_divergence: tuple[int | None, ...] = ()

    def as_json(self) -> dict:
        """The row as a JSON-ready dict."""
        d = asdict(self)
        d["first_divergence"] = list(self.first_divergence)
        return d


def quality_rows(scores: dict[str, PositionScores],
                 divergences: dict[str, tuple[int | None, ...]] | None = None) -> list[QualityRow]:
    """One :class:`QualityRow` per scored variant, in the order of ``scores``."""
    rows = []
    for label, s in scores.items():
        v = s.variant
        rows.append(QualityRow(
            kv_cache_dtype=v.scheme,
            rounding=v.rounding if has_rounding_choice(v.scheme) else None,
            tokens=s.num_predictions + 1,
            perplexity=s.perplexity,
            top1_agreement=s.top1_agreement,
            mean_kl=s.mean_kl,
            saturated=s.saturated,
            first_divergence=(divergences or {}).get(label, ()),
        ))
    return rows


def error_by_position(scores: PositionScores, bin_size: int) -> list[dict[str, float]]:
    """Perplexity, top-1 agreement and mean KL in consecutive bins of ``bin_size`` positions.

    Returns one dict per bin with ``start``, ``end`` (positions, end exclusive) and the three metrics.
    """
    out = []
    n = scores.num_predictions
    for lo in range(0, n, bin_size):
        hi = min(n, lo + bin_size)
        out.append({
            "start": lo, "end": hi,
            "perplexity": float(torch.exp(scores.nll[lo:hi].double().mean())),
            "top1_agreement": float(scores.agree[lo:hi].double().mean()),
            "mean_kl": float(scores.kl[lo:hi].double().mean()),
        })
    return out


def compare_generations(
    model: LlamaModel,
    prompts: Sequence[str],
    variants: Sequence[CacheVariant],
    *,
    max_new_tokens: int = 16,
    sliding_window: int | None = None,
) -> tuple[list[Generation], dict[str, list[Generation]], dict[str, tuple[int | None, ...]]]:
    """Greedy generations of the unquantized cache and of each variant, and their first divergences.

    Returns ``(baseline generations, {label: generations}, {label: first divergence per prompt})``.
    """
    base = generate_greedy(model, prompts, CacheVariant(BASELINE_SCHEME), max_new_tokens=max_new_tokens,
                           sliding_window=sliding_window)
    gens, div = {}, {}
    for v in variants:
        g = base if v.scheme == BASELINE_SCHEME else generate_greedy(
            model, prompts, v, max_new_tokens=max_new_tokens, sliding_window=sliding_window)
        gens[v.label] = g
        div[v.label] = tuple(first_divergence(a.token_ids, b.token_ids) for a, b in zip(base, g, strict=True))
    return base, gens, div


#: The file ``benchmarks/lm_quality_cpu.py`` writes the position table to.
POSITION_TABLE = "lm_quality_by_position.csv"


def recorded_by_position(start: str | Path | None = None) -> dict[str, list[dict[str, float]]] | None:
    """The recorded position table (``benchmarks/results/lm_quality_by_position.csv``) as
    ``{label: bins}``, from the nearest ``benchmarks/results`` at or above ``start`` (default: the
    working directory); ``None`` when there is none."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        path = folder / "benchmarks" / "results" / POSITION_TABLE
        if path.is_file():
            out: dict[str, list[dict[str, float]]] = {}
            with path.open(newline="") as f:
                for row in csv.DictReader(f):
                    label = row.pop("kv_cache_dtype")
                    out.setdefault(label, []).append({k: float(v) for k, v in row.items()})
            return out
    return None
