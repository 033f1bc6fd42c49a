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
# # Exercise 8 — What the admission gate asks for
#
# *Follows lesson `05_sliding_windows_and_admission`. About 15 minutes.*
#
# Before admitting a waiting request, vLLM checks that its **whole** prompt would fit: for each
# KV-cache group it computes the blocks the request will need, sums them, and compares with the free
# blocks. Two versions of that *admission need* for one group, for a request of `N` tokens, block
# size `B`:
#
# * `"uncapped"` (vLLM ≤ 0.20): `cdiv(N, B)` blocks, for every group.
# * `"vllm"` (vLLM ≥ 0.21): the same for a full-attention group, but a sliding-window group (window
#   `W`) is capped at the most it can ever hold at once:
#   `min( cdiv(N, B), cdiv(min(W − 1 + T, L), B) + 1 )`, where `T` is the number of tokens in
#   flight — here `T = max_num_batched_tokens` — and `L = max_model_len`.
#
# Write `admission_need(policy, num_tokens, block_size, sliding_window, max_num_batched_tokens,
# max_model_len)`; `sliding_window` is `None` for a full-attention group.

# %% tags=["stub"]
def admission_need(policy: str, num_tokens: int, block_size: int, sliding_window: int | None,
                   max_num_batched_tokens: int, max_model_len: int) -> int:
    """Blocks the admission gate charges one group for a ``num_tokens``-token request."""
    raise NotImplementedError("write admission_need")


# %% [markdown]
# <details><summary>Hint 1 — ceiling division</summary>
#
# `cdiv(a, b) = -(-a // b)` for non-negative integers (or `kvlab.sizing.cdiv`).
# </details>
#
# <details><summary>Hint 2 — when the cap applies</summary>
#
# Only when `policy == "vllm"` **and** `sliding_window is not None`. Everything else is `cdiv(N, B)`.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_admission_need

check_admission_need(admission_need)

# %% [markdown]
# ## The whole model
#
# A model has several groups. kvlab's serving API sums the per-group needs; here for Gemma-3-27B
# (5 sliding-window layers per full-attention layer) and a 100,000-token prompt.

# %%
from kvlab.serving import EngineConfig, compare_policies

config = EngineConfig("gemma-3-27b", kv_cache_memory="40GiB", max_model_len=131072,
                      max_num_batched_tokens=2048, profile="vllm-0.21")
for policy, need in compare_policies(config, 100_000, ("uncapped", "vllm")).items():
    groups = ", ".join(f"{g.kind}: {g.blocks}" for g in need.per_group)
    print(f"{policy:9s} total {need.total:6,d} blocks of {need.pool_blocks:,d} usable   ({groups})")

# %% [markdown]
# ## Think about it
#
# 1. Under `"uncapped"`, would this 100,000-token request ever be admitted into that pool, even with
#    nothing else running? And yet the startup accepted `max_model_len = 131072`. Why is that a
#    *permanent* stall rather than a wait?
# 2. The cap uses `T`, the tokens in flight, not the prompt length. Why does a sliding-window group
#    need room for `W − 1 + T` tokens while a chunked prefill runs?
