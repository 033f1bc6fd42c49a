# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercise 11 — Did the cache change the answer?
#
# *Follows lesson `07_does_it_change_the_answer`. About 15 minutes.*
#
# `kvlab quality` runs a text through the model twice: once with an unquantized (fp32) KV cache, once
# with a quantized one. At every position both runs give next-token **logits** over the vocabulary.
# Three numbers summarise how much the quantized cache changed the model:
#
# * **perplexity** of the quantized run: `exp(mean over positions of −log q(next token))`, where
#   `q = softmax(logits)`;
# * **top-1 agreement**: the fraction of positions where both runs' most likely token is the same;
# * **mean KL divergence** `KL(p ‖ q) = Σ_v p(v) · (log p(v) − log q(v))` in nats, averaged over
#   positions, with `p` the unquantized run's distribution.
#
# Write `cache_metrics(base_logits, logits, targets)`: `base_logits` and `logits` are
# `[positions, vocab]` tensors (unquantized and quantized cache), `targets` is `[positions]` (the
# token that really comes next). Return `(perplexity, top1_agreement, mean_kl)` as floats.

# %% [markdown]
# **Predict first.** Two tokens; the unquantized run gives probabilities (2/3, 1/3), the quantized
# one (3/4, 1/4); the next token is token 0. What are the three numbers? (Work them out on paper;
# the check includes this case.)

# %% tags=["stub"]
import torch


def cache_metrics(base_logits: torch.Tensor, logits: torch.Tensor,
                  targets: torch.Tensor) -> tuple[float, float, float]:
    """``(perplexity, top1_agreement, mean_kl)`` of the quantized run against the unquantized one."""
    raise NotImplementedError("write cache_metrics")


# %% [markdown]
# <details><summary>Hint 1 — from logits to log-probabilities</summary>
#
# `torch.log_softmax(logits.double(), dim=-1)` gives `log q` for every position and token. Pick the
# target's entry with `lq.gather(1, targets[:, None])`.
# </details>
#
# <details><summary>Hint 2 — which way round is KL?</summary>
#
# `KL(p ‖ q)` weights by the **unquantized** probabilities `p = exp(log p)`: sum over the vocabulary
# (`dim=-1`), then average over positions.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_cache_metrics

result = check_cache_metrics(cache_metrics)
result

# %% [markdown]
# ## Was your prediction right?
#
# Perplexity = 1 / (3/4) = 4/3; both argmaxes are token 0, so agreement is 1; and
# KL = 2/3 · ln(8/9) + 1/3 · ln(4/3) ≈ 0.0174 nats.
