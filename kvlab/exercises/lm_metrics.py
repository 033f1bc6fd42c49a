"""Check for exercise 11: the three numbers that say whether a KV cache changed a model's answers.

From the next-token logits of the unquantized cache and of a quantized one at every position of a
text, and the tokens that really come next, the learner computes perplexity, top-1 agreement and
mean KL divergence. kvlab's :func:`kvlab.lm.scoring.next_token_metrics` (what ``kvlab quality``
uses) is the answer key, evaluated in float64.

A case worked by hand (in the edge cases): two tokens, baseline logits ``[ln 2, 0]`` (probabilities
2/3, 1/3), quantized-cache logits ``[ln 3, 0]`` (3/4, 1/4), next token 0. Then perplexity =
1 / (3/4) = 4/3, both argmaxes are token 0 (agreement 1), and
KL = 2/3·ln((2/3)/(3/4)) + 1/3·ln((1/3)/(1/4)) = 2/3·ln(8/9) + 1/3·ln(4/3) ≈ 0.017374 nats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from kvlab.exercises.compare import close_float
from kvlab.exercises.learner_check import check_learner
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    choice,
    function_trial,
    randint,
    random_cases,
)
from kvlab.lm.scoring import next_token_metrics

_NAMES = ("perplexity", "top1_agreement", "mean_kl")


def cache_metrics(base_logits: torch.Tensor, logits: torch.Tensor, targets: torch.Tensor
                  ) -> tuple[float, float, float]:
    """kvlab's answer: ``(perplexity, top1_agreement, mean_kl)`` in float64."""
    base = torch.log_softmax(base_logits.double(), -1)
    lp = torch.log_softmax(logits.double(), -1)
    nll, _, agree, kl = next_token_metrics(base, lp, targets.long())
    return float(torch.exp(nll.mean())), float(agree.double().mean()), float(kl.mean())


def _random_logits(gen: torch.Generator) -> dict[str, Any]:
    positions, vocab = randint(gen, 1, 40), choice(gen, (2, 5, 50, 1000))
    base = torch.randn(positions, vocab, generator=gen) * choice(gen, (0.5, 2.0, 6.0))
    noise = choice(gen, (1e-3, 0.05, 0.5, 2.0))
    return {"base_logits": base, "logits": base + noise * torch.randn(positions, vocab, generator=gen),
            "targets": torch.randint(0, vocab, (positions,), generator=gen)}


def _edge_cases() -> list[Case]:
    gen = torch.Generator().manual_seed(11)
    same = torch.randn(6, 30, generator=gen)
    shifted = torch.randn(4, 10, generator=gen)
    return [
        Case("worked by hand: 2 tokens, p = (2/3, 1/3), q = (3/4, 1/4)",
             {"base_logits": torch.tensor([[math.log(2), 0.0]]), "logits": torch.tensor([[math.log(3), 0.0]]),
              "targets": torch.tensor([0])}, edge=True),
        Case("identical caches (KL 0, agreement 1)",
             {"base_logits": same, "logits": same.clone(),
              "targets": torch.randint(0, 30, (6,), generator=gen)}, edge=True),
        Case("logits shifted by a constant (same distribution)",
             {"base_logits": shifted, "logits": shifted + 7.5, "targets": torch.arange(4)}, edge=True),
        Case("one position", {"base_logits": torch.tensor([[1.0, 2.0, 3.0]]),
                              "logits": torch.tensor([[3.0, 2.0, 1.0]]), "targets": torch.tensor([1])},
             edge=True),
    ]


def _compare(expected: tuple[float, float, float], got: Any) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        return f"return a tuple (perplexity, top1_agreement, mean_kl); got {type(got).__name__}"
    for what, want, value in zip(_NAMES, expected, got, strict=True):
        problem = close_float(want, value, what, rel_tol=1e-4, abs_tol=1e-7)
        if problem:
            return problem
    return None


def _diagnose(case: Case, expected: tuple[float, float, float], got: Any) -> str | None:
    try:
        ppl, _, kl = (float(v) for v in got)
    except (TypeError, ValueError):
        return None
    a = case.args
    base = torch.log_softmax(a["base_logits"].double(), -1)
    lp = torch.log_softmax(a["logits"].double(), -1)
    reverse = float((lp.exp() * (lp - base)).sum(-1).mean())
    if abs(kl - reverse) <= 1e-4 * max(abs(reverse), 1e-9) and abs(reverse - expected[2]) > 1e-6:
        return ("that is KL(quantized ‖ baseline); the baseline's probabilities weight the sum: "
                "Σ p_b (log p_b − log q)")
    nll = -lp.gather(1, a["targets"].long()[:, None]).squeeze(1)
    if abs(ppl - float(torch.exp(nll).mean())) <= 1e-4 * ppl and nll.numel() > 1:
        return "perplexity is exp(mean of −log p), not the mean of exp(−log p)"
    raw = -a["logits"].double().gather(1, a["targets"].long()[:, None]).squeeze(1)
    if abs(ppl - float(torch.exp(raw.mean()))) <= 1e-4 * max(ppl, 1e-9):
        return "logits are not log-probabilities: apply torch.log_softmax(logits, dim=-1) first"
    return None


def check_cache_metrics(
    cache_metrics_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[float, float, float]],
    *,
    seed: int | None = None,
    num_random: int = 100,
) -> CheckResult:
    """Check ``cache_metrics(base_logits, logits, targets) -> (perplexity, top1_agreement, mean_kl)``.

    ``base_logits`` and ``logits`` are ``[positions, vocab]`` next-token logits of the unquantized and
    the quantized cache, ``targets`` ``[positions]`` the tokens that come next. Compared with
    :func:`cache_metrics` (float64) to a relative 1e-4.
    """
    return check_learner(
        cache_metrics_fn, "cache_metrics", "check_cache_metrics", seed=seed,
        cases=lambda s: _edge_cases() + random_cases(num_random, s, _random_logits),
        trial=lambda fn: function_trial(fn, cache_metrics, _compare, _diagnose),
        verified="perplexity, top-1 agreement and mean KL (float64, rel. 1e-4)",
    )
