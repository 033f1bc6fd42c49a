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
# # Exercise 1 — Bytes per token and the capacity of a real model
#
# *Follows lesson `01_memory_and_capacity`. About 25 minutes.*
#
# kvlab describes a model by what its KV cache sees: `model.layers` is a tuple of `LayerKV`, each
# with `num_kv_heads`, `head_size` (K) and `head_size_v` (V; `None` means "same as K"). The model's
# dtype is `model.dtype` (a string such as `"bfloat16"`).
#
# A `--kv-cache-dtype` name becomes a scheme with `kvlab.get_scheme(name, model_dtype)`
# (`"auto"` resolves to the model's dtype, which you pass as a torch dtype, e.g.
# `getattr(torch, model.dtype)`). A scheme knows `element_bytes` (bytes of one stored K or V
# element) and `has_token_head_scales` (True for the per-token-head schemes, which also store **two
# fp32 scales** — one for K, one for V — per token and KV head).
#
# ## Part A — bytes per token
#
# Write `bytes_per_token(model, kv_cache_dtype)`: the bytes one token occupies in the KV cache
# summed over **all** layers (one GPU, no tensor parallelism). Llama-3.1-8B in bf16:
# 32 layers × 8 KV heads × (128 + 128) × 2 bytes = **131,072 bytes** per token.

# %% tags=["stub"]
import torch  # noqa: F401 (you will need it)

from kvlab import get_scheme  # noqa: F401 (you will need it)


def bytes_per_token(model, kv_cache_dtype: str) -> int:
    """Bytes one token occupies in the KV cache over all layers of ``model`` (K, V and scales)."""
    raise NotImplementedError("write bytes_per_token")


# %% [markdown]
# <details><summary>Hint 1 — one layer</summary>
#
# One layer stores, per token, `num_kv_heads × (head_size + head_size_v)` elements of
# `element_bytes` each. Remember that `head_size_v` may be `None`.
# </details>
#
# <details><summary>Hint 2 — the scales</summary>
#
# With a per-token-head scheme, add `2 × num_kv_heads × 4` bytes per layer (fp32 K and V scales).
# Per-tensor fp8 has one scale per *layer*, which does not grow with tokens: add nothing.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_bytes_per_token

check_bytes_per_token(bytes_per_token)

# %% [markdown]
# ## Part B — how many requests fit?
#
# At startup vLLM divides the KV-cache memory into **blocks**. For a model whose layers are all full
# attention, one block id costs one page in *every* layer, so
#
# * `bytes_per_block = block_size × bytes_per_token`;
# * `num_blocks = available_bytes // bytes_per_block` (block 0, the *null block*, is one of them);
# * a request of `max_model_len` tokens holds `cdiv(max_model_len, block_size)` blocks;
# * `max_concurrency = num_blocks / cdiv(max_model_len, block_size)` — the number vLLM logs as
#   "Maximum concurrency for L tokens per request".
#
# Write `kv_capacity(model, kv_cache_dtype, available_bytes, max_model_len, block_size)` returning
# `(num_blocks, max_concurrency)` for a full-attention model. You may call your `bytes_per_token`.

# %% tags=["stub"]
def kv_capacity(model, kv_cache_dtype: str, available_bytes: int, max_model_len: int,
                block_size: int) -> tuple[int, float]:
    """``(num_blocks, max_concurrency)`` of vLLM's startup for a full-attention model."""
    raise NotImplementedError("write kv_capacity")


# %% [markdown]
# <details><summary>Hint — rounding</summary>
#
# Two roundings, in opposite directions: memory is cut into *whole* blocks (round down), and a
# request holds *whole* blocks (round up: `-(-a // b)` is the ceiling of `a / b`).
# </details>

# %% tags=["check"]
from kvlab.exercises import check_kv_capacity

result = check_kv_capacity(kv_capacity)
result

# %% [markdown]
# ## What does INT8 buy on a real model?
#
# Once both checks pass, this cell compares a bf16 cache with an int8 per-token-head cache for
# Llama-3.1-8B and Llama-3.1-70B on 60 GiB of KV-cache memory, for 128k-token requests.

# %%
if result.passed:
    from kvlab.models import get_model

    for name in ("llama-3.1-8b", "llama-3.1-70b"):
        model = get_model(name)
        for dtype in ("auto", "int8_per_token_head"):
            blocks, concurrency = kv_capacity(model, dtype, 60 * 2**30, 131072, 16)
            print(f"{name:14s} {dtype:20s} {bytes_per_token(model, dtype):8,d} B/token "
                  f"{blocks:8,d} blocks  {concurrency:5.2f} requests of 128k")
else:
    print("Make both checks above pass first.")

# %% [markdown]
# ## Think about it
#
# 1. The int8 cache stores half the bytes of K and V. Why is the concurrency gain a little *less*
#    than 2×?
# 2. vLLM logs "GPU KV cache size: N tokens" with `N = int(max_concurrency × max_model_len)`. Compare
#    `N` with `num_blocks × block_size` for a full-attention model. What changes for a model with
#    sliding-window layers?
# 3. With tensor parallelism over 2 GPUs, each GPU holds half of the 8 KV heads. What happens to
#    bytes per token on one GPU, and to the concurrency if each GPU has the same memory?
