"""Per-tensor fp8: one fp32 scale for all K values of a layer and one for all V values.

Store: ``q = fp8( clamp( fp32(x) / scale , -FMAX, FMAX ) )`` with round-to-nearest-even, where FMAX is
448 for e4m3 and 57344 for e5m2. Load: ``x ≈ fp32(q) * scale``.

Values beyond the format's range *saturate* to ±FMAX (and are counted) instead of turning into NaN,
which is what ``float8_e4m3fn`` would give for an unclamped overflow. vLLM's GPU store saturates the
same way (Triton lowers the fp32→e4m3 cast to a saturating conversion).

Where the scale comes from (:func:`calibrate_scale`):

* ``"absmax"``: ``max|x| / FMAX`` — the smallest scale with no saturation on this data;
* ``"vllm"``: vLLM's ``calculate_kv_scales``: ``max|K| / 200`` for keys and ``max|V| / 100`` for
  values, computed once from the first batch (with e4m3 this leaves head-room of 448/200 = 2.24× for
  K and 4.48× for V, so later, larger values do not saturate);
* or a number given by the user (a checkpoint's scale; vLLM's default is 1.0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from kvlab.quantization.code_values import code_values
from kvlab.quantization.formats import K_SCALE_CONSTANT, SCALE_FLOOR, V_SCALE_CONSTANT
from kvlab.quantization.schemes import KVCacheScheme, QuantMode, get_scheme
from kvlab.validation import require_choice, require_finite, require_float, require_tensor

CalibrationMethod = Literal["absmax", "vllm"]
CALIBRATION_METHODS: tuple[str, ...] = ("absmax", "vllm")


@dataclass(frozen=True)
class PerTensorCodes:
    """Result of :func:`quantize_per_tensor`.

    Attributes:
        codes: fp8 codes, the shape of the input.
        scale: the fp32 scale used (a Python float holding an fp32 value).
        num_saturated: how many values were beyond ``±FMAX * scale`` and were clamped.
    """

    codes: torch.Tensor
    scale: float
    num_saturated: int


def _per_tensor_scheme(scheme: str | KVCacheScheme) -> KVCacheScheme:
    sch = get_scheme(scheme)
    if sch.mode != QuantMode.FP8_PER_TENSOR:
        raise ValueError(f"scheme {sch.name!r} is not per-tensor fp8; use 'fp8', 'fp8_e4m3' or 'fp8_e5m2'")
    return sch


def as_fp32_scale(scale: float | torch.Tensor, name: str = "scale") -> float:
    """Validate a per-tensor scale and round it to fp32 (the precision it is stored and used in)."""
    if isinstance(scale, torch.Tensor):
        if scale.numel() != 1:
            raise ValueError(f"{name} must be a single number, got a tensor of shape {tuple(scale.shape)}")
        scale = scale.item()
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise ValueError(f"{name} must be a positive finite number, got {scale!r}")
    value = torch.tensor(float(scale), dtype=torch.float32).item()
    if not (value > 0.0 and value != float("inf")):
        raise ValueError(f"{name} must be a positive finite number, got {scale!r}")
    return value


def calibrate_scale(
    x: torch.Tensor,
    scheme: str | KVCacheScheme = "fp8",
    method: CalibrationMethod = "absmax",
    role: Literal["k", "v"] = "k",
    *,
    check_finite: bool = True,
) -> float:
    """A per-tensor scale for ``x``.

    Args:
        x: sample of K or V values (any shape).
        scheme: the fp8 scheme the scale is for (fixes FMAX for ``"absmax"``).
        method: ``"absmax"`` (``max|x| / FMAX``) or ``"vllm"`` (``max|x| / 200`` for K, ``/ 100`` for V).
        role: ``"k"`` or ``"v"``; only ``"vllm"`` uses it.
        check_finite: refuse NaN/Inf (default); ``False`` for data already checked.

    Returns:
        The scale as an fp32 value, floored at 1e-6 so that all-zero data still gets a usable scale.
    """
    require_tensor(x, "x")
    require_float(x, "x")
    sch = _per_tensor_scheme(scheme)
    require_choice(method, CALIBRATION_METHODS, "method")
    require_choice(role, ("k", "v"), "role")
    if check_finite:
        require_finite(x, "x")
    absmax = x.float().abs().max() if x.numel() else torch.tensor(0.0)
    if method == "absmax":
        divisor = sch.qmax
    else:
        divisor = K_SCALE_CONSTANT if role == "k" else V_SCALE_CONSTANT
    # divide by a tensor: a CUDA tensor divided by a Python number goes through its reciprocal
    divisor_t = torch.tensor(divisor, dtype=torch.float32, device=absmax.device)
    scale = torch.clamp(absmax.float() / divisor_t, min=SCALE_FLOOR)
    if method == "absmax":
        # fl(max|x| / FMAX) may round down, and then max|x| / scale lands one ulp above FMAX and
        # counts as saturated; the next fp32 up keeps the promise "no value saturates".
        while bool(absmax.float() / scale > divisor_t):
            scale = torch.nextafter(scale, torch.tensor(float("inf"), device=scale.device))
    return float(scale.item())


def quantize_per_tensor(
    x: torch.Tensor,
    scale: float | torch.Tensor,
    scheme: str | KVCacheScheme = "fp8",
    *,
    check_finite: bool = True,
) -> PerTensorCodes:
    """Quantize ``x`` to fp8 with one scale.

    Args:
        x: float16/bfloat16/float32 values, any shape.
        scale: positive finite per-tensor scale (rounded to fp32).
        scheme: ``"fp8"``/``"fp8_e4m3"`` (e4m3) or ``"fp8_e5m2"`` (e5m2).
        check_finite: refuse NaN/Inf (default).

    Returns:
        :class:`PerTensorCodes` with the codes, the fp32 scale and the saturation count.
    """
    require_tensor(x, "x")
    require_float(x, "x")
    sch = _per_tensor_scheme(scheme)
    s = as_fp32_scale(scale)
    if check_finite:
        require_finite(x, "x")
    y = x.float() / torch.tensor(s, dtype=torch.float32, device=x.device)  # a new tensor: y is ours
    saturated = int((y.abs() > sch.qmax).sum())
    codes = y.clamp_(-sch.qmax, sch.qmax).to(sch.storage_dtype)
    return PerTensorCodes(codes=codes, scale=s, num_saturated=saturated)


def dequantize_per_tensor(
    codes: torch.Tensor, scale: float, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Return ``codes * scale`` in ``dtype`` (exact in float64)."""
    require_tensor(codes, "codes")
    # one new tensor, scaled in place (the same products as ``codes.to(dtype) * scale``)
    return code_values(codes, dtype).mul_(torch.tensor(as_fp32_scale(scale), dtype=torch.float32).to(dtype))
