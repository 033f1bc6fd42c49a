"""How tensor parallelism splits a model's heads, and which splits vLLM refuses.

vLLM checks (``ModelConfig.verify_with_parallel_config``) that the query heads divide evenly over the
tensor-parallel group, then splits the KV projection (``QKVParallelLinear``):

* ``tp <= kv_heads``: each GPU holds ``kv_heads / tp`` KV heads, which must divide exactly;
* ``tp > kv_heads``: each GPU holds one KV head and every head is *replicated* ``tp / kv_heads``
  times, which must also divide exactly.

Example: Llama 3.1 8B (32 query, 8 KV heads): TP 2 → 4 KV heads per GPU, TP 16 → 1 (each head on two
GPUs), TP 3 → refused (32 query heads do not split over 3 GPUs), TP 12 → refused.
An MLA layer caches one latent "head" that every GPU holds whole (no split, nothing to check).
"""

from __future__ import annotations

from kvlab.validation import require_positive_int


def check_query_heads(num_attention_heads: int, num_kv_heads: int, where: str = "model") -> None:
    """Refuse a model whose query heads are not a multiple of its KV heads (GQA needs equal groups).

    Raises:
        ValueError: naming both counts.
    """
    require_positive_int(num_attention_heads, f"num_attention_heads of {where}")
    require_positive_int(num_kv_heads, f"num_key_value_heads of {where}")
    if num_attention_heads % num_kv_heads:
        raise ValueError(
            f"{where}: {num_attention_heads} query heads are not a multiple of {num_kv_heads} KV heads; "
            "grouped-query attention needs every KV head to serve the same number of query heads"
        )


def check_tensor_parallel(
    num_attention_heads: int | None, tensor_parallel_size: int, where: str = "model"
) -> None:
    """vLLM's first check: the query heads must divide evenly over ``tensor_parallel_size`` GPUs.

    Raises:
        ValueError: with vLLM's reason.
    """
    require_positive_int(tensor_parallel_size, "tensor_parallel_size")
    if num_attention_heads is not None and num_attention_heads % tensor_parallel_size:
        raise ValueError(
            f"{where}: total number of attention heads ({num_attention_heads}) must be divisible by the "
            f"tensor parallel size ({tensor_parallel_size}); vLLM refuses this split. Choose a "
            f"tensor_parallel_size that divides {num_attention_heads}."
        )


def kv_heads_per_gpu(total_kv_heads: int, tensor_parallel_size: int, where: str = "layer") -> int:
    """KV heads one GPU caches: ``kv / tp``, or 1 (replicated) when ``tp > kv``.

    Raises:
        ValueError: when neither divides the other (vLLM's ``divide`` assertion).
    """
    require_positive_int(total_kv_heads, f"KV heads of {where}")
    require_positive_int(tensor_parallel_size, "tensor_parallel_size")
    if tensor_parallel_size >= total_kv_heads:
        if tensor_parallel_size % total_kv_heads:
            raise ValueError(
                f"{where}: {total_kv_heads} KV heads cannot be replicated evenly over "
                f"tensor_parallel_size={tensor_parallel_size} GPUs (vLLM replicates KV heads only when the "
                f"tensor parallel size is a multiple of them)"
            )
        return 1
    if total_kv_heads % tensor_parallel_size:
        raise ValueError(
            f"{where}: {total_kv_heads} KV heads cannot be split evenly over tensor_parallel_size="
            f"{tensor_parallel_size} GPUs (vLLM needs the tensor parallel size to divide the KV heads, or to "
            "be a multiple of them)"
        )
    return total_kv_heads // tensor_parallel_size
