"""The checks every paged-attention launcher runs before it sizes a launch (the 16/8-bit kernel of
:mod:`kvlab.kernels.attention` and the low-bit one of :mod:`kvlab.kernels.lowbit_attention_call`):
devices, shapes, options, the softmax scale, the output tensor. Each failure is one ``ValueError``
that says what was wrong and what is allowed.
"""

from __future__ import annotations

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.kernels.devices import require_kernel_device
from kvlab.kernels.launch_config import MAX_HEAD_SIZE, MAX_SPLITS
from kvlab.reference.attention import check_attention_options, check_paged_inputs, check_softmax_scale
from kvlab.validation import require_positive_int, require_power_of_two

_QUERY_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def check_attention_call(
    query: torch.Tensor,
    cache,
    batch: AttentionBatch,
    *,
    stored: torch.Tensor,
    scale: float | None,
    sliding_window: int | None,
    softcap: float | None,
    out: torch.Tensor | None,
    num_splits: int | None,
) -> tuple[float, torch.Tensor, torch.Tensor]:
    """The checks every paged-attention launcher runs before sizing its launch.

    ``cache`` is any paged cache with ``num_kv_heads`` and ``head_size_v`` (this kernel's
    :class:`PagedKVCache` or the low-bit one); ``stored`` is one of its tensors, for the device check.

    Returns:
        ``(σ, out, query)``: the softmax scale (default ``1 / sqrt(head_size)``), the output tensor
        (allocated when ``out`` is None), and the query with a unit last stride.

    Raises:
        ValueError: one message saying what was wrong and what is allowed.
    """
    require_kernel_device(query=query, cache=stored, block_table=batch.block_table, out=out)
    check_paged_inputs(query, cache, batch)
    num_tokens, num_q_heads, head_size = query.shape
    nkv = cache.num_kv_heads
    check_attention_options(num_q_heads, nkv, sliding_window, softcap)
    # the kernels tile a block with tl.arange, whose length must be a power of two
    require_power_of_two(cache.block_size, "block_size", "the Triton kernels tile whole blocks")
    if query.dtype not in _QUERY_DTYPES:
        raise ValueError(
            f"query must be float16, bfloat16 or float32 for the Triton kernel, got {query.dtype}"
        )
    if max(head_size, cache.head_size_v) > MAX_HEAD_SIZE:
        raise ValueError(
            f"head sizes up to {MAX_HEAD_SIZE} are supported, got head_size={head_size}, "
            f"head_size_v={cache.head_size_v}"
        )
    check_softmax_scale(scale)
    sigma = head_size**-0.5 if scale is None else float(scale)
    if num_splits is not None:
        require_positive_int(num_splits, "num_splits")
        if num_splits > MAX_SPLITS:
            raise ValueError(f"num_splits must be <= {MAX_SPLITS}, got {num_splits}")
    hv = cache.head_size_v
    out_shape = (num_tokens, num_q_heads, hv)
    if out is None:
        out = torch.empty(out_shape, dtype=query.dtype, device=query.device)
    else:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != out_shape or out.dtype != query.dtype:
            got = f"{out.dtype} {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"out must be a {query.dtype} tensor of shape {out_shape}, got {got}")
        if out.device != query.device or out.stride(-1) != 1:
            raise ValueError(f"out must be on {query.device} with a contiguous last dimension")
    if query.stride(-1) != 1:
        query = query.contiguous()

    return sigma, out, query
