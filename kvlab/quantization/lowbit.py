"""Reference quantizers of kvlab's low-bit schemes (formulas in :mod:`kvlab.quantization.lowbit_schemes`).

Three pieces, each exact and each the definition the Triton kernels are checked against bit for bit:

* :func:`quantize_int4_per_token_head`: symmetric 4-bit codes, one fp32 scale per head vector;
* :func:`quantize_asymmetric`: KIVI's min/max quantizer over one axis (keys: the tokens of a block,
  per channel; values: ``G`` channels of one token) with fp16 scale and zero point;
* :func:`pack_codes` / :func:`unpack_codes`: ``8 / bits`` codes per byte, code ``k`` of byte ``j``
  at bits ``[k * bits, (k + 1) * bits)`` holding element ``j * (8 / bits) + k``.

Rounding is half to even everywhere (``torch.round``), divisions are correctly rounded fp32 (the
divisor is a tensor, see :mod:`kvlab.quantization.per_token_head`), and dequantization in float64
(``q * s + z``) is exact.
"""

from __future__ import annotations

import torch

from kvlab.quantization.formats import FP16_MAX, INT4_QMAX, LOW_BIT_SCALE_FLOOR, SCALE_FLOOR
from kvlab.validation import require_finite, require_float, require_tensor

#: The nibble stored for int4 code ``q`` is ``q + INT4_OFFSET`` (1..15; 0 never appears).
INT4_OFFSET: int = 8


def _bits_ok(bits: int) -> int:
    if bits not in (2, 4):
        raise ValueError(f"bits must be 2 or 4, got {bits!r}")
    return 8 // bits


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack unsigned codes (``0 .. 2**bits - 1``) along the last dimension, ``8 / bits`` per byte.

    Example: 4 bits, codes ``[3, 10]`` → one byte ``3 | 10 << 4 = 0xA3``.
    """
    per_byte = _bits_ok(bits)
    if codes.shape[-1] % per_byte:
        raise ValueError(f"the last dimension ({codes.shape[-1]}) must be a multiple of {per_byte} to pack "
                         f"{bits}-bit codes")
    c = codes.to(torch.int32).reshape(*codes.shape[:-1], codes.shape[-1] // per_byte, per_byte)
    shifts = torch.arange(per_byte, device=codes.device, dtype=torch.int32) * bits
    return (c << shifts).sum(dim=-1).to(torch.uint8)


def unpack_codes(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """Inverse of :func:`pack_codes`: ``[..., n]`` bytes → ``[..., n * 8 / bits]`` uint8 codes."""
    per_byte = _bits_ok(bits)
    shifts = torch.arange(per_byte, device=packed.device, dtype=torch.int32) * bits
    c = (packed.to(torch.int32).unsqueeze(-1) >> shifts) & (2**bits - 1)
    return c.reshape(*packed.shape[:-1], packed.shape[-1] * per_byte).to(torch.uint8)


def quantize_int4_per_token_head(x: torch.Tensor, *, check_finite: bool = True
                                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric 4-bit codes with one fp32 scale per head vector (last dimension).

    ``s = max(max|x| / 7, 1e-6)``, ``q = round_half_even(clamp(x * fl(1/s), -7, 7))``.

    Returns:
        ``(codes, scales)``: int8 codes in -7..7 ``[..., D]`` and fp32 scales ``[...]``.
    """
    require_tensor(x, "x")
    require_float(x, "x")
    if check_finite:
        require_finite(x, "x")
    xf = x.float()
    qmax = torch.tensor(INT4_QMAX, dtype=torch.float32, device=x.device)
    scales = torch.clamp(xf.abs().amax(dim=-1) / qmax, min=SCALE_FLOOR)
    inverse = torch.ones_like(scales) / scales
    y = torch.clamp(xf * inverse.unsqueeze(-1), -INT4_QMAX, INT4_QMAX)
    return torch.round(y).to(torch.int8), scales


def check_half_range(x: torch.Tensor, name: str) -> None:
    """Refuse NaN/Inf and magnitudes beyond fp16 (the dtype of KIVI's scales and zero points)."""
    require_finite(x, name)
    if x.numel():
        big = float(x.float().abs().max())
        if big > FP16_MAX:
            raise ValueError(
                f"{name} holds |x| = {big:.6g} > {FP16_MAX:g}: KIVI stores scales and zero points in fp16, "
                "so values must lie within the fp16 range"
            )


def quantize_asymmetric(x: torch.Tensor, bits: int, dim: int, *, check_finite: bool = True
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """KIVI's min/max quantizer over ``dim``, with fp16 scale and zero point.

    ``z = fp16(min x)``, ``s = fp16(max((max x − z) / Q, 2**-14))`` with ``Q = 2**bits − 1``, then
    ``q = round_half_even(clamp((x − z) * fl(1/s), 0, Q))``, all in fp32.

    Args:
        x: float values; keys of one block ``[B, H, D]`` with ``dim=0`` (per channel), or value
            groups ``[T, H, Dv/G, G]`` with ``dim=-1`` (per token and group).
        bits: 4 or 2.
        dim: the axis the min/max runs over.

    Returns:
        ``(codes, scale, zero)``: uint8 codes (shape of ``x``), fp16 scale and zero point with ``dim``
        kept as size 1.
    """
    _bits_ok(bits)
    require_tensor(x, "x")
    require_float(x, "x")
    if check_finite:
        check_half_range(x, "x")
    xf = x.float()
    q = torch.tensor(float(2**bits - 1), dtype=torch.float32, device=x.device)
    zero = xf.amin(dim=dim, keepdim=True).to(torch.float16)
    spread = xf.amax(dim=dim, keepdim=True) - zero.float()
    scale = torch.clamp(spread / q, min=LOW_BIT_SCALE_FLOOR).to(torch.float16)
    inverse = torch.ones_like(scale, dtype=torch.float32) / scale.float()
    y = torch.clamp((xf - zero.float()) * inverse, 0.0, float(2**bits - 1))
    return torch.round(y).to(torch.uint8), scale, zero


def quantize_key_block(keys: torch.Tensor, bits: int, *, check_finite: bool = True
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keys of one block ``[B, H, D]`` per channel → codes ``[B, H, D]``, scale and zero ``[H, D]``."""
    codes, scale, zero = quantize_asymmetric(keys, bits, 0, check_finite=check_finite)
    return codes, scale.squeeze(0), zero.squeeze(0)


def quantize_value_groups(values: torch.Tensor, bits: int, group_size: int, *, check_finite: bool = True
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Values ``[T, H, Dv]`` per token in groups of ``group_size`` channels.

    Returns:
        codes ``[T, H, Dv]`` uint8, scale and zero ``[T, H, Dv / G]`` fp16.
    """
    t, h, dv = values.shape
    if dv % group_size:
        raise ValueError(f"group size G={group_size} does not divide the V head size {dv}")
    grouped = values.reshape(t, h, dv // group_size, group_size)
    codes, scale, zero = quantize_asymmetric(grouped, bits, -1, check_finite=check_finite)
    return codes.reshape(t, h, dv), scale.squeeze(-1), zero.squeeze(-1)


def dequantize_value_groups(codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor,
                            dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``q * s + z`` per group: codes ``[..., Dv]``, scale/zero ``[..., Dv / G]`` → ``[..., Dv]``."""
    groups = scale.shape[-1]
    c = codes.to(dtype).reshape(*codes.shape[:-1], groups, -1)
    out = c * scale.to(dtype).unsqueeze(-1) + zero.to(dtype).unsqueeze(-1)
    return out.reshape(codes.shape)
