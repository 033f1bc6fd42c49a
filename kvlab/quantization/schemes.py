"""The KV-cache dtypes of vLLM (``--kv-cache-dtype``) as kvlab schemes.

A *scheme* says how one K or V element is stored and where its scale lives:

========================  =================  ===========================  ====================
name                      storage            scale                        ``QuantMode``
========================  =================  ===========================  ====================
``auto``                  the model dtype    none                         ``NONE``
``bfloat16``/``float16``  that dtype         none                         ``NONE``
``fp8``/``fp8_e4m3``      ``float8_e4m3fn``  one fp32 per layer, K and V  ``FP8_PER_TENSOR``
``fp8_e5m2``              ``float8_e5m2``    one fp32 per layer, K and V  ``FP8_PER_TENSOR``
``int8_per_token_head``   ``int8``           fp32 per (token, KV head)    ``INT8_PER_TOKEN_HEAD``
``fp8_per_token_head``    ``float8_e4m3fn``  fp32 per (token, KV head)    ``FP8_PER_TOKEN_HEAD``
========================  =================  ===========================  ====================

``fp8_e5m2`` is stored as real e5m2 here. vLLM's Triton attention backend (TRITON_ATTN) reinterprets
its uint8 cache as e4m3 for every ``fp8*`` name, so under that backend ``fp8_e5m2`` only changes the
name; FlashInfer and the ROCm prefill paths do use e5m2. kvlab keeps the format the name promises so
that the two fp8 formats can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import torch

from kvlab.quantization.formats import DTYPE_BYTES, FP8_DTYPES, FP8_MAX, INT8_QMAX


class QuantMode(IntEnum):
    """How a cache is quantized; the values match vLLM's ``KVQuantMode``."""

    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3

    @property
    def is_per_token_head(self) -> bool:
        """True for the two modes with one scale per token per KV head."""
        return self >= QuantMode.INT8_PER_TOKEN_HEAD


@dataclass(frozen=True)
class KVCacheScheme:
    """One KV-cache dtype: its storage dtype, quantization mode and code range.

    Attributes:
        name: the ``--kv-cache-dtype`` string it was made from (``"fp8"`` stays ``"fp8"``).
        mode: the quantization mode.
        storage_dtype: torch dtype of the stored codes (or plain values when unquantized).
        qmax: largest code magnitude, ``None`` for unquantized schemes.
        fp8_format: ``"e4m3"`` or ``"e5m2"`` for fp8 schemes, else ``None``.
    """

    name: str
    mode: QuantMode
    storage_dtype: torch.dtype
    qmax: float | None = None
    fp8_format: str | None = None

    @property
    def element_bytes(self) -> int:
        """Bytes of one stored K or V element."""
        return DTYPE_BYTES[self.storage_dtype]

    @property
    def is_quantized(self) -> bool:
        """True when values are stored as codes with a scale."""
        return self.mode != QuantMode.NONE

    @property
    def has_token_head_scales(self) -> bool:
        """True when each (token, KV head) row carries its own fp32 scale for K and for V."""
        return self.mode.is_per_token_head

    @property
    def qmin(self) -> float | None:
        """Lower clamp bound of the store (-128 for int8, -qmax for fp8)."""
        if self.qmax is None:
            return None
        return -128.0 if self.storage_dtype == torch.int8 else -self.qmax

    def __str__(self) -> str:
        return self.name


_UNQUANTIZED_MODEL_DTYPES = (torch.bfloat16, torch.float16, torch.float32)

#: Every name :func:`get_scheme` accepts, in the order vLLM's ``CacheDType`` lists them.
SCHEME_NAMES: tuple[str, ...] = (
    "auto",
    "bfloat16",
    "float16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "int8_per_token_head",
    "fp8_per_token_head",
)


def _build(name: str, model_dtype: torch.dtype) -> KVCacheScheme:
    if name == "auto":
        return KVCacheScheme("auto", QuantMode.NONE, model_dtype)
    if name in ("bfloat16", "float16"):
        return KVCacheScheme(name, QuantMode.NONE, getattr(torch, name))
    if name in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        fmt = "e5m2" if name == "fp8_e5m2" else "e4m3"
        return KVCacheScheme(name, QuantMode.FP8_PER_TENSOR, FP8_DTYPES[fmt], FP8_MAX[fmt], fmt)
    if name == "int8_per_token_head":
        return KVCacheScheme(name, QuantMode.INT8_PER_TOKEN_HEAD, torch.int8, INT8_QMAX)
    if name == "fp8_per_token_head":
        return KVCacheScheme(name, QuantMode.FP8_PER_TOKEN_HEAD, FP8_DTYPES["e4m3"], FP8_MAX["e4m3"], "e4m3")
    raise ValueError(
        f"unknown kv_cache_dtype {name!r}; valid names are: {', '.join(SCHEME_NAMES)}"
    )


def get_scheme(name: str | KVCacheScheme, model_dtype: torch.dtype = torch.bfloat16) -> KVCacheScheme:
    """Return the scheme for a ``--kv-cache-dtype`` name.

    Args:
        name: one of :data:`SCHEME_NAMES` (or a scheme, returned unchanged).
        model_dtype: the dtype ``"auto"`` resolves to (bfloat16, float16 or float32).

    Raises:
        ValueError: for an unknown name (the message lists the valid ones) or an ``auto`` model
            dtype that is not a 16/32-bit float.
    """
    if isinstance(name, KVCacheScheme):
        return name
    if not isinstance(name, str):
        raise ValueError(f"kv_cache_dtype must be a string, got {type(name).__name__}")
    if model_dtype not in _UNQUANTIZED_MODEL_DTYPES:
        raise ValueError(
            f"model_dtype must be one of bfloat16, float16, float32 (what 'auto' stores), got {model_dtype}"
        )
    return _build(name.strip().lower(), model_dtype)
