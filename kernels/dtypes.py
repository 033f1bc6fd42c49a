"""What the kernels need to know about torch dtypes: their Triton names and the bit layout of fp8.

The fp8 layout (mantissa bits, exponent bias, special codes) is read off the torch dtype itself, the
same dtype :mod:`kvlab.quantization.formats` names for each scheme, so nothing is typed twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import torch

from kvlab.kernels.runtime import tl

_TRITON_DTYPES = {
    torch.float32: tl.float32,
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
    torch.int8: tl.int8,
    torch.float8_e4m3fn: tl.float8e4nv,
    torch.float8_e5m2: tl.float8e5,
}


def triton_dtype(dtype: torch.dtype):
    """The Triton element type of a torch dtype kvlab stores or computes in."""
    try:
        return _TRITON_DTYPES[dtype]
    except KeyError:
        raise ValueError(f"no Triton kernel path for dtype {dtype}") from None


@dataclass(frozen=True)
class Fp8Layout:
    """Bit layout of an 8-bit float, as the kernels' constexpr arguments need it.

    Attributes:
        mant_bits: mantissa bits (e4m3: 3, e5m2: 2).
        exp_bias: exponent bias (e4m3: 7, e5m2: 15).
        min_normal: smallest normal magnitude (e4m3: 2**-6).
        subnormal_scale: ``1 / smallest subnormal`` (e4m3: 2**9), a power of two.
        nan_code: the code ``torch`` stores for NaN.
        special_mask: bits that are all ones in every NaN/Inf code (e4m3fn: 0x7F, e5m2: 0x7C).
        has_inf: whether the format has infinities (e5m2) or only NaN (e4m3fn).
    """

    mant_bits: int
    exp_bias: int
    min_normal: float
    subnormal_scale: float
    nan_code: int
    special_mask: int
    has_inf: bool


@cache
def fp8_layout(dtype: torch.dtype) -> Fp8Layout:
    """Derive :class:`Fp8Layout` from ``torch.finfo`` and a decode of all 256 codes."""
    if dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise ValueError(f"{dtype} is not an fp8 dtype kvlab stores")
    info = torch.finfo(dtype)
    mant = round(-math.log2(info.eps))
    bias = round(1 - math.log2(info.smallest_normal))
    values = torch.arange(256, dtype=torch.uint8).view(dtype).float()
    special = [c for c in range(128) if not math.isfinite(values[c].item())]
    nan_code = int(torch.tensor(float("nan")).to(dtype).view(torch.uint8).item())
    return Fp8Layout(
        mant_bits=mant,
        exp_bias=bias,
        min_normal=float(info.smallest_normal),
        subnormal_scale=1.0 / (float(info.smallest_normal) * float(info.eps)),
        nan_code=nan_code,
        special_mask=min(special),
        has_inf=bool(torch.isinf(values).any()),
    )


def fp8_constexprs(dtype: torch.dtype) -> dict[str, object]:
    """Keyword arguments of :func:`kvlab.kernels.numerics.to_fp8` / ``fp8_to_fp32`` for ``dtype``.

    For a non-fp8 dtype, harmless placeholders (the kernels do not use them).
    """
    if dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        return dict(MANT_BITS=3, EXP_BIAS=7, SUBNORMAL_SCALE=512.0, MIN_NORMAL=2.0**-6, NAN_CODE=127,
                    SPECIAL_MASK=127, HAS_INF=False)
    f = fp8_layout(dtype)
    return dict(MANT_BITS=f.mant_bits, EXP_BIAS=f.exp_bias, SUBNORMAL_SCALE=f.subnormal_scale,
                MIN_NORMAL=f.min_normal, NAN_CODE=f.nan_code, SPECIAL_MASK=f.special_mask,
                HAS_INF=f.has_inf)


def fp8_to_bf16_asm_for(dtype: torch.dtype) -> str:
    """The inline PTX of :func:`kvlab.kernels.numerics.fp8_to_bf16` for an fp8 dtype."""
    from kvlab.kernels.numerics import fp8_to_bf16_asm

    f = fp8_layout(dtype)
    return fp8_to_bf16_asm(f.mant_bits, f.exp_bias)
