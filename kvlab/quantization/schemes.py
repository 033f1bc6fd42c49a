"""The scheme registry: vLLM's KV-cache dtypes (``--kv-cache-dtype``) and kvlab's low-bit schemes.

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

kvlab adds schemes below 8 bits that **vLLM does not offer** (:data:`KVLAB_SCHEME_NAMES`):
``int4_per_token_head`` and the KIVI-style ``kivi4``/``kivi2`` family, defined with their formulas in
:mod:`kvlab.quantization.lowbit_schemes`. They live in this one registry so that sizing, capacity,
admission, the simulator, the reference and the kernels all read the same definitions;
:attr:`KVCacheScheme.is_vllm` tells the two kinds apart, and every output that shows a kvlab scheme
says it is not a vLLM ``--kv-cache-dtype``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import torch

from kvlab.quantization.formats import DTYPE_BYTES, FP8_DTYPES, FP8_MAX, INT8_QMAX


class QuantMode(IntEnum):
    """How a cache is quantized; values 0-3 match vLLM's ``KVQuantMode``, 4 and 5 are kvlab's own."""

    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3
    INT4_PER_TOKEN_HEAD = 4
    KIVI = 5

    @property
    def is_per_token_head(self) -> bool:
        """True for vLLM's two 8-bit modes with one fp32 scale per token per KV head."""
        return self in (QuantMode.INT8_PER_TOKEN_HEAD, QuantMode.FP8_PER_TOKEN_HEAD)

    @property
    def is_low_bit(self) -> bool:
        """True for kvlab's packed schemes below 8 bits (not vLLM ``--kv-cache-dtype`` values)."""
        return self in (QuantMode.INT4_PER_TOKEN_HEAD, QuantMode.KIVI)


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

    @property
    def is_vllm(self) -> bool:
        """True for vLLM ``--kv-cache-dtype`` values, False for kvlab's own low-bit schemes."""
        return not self.mode.is_low_bit

    @property
    def origin_note(self) -> str:
        """``""`` for vLLM dtypes; for kvlab schemes the note every output shows next to the name."""
        return "" if self.is_vllm else "kvlab scheme, not a vLLM --kv-cache-dtype"

    def __str__(self) -> str:
        return self.name


_UNQUANTIZED_MODEL_DTYPES = (torch.bfloat16, torch.float16, torch.float32)

#: vLLM's ``--kv-cache-dtype`` names, in the order its ``CacheDType`` lists them.
VLLM_SCHEME_NAMES: tuple[str, ...] = (
    "auto",
    "bfloat16",
    "float16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "int8_per_token_head",
    "fp8_per_token_head",
)

#: kvlab's low-bit schemes (not offered by vLLM). ``kivi{4,2}`` use value groups of 32 channels and a
#: residual of one block; ``_g64``/``_g128`` pick other groups, and :func:`get_scheme` also accepts a
#: residual suffix ``_r<blocks>`` (``kivi2_g32_r8``).
KVLAB_SCHEME_NAMES: tuple[str, ...] = (
    "int4_per_token_head",
    "kivi4",
    "kivi2",
    "kivi4_g64",
    "kivi4_g128",
    "kivi2_g64",
    "kivi2_g128",
)

#: Every registered scheme name: vLLM's first, then kvlab's.
SCHEME_NAMES: tuple[str, ...] = VLLM_SCHEME_NAMES + KVLAB_SCHEME_NAMES


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
    from kvlab.quantization.lowbit_schemes import parse_low_bit_scheme  # it builds on this module

    scheme = parse_low_bit_scheme(name)
    if scheme is not None:
        return scheme
    raise ValueError(
        f"unknown kv_cache_dtype {name!r}; valid names are: {', '.join(VLLM_SCHEME_NAMES)} (vLLM) and "
        f"{', '.join(KVLAB_SCHEME_NAMES)} (kvlab schemes, not in vLLM; kivi names also take a "
        "residual suffix _r<blocks>, e.g. kivi2_g32_r8)"
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
