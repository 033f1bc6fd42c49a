"""Triton kernels of kvlab (installed as ``kvlab.kernels``).

Importing this package decides how Triton runs (:mod:`kvlab.kernels.runtime`): compiled on an NVIDIA
GPU, otherwise in Triton's interpreter on CPU tensors.
"""

from kvlab.kernels.runtime import INTERPRET, kernel_device, mode

__all__ = ["INTERPRET", "kernel_device", "mode"]
