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
# # Solution — Exercise 2, per-token-head INT8 quantization

# %% tags=["solution"]
import torch


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token-head INT8: one fp32 scale per head vector (the last dimension of ``x``).

    Returns ``(codes, scales)``: int8 codes shaped like ``x``, fp32 scales shaped ``x.shape[:-1]``.
    """
    xf = x.float()
    scales = torch.clamp(xf.abs().amax(dim=-1) / 127.0, min=1e-6)
    inverse = 1.0 / scales
    y = torch.clamp(xf * inverse.unsqueeze(-1), -128.0, 127.0)
    return torch.round(y).to(torch.int8), scales


# %% [markdown]
# ## Answers
#
# 1. The scale maps `max|x|` to exactly 127, so `|x * (1/s)| <= 127` (up to one rounding of `1/s`,
#    which the clamp absorbs). The int8 range is used symmetrically, -127..127.
# 2. With an outlier 50× larger, the others land within about ±127/50 ≈ ±2.5: only about five
#    codes remain for them. Per-tensor scaling spreads that damage to **every** head vector of the
#    layer; per-token-head confines it to the one vector that has the outlier.
# 3. `1/s` is rounded to fp32 once, then the product is rounded again; `x / s` is rounded once.
#    When `x / s` is very close to a half-way point the two roundings can land on different sides.
#    vLLM's kernel multiplies by the reciprocal, and kvlab reproduces it bit for bit.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_quantize_int8

    print(check_quantize_int8(quantize_int8))
