"""GPU profiles: the public spec-sheet numbers a roofline needs.

Every figure is a *dense* (no 2:4 sparsity) tensor-core peak from the vendor's data sheet or
architecture whitepaper, and the HBM/GDDR bandwidth. Spec sheets often print the sparse figure
first; the dense one is half of it. ``None`` means the GPU has no tensor-core path for that format
(the time model then falls back to the next wider format).

The memory is the total CUDA reports (``torch.cuda.mem_get_info()``), which vLLM multiplies by
``gpu_memory_utilization``: the driver keeps part of the card, so an "80 GB" H100 (80e9 B =
74.51 GiB) reports about 79.2 GiB and a 24 GB RTX 3090 about 23.6 GiB. Each figure is read off a
public vLLM log or a PyTorch print (cited per profile, saying where the log does not name the GPU);
the vendor's decimal GB figure is kept beside it. The total moves by a few hundredths of a GiB with
the driver and ECC setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.validation import require_positive_int

TERA = 10**12
GB = 10**9
GIB = 2**30


def _gib(value: float) -> int:
    """``value`` GiB in bytes (a logged total has two decimals: ±0.005 GiB)."""
    return round(value * GIB)


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
        memory_bytes: the total memory CUDA reports for the GPU, which vLLM's
            ``gpu_memory_utilization`` multiplies (bytes).
        source: where the compute and bandwidth numbers come from.
        interconnect_bandwidth: peak GPU-to-GPU bandwidth, both directions added as data sheets print
            it (bytes/s): NVLink / Infinity Fabric, or PCIe where a GPU has no such link; ``None`` =
            unknown (tensor parallelism cannot be timed then).
        vendor_memory_bytes: the memory on the data sheet (decimal GB), ``None`` = not given;
            informational only (vLLM never reads it).
        memory_source: where ``memory_bytes`` comes from.
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
    vendor_memory_bytes: int | None = None
    memory_source: str = "user-defined"

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
        if self.vendor_memory_bytes is not None:
            require_positive_int(self.vendor_memory_bytes, f"vendor_memory_bytes of GPU {self.name!r}")

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
            _gib(79.18),
            "NVIDIA H100 data sheet (SXM): BF16 1,979 / FP8 3,958 TFLOPS with sparsity, 3.35 TB/s, "
            "NVLink 900 GB/s",
            interconnect_bandwidth=900 * GB,
            vendor_memory_bytes=80 * GB,
            memory_source=(
                'vLLM issue 23192 (8x H100, vllm-openai v0.9.1): "Free memory on device (5.31/79.18 GiB)"; '
                "other H100 logs print 79.11-79.22 GiB (vLLM PR 10511: total_gpu_memory 79.22GiB); "
                "torch.cuda.mem_get_info on an H100 80GB HBM3 here: 85,017,493,504 B (79.18 GiB)"
            ),
        ),
        GPUProfile(
            "h200",
            "NVIDIA H200 SXM 141GB",
            989 * TERA,
            1979 * TERA,
            None,
            4800 * GB,
            _gib(139.81),
            "NVIDIA H200 data sheet (SXM): same tensor cores as H100 SXM, 141 GB HBM3e at 4.8 TB/s, "
            "NVLink 900 GB/s",
            interconnect_bandwidth=900 * GB,
            vendor_memory_bytes=141 * GB,
            memory_source=(
                'a public vLLM log of 8x NVIDIA H200 (nvidia-smi 143,771 MiB each): "total_gpu_memory '
                '(139.81GiB) x gpu_memory_utilization (0.85)"'
            ),
        ),
        GPUProfile(
            "b200",
            "NVIDIA B200 (HGX, 1,000 W)",
            2250 * TERA,
            4500 * TERA,
            9000 * TERA,
            8000 * GB,
            _gib(178.35),
            "NVIDIA HGX/DGX B200 specs: BF16 4.5 / FP8 9 / FP4 18 PFLOPS with sparsity, 8 TB/s, "
            "1,440 GB per 8 GPUs, NVLink 1.8 TB/s per GPU",
            interconnect_bandwidth=1800 * GB,
            vendor_memory_bytes=180 * GB,
            memory_source=(
                "unsloth issue 3411 (one NVIDIA B200, torch 2.8): total memory 178.351 (bytes / 2**30, "
                'printed as "GB")'
            ),
        ),
        GPUProfile(
            "a100-80gb",
            "NVIDIA A100 SXM 80GB",
            312 * TERA,
            None,
            None,
            2039 * GB,
            _gib(79.32),
            "NVIDIA A100 data sheet (80GB SXM): BF16 312 TFLOPS dense, 2,039 GB/s; no FP8; NVLink 600 GB/s",
            interconnect_bandwidth=600 * GB,
            vendor_memory_bytes=80 * GB,
            memory_source='vllm-omni issue 276 (2x A100 80GB): "Free memory on device (0.49/79.32 GiB)"',
        ),
        GPUProfile(
            "l40s",
            "NVIDIA L40S",
            362.05e12,
            733 * TERA,
            None,
            864 * GB,
            _gib(44.31),
            "NVIDIA L40S data sheet: BF16 362.05 / FP8 733 TFLOPS dense, 48 GB GDDR6 at 864 GB/s; "
            "PCIe Gen4 x16 64 GB/s (no NVLink)",
            interconnect_bandwidth=64 * GB,
            vendor_memory_bytes=48 * GB,
            memory_source=(
                'a public vLLM log that loads the fused-MoE config device_name=NVIDIA_L40S: "total_gpu_memory'
                ' (44.31GiB)"; other 48 GB Ada logs print 44.35-44.39 GiB'
            ),
        ),
        GPUProfile(
            "l4",
            "NVIDIA L4",
            121 * TERA,
            242.5e12,
            None,
            300 * GB,
            _gib(22.05),
            "NVIDIA L4 data sheet: BF16 242 / FP8 485 TFLOPS with sparsity, 24 GB at 300 GB/s; "
            "PCIe Gen4 x16 64 GB/s",
            interconnect_bandwidth=64 * GB,
            vendor_memory_bytes=24 * GB,
            memory_source=(
                'pytorch issue 175666 (vLLM CI): "Free memory on device cuda:0 (19.77/22.05 GiB)"; the line '
                "does not name the GPU (a 24 GB L4 class figure; other logs print 22.06-22.07 GiB)"
            ),
        ),
        GPUProfile(
            "rtx-4090",
            "NVIDIA GeForce RTX 4090",
            165.2e12,
            330.3e12,
            None,
            1008 * GB,
            _gib(23.65),
            "NVIDIA Ada GPU architecture whitepaper: BF16/FP8 with FP32 accumulate 165.2 / 330.3 TFLOPS "
            "dense, 1,008 GB/s; PCIe 4.0 x16 64 GB/s (no NVLink)",
            interconnect_bandwidth=64 * GB,
            vendor_memory_bytes=24 * GB,
            memory_source=(
                "public vLLM logs print total_gpu_memory 23.64-23.67 GiB for 24 GB Ada cards; none found "
                "names the RTX 4090 beside the figure, so this one is the least certain"
            ),
        ),
        GPUProfile(
            "rtx-3090",
            "NVIDIA GeForce RTX 3090",
            71 * TERA,
            None,
            None,
            936 * GB,
            _gib(23.58),
            "NVIDIA GA102 (Ampere) whitepaper: BF16 with FP32 accumulate 71 TFLOPS dense, 936 GB/s; no FP8; "
            "PCIe 4.0 x16 64 GB/s (the optional NVLink bridge, 112.5 GB/s, not assumed)",
            interconnect_bandwidth=64 * GB,
            vendor_memory_bytes=24 * GB,
            memory_source=(
                'vLLM issue 10517 (RTX 3090, Llama-3.1-8B): "total_gpu_memory=23.58GiB"; vLLM PR 14447 (RTX '
                '3090 rigs): "total_gpu_memory (23.58GiB)"'
            ),
        ),
        GPUProfile(
            "mi300x",
            "AMD Instinct MI300X",
            1307.4e12,
            2614.9e12,
            None,
            5300 * GB,
            _gib(191.45),
            "AMD MI300X data sheet: BF16 1,307.4 / FP8 2,614.9 TFLOPS dense, 192 GB HBM3 at 5.3 TB/s, "
            "Infinity Fabric 896 GB/s aggregate",
            interconnect_bandwidth=896 * GB,
            vendor_memory_bytes=192 * GB,
            memory_source=(
                'a public vLLM ROCm log its author identifies as one MI300X: "total_gpu_memory (191.45GiB)"'
            ),
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
