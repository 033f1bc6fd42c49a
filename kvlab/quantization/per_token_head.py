"""Per-token-head quantization: one fp32 scale per (token, KV head), for K and V separately.

This is what vLLM's ``int8_per_token_head`` and ``fp8_per_token_head`` caches store. For one head
vector ``x`` (``head_size`` values, upcast to fp32)::

    s   = max( max_d |x_d| / QMAX , 1e-6 )           # QMAX = 127 (int8) or 448 (fp8 e4m3)
    y_d = clamp( x_d * fl(1/s), QMIN, QMAX )         # reciprocal in fp32 first, then multiply
    int8: q_d = round_half_even(y_d)  ("nearest")   or  trunc(y_d)  ("truncate", vLLM's Triton store)
    fp8:  q_d = e4m3_round_nearest_even(y_d)

and dequantization is ``x_d ≈ q_d * s``. Every operation is in fp32 and correctly rounded, so the
Triton cache-write kernel reproduces these codes and scales bit for bit.

Why truncation exists at all: Triton's float→int store converts with ``fptosi``, which rounds toward
zero. vLLM's int8 store therefore truncates; its error per element is up to one step (biased toward
zero) instead of half a step. kvlab defaults to ``nearest`` and offers ``truncate`` to reproduce vLLM.
"""

from __future__ import annotations

from typing import Literal

import torch

from kvlab.quantization.code_values import code_values
from kvlab.quantization.formats import SCALE_FLOOR
from kvlab.quantization.schemes import KVCacheScheme, QuantMode, get_scheme
from kvlab.validation import require_choice, require_finite, require_float, require_tensor

Rounding = Literal["nearest", "truncate"]
ROUNDINGS: tuple[str, ...] = ("nearest", "truncate")


def _per_token_head_scheme(scheme: str | KVCacheScheme) -> KVCacheScheme:
    sch = get_scheme(scheme)
    if not sch.mode.is_per_token_head:
        raise ValueError(
            f"scheme {sch.name!r} is not per-token-head; use 'int8_per_token_head' or 'fp8_per_token_head'"
        )
    return sch


def _scales_fp32(xf: torch.Tensor, qmax: float) -> torch.Tensor:
    """``max(max|x| / QMAX, 1e-6)`` over the last dimension of fp32 ``xf``, correctly rounded.

    The divisor is a tensor on purpose: PyTorch divides a CUDA tensor by a Python number through its
    reciprocal, which can differ from the IEEE quotient in the last bit.
    """
    qmax_t = torch.tensor(qmax, dtype=torch.float32, device=xf.device)
    return torch.clamp(xf.abs().amax(dim=-1) / qmax_t, min=SCALE_FLOOR)


def token_head_scales(x: torch.Tensor, scheme: str | KVCacheScheme) -> torch.Tensor:
    """Scales ``max(max|x| / QMAX, 1e-6)`` over the last dimension, in fp32.

    Args:
        x: ``[..., head_size]`` values.
        scheme: a per-token-head scheme.

    Returns:
        ``[...]`` float32 scales (one per leading index).
    """
    return _scales_fp32(x.float(), _per_token_head_scheme(scheme).qmax)


def quantize_per_token_head(
    x: torch.Tensor,
    scheme: str | KVCacheScheme,
    rounding: Rounding = "nearest",
    *,
    check_finite: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize head vectors with one scale each.

    Args:
        x: ``[..., head_size]`` float16/bfloat16/float32 values (e.g. ``[tokens, kv_heads, head_size]``).
        scheme: ``"int8_per_token_head"`` or ``"fp8_per_token_head"``.
        rounding: ``"nearest"`` (round half to even) or ``"truncate"`` (toward zero, as vLLM's Triton
            int8 store). fp8 always rounds to nearest even, so only ``"nearest"`` is accepted for it.
        check_finite: refuse NaN/Inf (default) instead of storing a poisoned scale.

    Returns:
        ``(codes, scales)``: codes ``[..., head_size]`` in the scheme's storage dtype (int8 or
        float8_e4m3fn) and fp32 scales ``[...]``.
    """
    require_tensor(x, "x")
    require_float(x, "x")
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"x must have a non-empty last (head) dimension, got shape {tuple(x.shape)}")
    sch = _per_token_head_scheme(scheme)
    require_choice(rounding, ROUNDINGS, "rounding")
    if sch.mode == QuantMode.FP8_PER_TOKEN_HEAD and rounding != "nearest":
        raise ValueError("rounding='truncate' applies to int8 only; fp8 codes always round to nearest even")
    if check_finite:
        require_finite(x, "x")

    xf = x.float()
    scales = _scales_fp32(xf, sch.qmax)
    inverse = torch.ones_like(scales) / scales  # fl(1/s): one correctly rounded fp32 division
    y = (xf * inverse.unsqueeze(-1)).clamp_(sch.qmin, sch.qmax)  # a new tensor, then in place
    if sch.mode == QuantMode.INT8_PER_TOKEN_HEAD:
        y = y.round_() if rounding == "nearest" else y.trunc_()
    codes = y.to(sch.storage_dtype)
    return codes, scales


def dequantize_per_token_head(
    codes: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Return ``codes * scales`` (scales broadcast over the last dimension) in ``dtype``.

    In float64 the product is exact: the dequantized value the attention math is defined on.
    """
    require_tensor(codes, "codes")
    require_tensor(scales, "scales")
    if tuple(scales.shape) != tuple(codes.shape[:-1]):
        raise ValueError(
            f"scales must have the shape of codes without its last dimension, "
            f"{tuple(codes.shape[:-1])}, got {tuple(scales.shape)}"
        )
    # one new tensor, scaled in place (the same products as ``codes.to(dtype) * scales``)
    return code_values(codes, dtype).mul_(scales.to(dtype).unsqueeze(-1))
