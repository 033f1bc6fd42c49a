"""Where kernel inputs must live, checked before a launch so that a mistake is one clear error."""

from __future__ import annotations

from functools import cache

import torch

from kvlab.kernels.runtime import INTERPRET


def require_kernel_device(**tensors: torch.Tensor | None) -> None:
    """Raise ``ValueError`` unless every given tensor is where this Triton mode runs kernels.

    The interpreter (no GPU, or ``KVLAB_TRITON=interpret``) reads CPU memory; compiled Triton
    reads CUDA memory. ``None`` entries are ignored.
    """
    for name, t in tensors.items():
        if t is None:
            continue
        if INTERPRET and t.device.type != "cpu":
            raise ValueError(
                f"{name} is on {t.device}, but the Triton interpreter runs on CPU tensors "
                "(Triton runs in interpreter mode in this process; move the inputs to the CPU)"
            )
        if not INTERPRET and t.device.type != "cuda":
            raise ValueError(
                f"{name} is on {t.device}, but compiled Triton needs CUDA tensors "
                "(move the inputs to the GPU, or set KVLAB_TRITON=interpret before importing kvlab.kernels)"
            )


@cache
def multiprocessor_count(device_index: int) -> int:
    """Streaming multiprocessors of CUDA device ``device_index`` (132 on an H100 SXM): launch rules
    size their grids in programs per multiprocessor."""
    return torch.cuda.get_device_properties(device_index).multi_processor_count
