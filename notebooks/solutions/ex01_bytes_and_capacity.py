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
# # Solution — Exercise 1, bytes per token and the capacity of a real model

# %% tags=["solution"]
import torch

from kvlab import get_scheme


def bytes_per_token(model, kv_cache_dtype: str) -> int:
    """Bytes one token occupies in the KV cache over all layers of ``model`` (K, V and scales)."""
    scheme = get_scheme(kv_cache_dtype, getattr(torch, model.dtype))
    total = 0
    for layer in model.layers:
        head_size_v = layer.head_size if layer.head_size_v is None else layer.head_size_v
        total += layer.num_kv_heads * (layer.head_size + head_size_v) * scheme.element_bytes
        if scheme.has_token_head_scales:
            total += 2 * layer.num_kv_heads * 4
    return total


# %% tags=["solution"]
def kv_capacity(model, kv_cache_dtype: str, available_bytes: int, max_model_len: int,
                block_size: int) -> tuple[int, float]:
    """``(num_blocks, max_concurrency)`` of vLLM's startup for a full-attention model."""
    bytes_per_block = block_size * bytes_per_token(model, kv_cache_dtype)
    num_blocks = available_bytes // bytes_per_block
    blocks_per_request = -(-max_model_len // block_size)
    return num_blocks, num_blocks / blocks_per_request


# %% [markdown]
# ## Answers
#
# 1. The per-token-head scales: for 8 KV heads per layer they add 2 × 8 × 4 = 64 bytes per layer and
#    token to 2,048 bytes of codes, so a token costs 2,112 instead of 4,096 bytes: 1.94×, not 2×.
# 2. `N` is the total length of the max-length requests that fit at once. For a full-attention model
#    it is close to `num_blocks × block_size`: a little less when `L` is not a multiple of the block
#    size (the last block of each request is partly empty). With sliding-window layers a request
#    holds far fewer blocks than `cdiv(L, B)` in those groups, so `N` can exceed the number of token
#    slots of the pool by a wide margin. (vLLM ≤ 0.20 logged another formula,
#    `(num_blocks // num_groups) × block_size`, which badly under-reports for such models.)
# 3. Each GPU stores 4 KV heads: bytes per token per GPU halve, so with the same memory per GPU the
#    number of blocks — and the concurrency — doubles.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_bytes_per_token, check_kv_capacity

    print(check_bytes_per_token(bytes_per_token))
    print(check_kv_capacity(kv_capacity))
