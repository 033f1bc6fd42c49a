"""The value of every code of a cache, in a wider dtype: the first step of each dequantization.

PyTorch converts ``float8_e4m3fn`` to wider floats one element at a time on the CPU (about 7 ns an
element, seven times its ``float8_e5m2`` or ``int8`` conversion). An fp8 code has only 256 possible
bit patterns, so on the CPU :func:`code_values` converts those 256 once and looks each code up in
that table: the same conversion, applied to the same bits, so the values are identical.
"""

from __future__ import annotations

from functools import lru_cache

import torch

#: Code dtypes converted through a table on the CPU.
_TABLE_DTYPES: tuple[torch.dtype, ...] = (torch.float8_e4m3fn,)


@lru_cache(maxsize=8)
def _table(code_dtype: torch.dtype, dtype: torch.dtype) -> torch.Tensor:
    """The 256 values of a one-byte ``code_dtype``, indexed by their bit pattern, in ``dtype``."""
    return torch.arange(256, dtype=torch.uint8).view(code_dtype).to(dtype)


def code_values(codes: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A new tensor holding ``codes`` converted to ``dtype`` (``codes.to(dtype)``, never a view of them).

    Args:
        codes: cache codes of any dtype and shape.
        dtype: the dtype of the result.
    """
    if codes.dtype in _TABLE_DTYPES and codes.device.type == "cpu" and codes.numel():
        index = codes.view(torch.uint8).reshape(-1).to(torch.int32)
        return _table(codes.dtype, dtype).index_select(0, index).view(codes.shape)
    return codes.to(dtype, copy=True)
