"""Numeric formats of a quantized KV cache and the constants engines use with them.

Every constant here is a fact about vLLM's kernels (``triton_reshape_and_cache_flash.py`` and
``attention.py``) that kvlab reproduces; the reference quantizers, the Triton kernels and the widgets
all read them from this one place.
"""

from __future__ import annotations

import torch

#: Largest int8 code the per-token-head scheme produces. Scales map ``max|x|`` to exactly 127, so
#: the symmetric range -127..127 is used and -128 never appears.
INT8_QMAX: float = 127.0
#: Lower clamp bound of the int8 store (never reached, because ``|x| * (1/s) <= 127``).
INT8_QMIN: float = -128.0

#: Largest finite value of ``float8_e4m3fn`` (4 exponent bits, 3 mantissa bits, no infinities).
FP8_E4M3_MAX: float = 448.0
#: Largest finite value of ``float8_e5m2`` (5 exponent bits, 2 mantissa bits, IEEE-like).
FP8_E5M2_MAX: float = 57344.0

#: Floor of every per-token-head scale: an all-zero (or tiny) head vector gets ``s = 1e-6`` instead
#: of 0, so dequantization never divides by zero and zeros come back as exact zeros.
SCALE_FLOOR: float = 1e-6

#: vLLM's ``calculate_kv_scales`` divides the first batch's ``max|K|`` by 200 and ``max|V|`` by 100
#: (environment defaults ``K_SCALE_CONSTANT`` and ``V_SCALE_CONSTANT``).
K_SCALE_CONSTANT: float = 200.0
V_SCALE_CONSTANT: float = 100.0

#: torch dtypes of the two fp8 formats and their largest finite magnitudes.
FP8_DTYPES: dict[str, torch.dtype] = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
FP8_MAX: dict[str, float] = {"e4m3": FP8_E4M3_MAX, "e5m2": FP8_E5M2_MAX}

#: Bytes of one element of each storage dtype kvlab uses.
DTYPE_BYTES: dict[torch.dtype, int] = {
    torch.float32: 4,
    torch.bfloat16: 2,
    torch.float16: 2,
    torch.int8: 1,
    torch.uint8: 1,
    torch.float8_e4m3fn: 1,
    torch.float8_e5m2: 1,
}

#: Bytes of one fp32 scale.
SCALE_BYTES: int = 4

#: Largest code of a symmetric 4-bit per-token-head scheme: levels -7..7 (-8 is never produced).
INT4_QMAX: float = 7.0

#: Bytes of one fp16 scale or zero point of the KIVI schemes (as in KIVI and transformers' cache).
HALF_BYTES: int = 2
#: Smallest KIVI scale: the smallest normal fp16 number, 2**-14. A group whose values are all equal
#: (zero range) gets it, and its values come back as the zero point (the fp16 rounding of their min).
LOW_BIT_SCALE_FLOOR: float = 2.0**-14
#: Largest magnitude a KIVI group may hold: scales and zero points are fp16, whose largest finite
#: value is 65504; larger input is refused instead of stored as Inf.
FP16_MAX: float = 65504.0
