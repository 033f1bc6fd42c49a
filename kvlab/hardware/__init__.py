"""GPU profiles from public spec sheets (dense tensor-core FLOP/s, memory bandwidth, memory).

* :class:`GPUProfile` — one GPU; build your own for hardware not listed;
* :data:`GPU_PROFILES` / :data:`GPU_NAMES` — H100 SXM, H200, B200, A100 80GB, L40S, L4, RTX 4090,
  RTX 3090, MI300X;
* :func:`get_gpu` — look one up by name, case-insensitively.
"""

from kvlab.hardware.profiles import GPU_NAMES, GPU_PROFILES, GPUProfile, get_gpu

__all__ = ["GPU_NAMES", "GPU_PROFILES", "GPUProfile", "get_gpu"]
