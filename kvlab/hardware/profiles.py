"""GPU profiles: the public spec-sheet numbers a roofline needs.

Every figure is a *dense* (no 2:4 sparsity) tensor-core peak from the vendor's data sheet or
architecture whitepaper, the HBM/GDDR bandwidth, and the memory a user can allocate. Spec sheets
often print the sparse figure first; the dense one is half of it. ``None`` means the GPU has no
tensor-core path for that format (the time model then falls back to the next wider format).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.validation import require_positive_int

TERA = 10**12
GB = 10**9


@dataclass(frozen=True)
class GPUProfile:
    """One GPU as the step-time model sees it.

    Attributes:
        name: short name (``"h100-sxm"``); looked up case-insensitively.
        description: the product name.
        bf16_flops: dense BF16 tensor-core peak (FLOP/s).
        fp8_flops: dense FP8 tensor-core peak (FLOP/s), ``None`` without FP8 tensor cores.
        fp4_flops: dense FP4 tensor-core peak (FLOP/s), ``None`` without FP4 tensor cores.
        memory_bandwidth: peak DRAM bandwidth (bytes/s).
        memory_bytes: memory the application can allocate (bytes).
        source: where the numbers come from.
        interconnect_bandwidth: peak GPU-to-GPU bandwidth, both directions added as data sheets print
            it (bytes/s): NVLink / Infinity Fabric, or PCIe where a GPU has no such link; ``None`` =
            unknown (tensor parallelism cannot be timed then).
    """

    name: str
    description: str
    bf16_flops: float
    fp8_flops: float | None
    fp4_flops: float | None
    memory_bandwidth: float
    memory_bytes: int
    source: str = "user-defined"
    interconnect_bandwidth: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"GPU name must be a non-empty string, got {self.name!r}")
        for field in ("bf16_flops", "memory_bandwidth"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{field} of GPU {self.name!r} must be a number > 0, got {value!r}")
        for field in ("fp8_flops", "fp4_flops", "interconnect_bandwidth"):
            value = getattr(self, field)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
            ):
                raise ValueError(f"{field} of GPU {self.name!r} must be a number > 0 or None, got {value!r}")
        require_positive_int(self.memory_bytes, f"memory_bytes of GPU {self.name!r}")

    def flops_for(self, dtype: str) -> float:
        """Peak FLOP/s of a GEMM whose inputs are ``dtype`` (``"bf16"``, ``"fp8"``, ``"fp4"``);
        a format without tensor cores here runs at the next wider one."""
        if dtype == "fp4" and self.fp4_flops is not None:
            return self.fp4_flops
        if dtype in ("fp4", "fp8") and self.fp8_flops is not None:
            return self.fp8_flops
        return self.bf16_flops


GPU_PROFILES: dict[str, GPUProfile] = {
    p.name: p
    for p in (
        GPUProfile(
            "h100-sxm",
            "NVIDIA H100 SXM 80GB",
            989 * TERA,
            1979 * TERA,
            None,
            3350 * GB,
            80 * GB,
            "NVIDIA H100 data sheet (SXM): BF16 1,979 / FP8 3,958 TFLOPS with sparsity, 3.35 TB/s, "
            "NVLink 900 GB/s",
            interconnect_bandwidth=900 * GB,
        ),
        GPUProfile(
            "h200",
            "NVIDIA H200 SXM 141GB",
            989 * TERA,
            1979 * TERA,
            None,
            4800 * GB,
            141 * GB,
            "NVIDIA H200 data sheet (SXM): same tensor cores as H100 SXM, 141 GB HBM3e at 4.8 TB/s, "
            "NVLink 900 GB/s",
            interconnect_bandwidth=900 * GB,
        ),
        GPUProfile(
            "b200",
            "NVIDIA B200 (HGX, 1,000 W)",
            2250 * TERA,
            4500 * TERA,
            9000 * TERA,
            8000 * GB,
            180 * GB,
            "NVIDIA HGX/DGX B200 specs: BF16 4.5 / FP8 9 / FP4 18 PFLOPS with sparsity, 8 TB/s, "
            "1,440 GB per 8 GPUs, NVLink 1.8 TB/s per GPU",
            interconnect_bandwidth=1800 * GB,
        ),
        GPUProfile(
            "a100-80gb",
            "NVIDIA A100 SXM 80GB",
            312 * TERA,
            None,
            None,
            2039 * GB,
            80 * GB,
            "NVIDIA A100 data sheet (80GB SXM): BF16 312 TFLOPS dense, 2,039 GB/s; no FP8; NVLink 600 GB/s",
            interconnect_bandwidth=600 * GB,
        ),
        GPUProfile(
            "l40s",
            "NVIDIA L40S",
            362.05e12,
            733 * TERA,
            None,
            864 * GB,
            48 * GB,
            "NVIDIA L40S data sheet: BF16 362.05 / FP8 733 TFLOPS dense, 48 GB GDDR6 at 864 GB/s; "
            "PCIe Gen4 x16 64 GB/s (no NVLink)",
            interconnect_bandwidth=64 * GB,
        ),
        GPUProfile(
            "l4",
            "NVIDIA L4",
            121 * TERA,
            242.5e12,
            None,
            300 * GB,
            24 * GB,
            "NVIDIA L4 data sheet: BF16 242 / FP8 485 TFLOPS with sparsity, 24 GB at 300 GB/s; "
            "PCIe Gen4 x16 64 GB/s",
            interconnect_bandwidth=64 * GB,
        ),
        GPUProfile(
            "rtx-4090",
            "NVIDIA GeForce RTX 4090",
            165.2e12,
            330.3e12,
            None,
            1008 * GB,
            24 * GB,
            "NVIDIA Ada GPU architecture whitepaper: BF16/FP8 with FP32 accumulate 165.2 / 330.3 TFLOPS "
            "dense, 1,008 GB/s; PCIe 4.0 x16 64 GB/s (no NVLink)",
            interconnect_bandwidth=64 * GB,
        ),
        GPUProfile(
            "rtx-3090",
            "NVIDIA GeForce RTX 3090",
            71 * TERA,
            None,
            None,
            936 * GB,
            24 * GB,
            "NVIDIA GA102 (Ampere) whitepaper: BF16 with FP32 accumulate 71 TFLOPS dense, 936 GB/s; no FP8; "
            "PCIe 4.0 x16 64 GB/s (the optional NVLink bridge, 112.5 GB/s, not assumed)",
            interconnect_bandwidth=64 * GB,
        ),
        GPUProfile(
            "mi300x",
            "AMD Instinct MI300X",
            1307.4e12,
            2614.9e12,
            None,
            5300 * GB,
            192 * GB,
            "AMD MI300X data sheet: BF16 1,307.4 / FP8 2,614.9 TFLOPS dense, 192 GB HBM3 at 5.3 TB/s, "
            "Infinity Fabric 896 GB/s aggregate",
            interconnect_bandwidth=896 * GB,
        ),
    )
}

#: Names accepted by :func:`get_gpu` and ``--gpu`` (besides a :class:`GPUProfile` of your own).
GPU_NAMES: tuple[str, ...] = tuple(GPU_PROFILES)

_ALIASES = {"h100": "h100-sxm", "a100": "a100-80gb", "4090": "rtx-4090", "3090": "rtx-3090"}


def get_gpu(gpu: str | GPUProfile) -> GPUProfile:
    """A profile by name (case-insensitive; ``h100``, ``a100``, ``4090``, ``3090`` are accepted as
    short forms), or a :class:`GPUProfile` returned unchanged.

    Raises:
        ValueError: an unknown name; the message lists the known ones.
    """
    if isinstance(gpu, GPUProfile):
        return gpu
    if not isinstance(gpu, str):
        raise ValueError(f"gpu must be a GPU name or a GPUProfile, got {type(gpu).__name__}")
    key = gpu.strip().lower().replace("_", "-").replace(" ", "-")
    key = _ALIASES.get(key, key)
    if key not in GPU_PROFILES:
        raise ValueError(f"unknown GPU {gpu!r}; known GPUs: {', '.join(GPU_NAMES)} (or define a GPUProfile)")
    return GPU_PROFILES[key]
