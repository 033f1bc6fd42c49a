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
# # Exercise 2 — Per-token-head INT8 quantization
#
# *Follows lesson `02_quantization_error`. About 20 minutes.*
#
# vLLM's `int8_per_token_head` cache stores every head vector of every token with its **own fp32
# scale**. For one head vector `x` (the last dimension, `head_size` values):
#
# ```
# s = max( max_d |x_d| / 127 , 1e-6 )          # fp32; the floor keeps all-zero vectors finite
# y = clamp( x * (1/s), -128, 127 )            # reciprocal first (fp32), then multiply
# q = round_half_to_even(y)  as int8           # "nearest" rounding
# ```
#
# Write `quantize_int8(x)` for a tensor `x` of shape `[..., head_size]` (any number of leading
# dimensions; `float32`, `float16` or `bfloat16`). Return `(codes, scales)`: `codes` is an `int8`
# tensor of the shape of `x`, `scales` a `float32` tensor of shape `x.shape[:-1]`.
#
# The check compares your codes and scales **bit for bit** with `kvlab.quantize_per_token_head`
# on hundreds of fresh random tensors and a few edge cases.

# %% [markdown]
# ## Your code

# %% tags=["stub"]
import torch


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token-head INT8: one fp32 scale per head vector (the last dimension of ``x``).

    Returns ``(codes, scales)``: int8 codes shaped like ``x``, fp32 scales shaped ``x.shape[:-1]``.
    """
    raise NotImplementedError("write quantize_int8")


# %% [markdown]
# <details><summary>Hint 1 — the scale</summary>
#
# Work in float32 whatever the input dtype: `xf = x.float()`. The largest **magnitude** of each head
# vector is `xf.abs().amax(dim=-1)`; divide it by 127 and keep it at least `1e-6`
# (`torch.clamp(..., min=1e-6)`).
# </details>
#
# <details><summary>Hint 2 — one scale per row</summary>
#
# `scales` has one value per head vector; to multiply every element of a vector by its own
# `1/s`, add the head dimension back: `(1.0 / scales).unsqueeze(-1)`.
# </details>
#
# <details><summary>Hint 3 — rounding and the codes</summary>
#
# `torch.round` rounds halves to the even neighbour (2.5 → 2), which is what "nearest" means here.
# Clamp to [-128, 127] before `.to(torch.int8)`: the cast does not saturate.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_quantize_int8

check_quantize_int8(quantize_int8)

# %% [markdown]
# ## Think about it
#
# 1. Why can the code `-128` never appear, although the clamp allows it?
# 2. A head vector has one outlier 50× larger than its other values. How many distinct codes are
#    left for the others? What would per-**tensor** scaling do to the *other* head vectors?
# 3. The kernel computes `x * (1/s)`, not `x / s`. The two can differ by one code. Why?
