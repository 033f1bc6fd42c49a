"""Store values with a scheme and read them back: the per-element error of a KV-cache format.

:func:`round_trip` runs the library's own quantizers (:mod:`kvlab.quantization`), exactly as
:meth:`kvlab.PagedKVCache.write` does, and dequantizes in float64, so ``restored − original`` is the
error of the format alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from kvlab.quantization import (
    QuantMode,
    calibrate_scale,
    dequantize_per_tensor,
    dequantize_per_token_head,
    get_scheme,
    quantize_per_tensor,
    quantize_per_token_head,
)
from kvlab.quantization.schemes import KVCacheScheme
from kvlab.validation import require_choice, require_finite, require_float, require_tensor


@dataclass(frozen=True)
class RoundTrip:
    """One tensor stored with a scheme and read back.

    Attributes:
        scheme: the scheme's name.
        original: the input, as float64.
        restored: what the cache gives back (``code × scale``), float64, same shape.
        scales: per-token-head scales ``[..., ]`` (fp32) or ``None``.
        tensor_scale: the per-tensor fp8 scale, or ``None``.
        num_saturated: per-tensor values clamped to the format's range.
        rounding: the int8 rounding used (``"nearest"`` for every other scheme).
    """

    scheme: str
    original: torch.Tensor
    restored: torch.Tensor
    scales: torch.Tensor | None
    tensor_scale: float | None
    num_saturated: int
    rounding: str

    @cached_property
    def abs_error(self) -> torch.Tensor:
        """``|restored − original|`` element-wise (float64), computed on first use and kept (a
        comparison of several schemes' attention outputs never needs it)."""
        return (self.restored - self.original).abs_()


def effective_rounding(scheme: str | KVCacheScheme, rounding: str) -> str:
    """The rounding a scheme really uses: ``rounding`` for int8 per-token-head, else ``"nearest"``."""
    sch = get_scheme(scheme)
    return rounding if sch.mode == QuantMode.INT8_PER_TOKEN_HEAD else "nearest"


def round_trip(
    x: torch.Tensor,
    scheme: str | KVCacheScheme,
    *,
    rounding: str = "nearest",
    role: str = "k",
    calibration: str = "absmax",
    original: torch.Tensor | None = None,
    check_finite: bool = True,
) -> RoundTrip:
    """Quantize ``x`` with ``scheme`` and dequantize it again.

    Args:
        x: ``[tokens, kv_heads, head_size]`` (any shape whose last dimension is the head) float values.
        scheme: kv-cache dtype name.
        rounding: ``"nearest"`` or ``"truncate"``; applies to ``int8_per_token_head`` only (other schemes
            round to nearest whatever is asked).
        role: ``"k"`` or ``"v"`` (only the ``"vllm"`` per-tensor calibration differs by role).
        calibration: per-tensor fp8 scale: ``"absmax"`` (``max|x| / FMAX`` on this tensor) or ``"vllm"``.
        original: ``x`` as float64 when already made (several schemes' trips of one tensor then share
            one copy instead of making one each); it must hold ``x``'s values: only its shape and
            dtype are checked.
        check_finite: refuse NaN/Inf in ``x`` (one pass). ``False`` for data already checked.
    """
    require_tensor(x, "x")
    require_float(x, "x")
    require_choice(rounding, ("nearest", "truncate"), "rounding")
    sch = get_scheme(scheme)
    used = effective_rounding(sch, rounding)
    if check_finite:
        require_finite(x, "x")
    if original is None:
        original = x.to(torch.float64)
    elif original.dtype != torch.float64 or original.shape != x.shape:
        raise ValueError(f"original must be x as float64, shape {tuple(x.shape)}; got {original.dtype}, "
                         f"shape {tuple(original.shape)}")
    scales = tensor_scale = None
    saturated = 0
    if sch.mode.is_per_token_head:
        codes, scales = quantize_per_token_head(x, sch, used, check_finite=False)
        restored = dequantize_per_token_head(codes, scales, torch.float64)
    elif sch.mode == QuantMode.FP8_PER_TENSOR:
        tensor_scale = calibrate_scale(x, sch, calibration, role, check_finite=False)
        q = quantize_per_tensor(x, tensor_scale, sch, check_finite=False)
        restored = dequantize_per_tensor(q.codes, q.scale, torch.float64)
        saturated = q.num_saturated
    else:
        restored = x.to(sch.storage_dtype).to(torch.float64)
    return RoundTrip(sch.name, original, restored, scales, tensor_scale, saturated, used)
