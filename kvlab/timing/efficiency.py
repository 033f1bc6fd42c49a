"""The efficiencies of the step-time model: visible, editable, and traced to their source.

Attention decode, attention prefill and cache write come from the fitted kernel table
(``kvlab/timing/kernel_efficiency.csv``, rebuilt from ``benchmarks/results/`` by
``benchmarks/timing_efficiencies.py``). The weight-GEMM efficiencies are fitted to bf16 GEMMs timed
on an H100 (``benchmarks/results/timing_gemm_NVIDIA_H100_80GB_HBM3.csv``, by
``benchmarks/timing_validation_gpu.py``) and applied to every GPU as the same fraction of its peak;
the per-step overhead (scheduler, sampler, launches of an engine) is an assumption. All are fields,
printed with the rest, so a user can replace them with their own measurements. A scheme without a
fitted kernel falls back to the pure roofline (efficiency 1, no launch latency) and says so in
:attr:`Efficiencies.warnings`.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from kvlab.quantization import SCHEME_NAMES
from kvlab.timing.kernel_fit import KINDS, KernelEfficiency, read_efficiency_table

#: The table shipped with kvlab (fitted to kvlab's own kernels on an H100).
DEFAULT_TABLE = Path(__file__).with_name("kernel_efficiency.csv")

#: Where the default GEMM efficiencies come from.
GEMM_SOURCE = "torch bf16 GEMMs on h100-sxm, timing_gemm_NVIDIA_H100_80GB_HBM3.csv"

#: Schemes that run the same kernel as another one.
_SAME_KERNEL = {"fp8": "fp8_e4m3"}


class PureRooflineWarning(UserWarning):
    """A part of the step has no measured efficiency; the pure roofline is used for it."""


@dataclass
class Efficiencies:
    """Fractions of the spec-sheet peak each part of a step reaches.

    Attributes:
        gemm_compute: weight GEMMs, fraction of the tensor-core FLOP/s (0.60: 4096 tokens through
            the 4-layer llama-like model of the validation, on an H100).
        gemm_memory: weight GEMMs, fraction of the bandwidth when reading weights (0.75: 4 tokens
            through the same layers).
        step_overhead_s: fixed time per step: scheduling, sampling, launches (seconds; assumed 3 ms).
        allreduce: tensor-parallel all-reduces, fraction of the GPU-to-GPU bandwidth per direction
            (assumed 0.7; not measured by kvlab).
        allreduce_latency_s: fixed time of one all-reduce (seconds; assumed 10 µs; not measured).
        kernels: the fitted attention and cache-write kernels.
        kernel: which kernel's rows to use (``"kvlab"`` or ``"vllm"`` when measured).
        warnings: fallbacks to the pure roofline that happened (one sentence each).
    """

    gemm_compute: float = 0.60
    gemm_memory: float = 0.75
    step_overhead_s: float = 0.003
    allreduce: float = 0.7
    allreduce_latency_s: float = 10e-6
    kernels: tuple[KernelEfficiency, ...] = ()
    kernel: str = "kvlab"
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("gemm_compute", "gemm_memory", "allreduce"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"{name} must be a fraction in (0, 1], got {value!r}")
        for name in ("step_overhead_s", "allreduce_latency_s"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 <= value < float("inf")
            ):
                raise ValueError(f"{name} must be a finite number >= 0 seconds, got {value!r}")

    @classmethod
    def from_table(cls, path: str | Path = DEFAULT_TABLE, kernel: str = "kvlab", **fields) -> Efficiencies:
        """Efficiencies with the kernels of a table (default: the one shipped with kvlab)."""
        return cls(kernels=tuple(read_efficiency_table(path)), kernel=kernel, **fields)

    @classmethod
    def pure(cls) -> Efficiencies:
        """The textbook roofline: every part at its peak, no launch latencies, no step overhead."""
        kernels = tuple(
            KernelEfficiency("roofline", scheme, kind, 1.0, 0.0, "any", 0, "pure roofline")
            for scheme in SCHEME_NAMES
            for kind in KINDS
        )
        return cls(
            gemm_compute=1.0,
            gemm_memory=1.0,
            step_overhead_s=0.0,
            allreduce=1.0,
            allreduce_latency_s=0.0,
            kernels=kernels,
            kernel="roofline",
        )

    def replace(self, **changes) -> Efficiencies:
        """A copy with some fields changed (validated again; warnings start empty)."""
        return dataclasses.replace(self, warnings=[], **changes)

    def lookup(self, scheme: str, kind: str) -> tuple[float, float]:
        """``(efficiency, latency_s)`` of a kernel; ``(1.0, 0.0)`` with a warning when not measured."""
        name = _SAME_KERNEL.get(scheme, scheme)
        for k in self.kernels:
            if k.kernel == self.kernel and k.scheme == name and k.kind == kind:
                return k.efficiency, k.latency_s
        msg = (
            f"no measured {self.kernel} {kind} efficiency for kv-cache dtype {scheme!r}: "
            "using the pure roofline (efficiency 1.0, no launch latency) for it"
        )
        if msg not in self.warnings:
            self.warnings.append(msg)
            warnings.warn(msg, PureRooflineWarning, stacklevel=3)
        return 1.0, 0.0

    def rows(self) -> list[list[str]]:
        """Every efficiency as ``[part, scheme, value, latency, source]`` rows, for printing."""
        out = [
            ["gemm (compute)", "-", f"{self.gemm_compute:.3f}", "-", GEMM_SOURCE],
            ["gemm (weights read)", "-", f"{self.gemm_memory:.3f}", "-", GEMM_SOURCE],
            ["step overhead", "-", "-", f"{self.step_overhead_s * 1e3:.2f} ms", "assumed"],
            [
                "TP all-reduce",
                "-",
                f"{self.allreduce:.3f}",
                f"{self.allreduce_latency_s * 1e6:.1f} us",
                "assumed (ring all-reduce over the GPU-to-GPU link)",
            ],
        ]
        for k in self.kernels:
            if k.kernel == self.kernel:
                lat = f"{k.latency_s * 1e6:.1f} us" if k.kind != "prefill" else "-"
                out.append(
                    [
                        f"attention {k.kind}" if k.kind != "write" else "cache write",
                        k.scheme,
                        f"{k.efficiency:.3f}",
                        lat,
                        f"{k.kernel} on {k.gpu}, {k.points} pts, {k.source}",
                    ]
                )
        return out
