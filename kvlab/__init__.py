"""kvlab: how LLM serving engines store and budget the KV cache, exact enough to trust.

The core (this namespace) needs only PyTorch:

* quantization schemes named as vLLM names them (:func:`get_scheme`, :data:`SCHEME_NAMES`),
  their quantizers and their memory cost (:mod:`kvlab.quantization`);
* a paged KV cache and batch metadata (:mod:`kvlab.cache`);
* a float64 reference attention over it (:mod:`kvlab.reference`);
* :func:`attention`, which runs either the reference or the Triton kernel (``kvlab.kernels``).
"""

from __future__ import annotations

import os as _os

from kvlab.attention import BACKENDS, attention
from kvlab.cache import AttentionBatch, PagedExample, PagedKVCache, WriteReport, build_paged_example
from kvlab.quantization import (
    SCHEME_NAMES,
    KVCacheScheme,
    QuantMode,
    calibrate_scale,
    dequantize_per_tensor,
    dequantize_per_token_head,
    get_scheme,
    kv_bytes_per_token,
    page_size_bytes,
    quantize_per_tensor,
    quantize_per_token_head,
    token_footprint,
)
from kvlab.reference import paged_attention_reference, reference_attention, relative_error

__version__ = "0.1.0"

# An install maps the top-level kernels/ folder to kvlab.kernels. When kvlab runs straight from a
# source checkout (PYTHONPATH=., nothing installed), let the import system find it there too.
_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(__path__[0], "kernels")) and _os.path.isfile(
    _os.path.join(_checkout, "kernels", "__init__.py")
):
    __path__.append(_checkout)

__all__ = [
    "BACKENDS",
    "SCHEME_NAMES",
    "AttentionBatch",
    "KVCacheScheme",
    "PagedExample",
    "PagedKVCache",
    "QuantMode",
    "WriteReport",
    "attention",
    "build_paged_example",
    "calibrate_scale",
    "dequantize_per_tensor",
    "dequantize_per_token_head",
    "get_scheme",
    "kv_bytes_per_token",
    "page_size_bytes",
    "paged_attention_reference",
    "quantize_per_tensor",
    "quantize_per_token_head",
    "reference_attention",
    "relative_error",
    "token_footprint",
]
