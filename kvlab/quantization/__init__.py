"""Quantization schemes of the KV cache: names, formats, quantizers and their memory cost."""

from kvlab.quantization.formats import (
    FP8_E4M3_MAX,
    FP8_E5M2_MAX,
    INT8_QMAX,
    INT8_QMIN,
    K_SCALE_CONSTANT,
    SCALE_FLOOR,
    V_SCALE_CONSTANT,
)
from kvlab.quantization.lowbit_schemes import LowBitScheme
from kvlab.quantization.memory import (
    TokenFootprint,
    kv_bytes_per_token,
    page_size_bytes,
    residual_bytes_per_sequence,
    token_footprint,
)
from kvlab.quantization.per_tensor import (
    CALIBRATION_METHODS,
    PerTensorCodes,
    calibrate_scale,
    dequantize_per_tensor,
    quantize_per_tensor,
)
from kvlab.quantization.per_token_head import (
    ROUNDINGS,
    dequantize_per_token_head,
    quantize_per_token_head,
    token_head_scales,
)
from kvlab.quantization.schemes import (
    KVLAB_SCHEME_NAMES,
    SCHEME_NAMES,
    VLLM_SCHEME_NAMES,
    KVCacheScheme,
    QuantMode,
    get_scheme,
)

__all__ = [
    "CALIBRATION_METHODS",
    "FP8_E4M3_MAX",
    "FP8_E5M2_MAX",
    "INT8_QMAX",
    "INT8_QMIN",
    "K_SCALE_CONSTANT",
    "KVCacheScheme",
    "KVLAB_SCHEME_NAMES",
    "LowBitScheme",
    "PerTensorCodes",
    "QuantMode",
    "ROUNDINGS",
    "SCALE_FLOOR",
    "SCHEME_NAMES",
    "TokenFootprint",
    "VLLM_SCHEME_NAMES",
    "V_SCALE_CONSTANT",
    "calibrate_scale",
    "dequantize_per_tensor",
    "dequantize_per_token_head",
    "get_scheme",
    "kv_bytes_per_token",
    "page_size_bytes",
    "quantize_per_tensor",
    "quantize_per_token_head",
    "residual_bytes_per_sequence",
    "token_footprint",
    "token_head_scales",
]
