"""How much the attention *output* changes when K and V come from a quantized cache.

The error of single numbers says little on its own: softmax can amplify key errors (a score error
``Δs`` scales a weight by ``e^Δs``) and average value errors away. :func:`attention_error_vs_context`
measures the quantity that reaches the next layer: the float64 attention output over the restored
K/V against the same attention over the original K/V (the truth), for a few query tokens at the end
of contexts of growing length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvlab.analysis.round_trip import RoundTrip
from kvlab.reference import prefix_attention, relative_error


@dataclass(frozen=True)
class ContextError:
    """Attention-output error at one context length.

    Attributes:
        context: tokens in the cache when the queries attend (tokens).
        rel_error: ``‖out_quantized − out_truth‖₂ / ‖out_truth‖₂`` over the queries and heads.
    """

    context: int
    rel_error: float


def default_contexts(num_tokens: int, smallest: int = 16) -> list[int]:
    """Context lengths ``smallest, 2·smallest, …`` up to ``num_tokens`` (always included)."""
    out, c = [], smallest
    while c < num_tokens:
        out.append(c)
        c *= 2
    return [*out, num_tokens]


def context_outputs(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    contexts: Sequence[int],
    *,
    num_queries: int = 4,
    sliding_window: int | None = None,
) -> list[torch.Tensor]:
    """Float64 attention outputs at the end of each context (see :func:`attention_error_vs_context`).

    Returns one ``[num_queries, num_q_heads, head_size]`` tensor per context.
    """
    n = keys.shape[0]
    for c in contexts:
        if not num_queries <= c <= n:
            raise ValueError(f"context {c} must be within [{num_queries}, {n}] tokens")
    return prefix_attention(queries, keys, values, contexts, num_queries=num_queries,
                            sliding_window=sliding_window)


def attention_error_vs_context(
    queries: torch.Tensor,
    keys: RoundTrip,
    values: RoundTrip,
    contexts: Sequence[int],
    *,
    num_queries: int = 4,
    sliding_window: int | None = None,
    truth: Sequence[torch.Tensor] | None = None,
) -> list[ContextError]:
    """Relative error of causal attention over restored K/V vs the original K/V.

    For each context ``c`` the last ``num_queries`` tokens ``c − num_queries … c − 1`` attend causally
    to keys ``0 … c − 1`` (a prefill chunk at the end of the context; ``num_queries = 1`` is a decode).

    Args:
        queries: ``[tokens, num_q_heads, head_size]`` queries of the same sequence.
        keys, values: round trips of ``[tokens, num_kv_heads, head_size]`` K and V.
        contexts: context lengths in tokens, each within ``[num_queries, tokens]``.
        num_queries: query tokens per context.
        sliding_window: optional window ``W`` (tokens).
        truth: the outputs over the original K/V from :func:`context_outputs` with the same arguments,
            when already computed (comparing several schemes on one sample shares them).
    """
    kw = dict(num_queries=num_queries, sliding_window=sliding_window)
    if truth is None:
        truth = context_outputs(queries, keys.original, values.original, contexts, **kw)
    if len(truth) != len(contexts):
        raise ValueError(f"truth holds {len(truth)} outputs for {len(contexts)} contexts")
    quant = context_outputs(queries, keys.restored, values.restored, contexts, **kw)
    return [ContextError(c, relative_error(o, t)) for c, o, t in zip(contexts, quant, truth, strict=True)]
