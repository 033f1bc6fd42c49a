"""One call for paged attention, whichever implementation runs it.

``attention(query, cache, batch, backend="reference")`` runs the float64 oracle;
``backend="triton"`` runs kvlab's Triton kernel (compiled on an NVIDIA GPU, Triton's interpreter on
CPU tensors); ``backend="torch"`` runs the same math in float32 PyTorch, the fast path on a CPU.
All take the same cache and batch objects, so comparing them is one argument apart.
"""

from __future__ import annotations

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.reference.attention import check_softmax_scale, paged_attention_reference
from kvlab.reference.torch_attention import paged_attention_torch
from kvlab.validation import require_choice

BACKENDS: tuple[str, ...] = ("reference", "triton", "torch")


def attention(
    query: torch.Tensor,
    cache: PagedKVCache,
    batch: AttentionBatch,
    *,
    backend: str = "reference",
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """Paged attention of ``query`` over ``cache``.

    Args:
        query: ``[num_tokens, num_q_heads, head_size]`` new tokens of all sequences, packed.
        cache: the layer's paged KV cache (a :class:`~kvlab.cache.LowBitPagedCache` for kvlab's
            low-bit schemes).
        batch: query offsets, sequence lengths and block tables.
        backend: ``"reference"`` (float64 result), ``"triton"`` or ``"torch"`` (float32 PyTorch; both
            return the query dtype).
        scale: softmax scale, default ``1 / sqrt(head_size)``.
        sliding_window: window ``W`` in tokens (a query at ``p`` sees keys ``j`` with ``p − j < W``).
        softcap: logit softcap.

    Returns:
        ``[num_tokens, num_q_heads, head_size]``.
    """
    require_choice(backend, BACKENDS, "backend")
    check_softmax_scale(scale)
    if backend == "reference":
        return paged_attention_reference(
            query, cache, batch, scale=scale, sliding_window=sliding_window, softcap=softcap
        )
    if backend == "torch":
        return paged_attention_torch(
            query, cache, batch, scale=scale, sliding_window=sliding_window, softcap=softcap
        )
    if cache.scheme.mode.is_low_bit:  # kvlab's packed schemes have their own kernel
        from kvlab.kernels.lowbit_attention_call import lowbit_paged_attention

        return lowbit_paged_attention(query, cache, batch, scale=scale, sliding_window=sliding_window,
                                      softcap=softcap)
    from kvlab.kernels import paged_attention

    return paged_attention(query, cache, batch, scale=scale, sliding_window=sliding_window, softcap=softcap)
