"""Kernel efficiencies fitted to measured kernel CSVs (``benchmarks/results/decode_*.csv``).

For each scheme the decode and cache-write rows are fitted, by least squares, to

    time = latency + bytes / (efficiency × peak bandwidth)

so ``efficiency`` is the fraction of the spec-sheet bandwidth the kernel reaches on large inputs
and ``latency`` the fixed cost of one launch. Prefill rows give ``efficiency = achieved FLOP/s /
peak BF16 FLOP/s`` (median over the rows). The fitted table is what the step-time model reads.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from kvlab.hardware import GPU_PROFILES, GPUProfile

KINDS = ("decode", "prefill", "write")


@dataclass(frozen=True)
class KernelEfficiency:
    """One fitted kernel.

    Attributes:
        kernel: whose kernel (``"kvlab"``, ``"vllm"``, or a name of your own).
        scheme: the kv-cache dtype.
        kind: ``"decode"`` (fraction of bandwidth), ``"prefill"`` (fraction of BF16 FLOP/s) or
            ``"write"`` (fraction of bandwidth).
        efficiency: the fraction (0, 1].
        latency_s: fixed time per launch (seconds); 0 for prefill.
        gpu: the GPU profile it was measured on.
        points: measurements behind the fit.
        source: the CSV (or ``"assumed"``).
    """

    kernel: str
    scheme: str
    kind: str
    efficiency: float
    latency_s: float
    gpu: str
    points: int
    source: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if not 0 < self.efficiency <= 1.5:
            raise ValueError(
                f"efficiency of {self.kernel}/{self.scheme}/{self.kind} must be in (0, 1.5], "
                f"got {self.efficiency}"
            )
        if not self.latency_s >= 0:
            raise ValueError(f"latency_s must be >= 0, got {self.latency_s}")


def gpu_of_device(device: str) -> GPUProfile:
    """The profile of a CUDA device name such as ``"NVIDIA H100 80GB HBM3"``."""
    d = device.lower()
    for key, name in (
        ("h100", "h100-sxm"),
        ("h200", "h200"),
        ("b200", "b200"),
        ("a100", "a100-80gb"),
        ("l40s", "l40s"),
        ("4090", "rtx-4090"),
        ("3090", "rtx-3090"),
        ("mi300x", "mi300x"),
    ):
        if key in d:
            return GPU_PROFILES[name]
    if d.replace("nvidia ", "").strip() == "l4":
        return GPU_PROFILES["l4"]
    raise ValueError(f"no GPU profile matches the device {device!r}; known: {', '.join(GPU_PROFILES)}")


def _fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``y = a + b x`` with ``a, b >= 0`` (a negative intercept is refitted through 0)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 2 or sxx == 0:
        return 0.0, my / mx
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    a = my - b * mx
    if a < 0:
        a, b = 0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
    return a, b


def fit_kernel_csv(path: str | Path, kernel: str = "kvlab") -> list[KernelEfficiency]:
    """Fit every (scheme, kind) of a kernel CSV written by ``kvlab bench``.

    The CSV needs the columns ``scheme, kind, median_us, bytes, tflops, device, backend``; rows whose
    backend does not start with ``kvlab`` (PyTorch's SDPA baselines) are skipped for ``kernel="kvlab"``.
    """
    p = Path(path)
    with p.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"kernel CSV {str(p)!r} has no rows")
    gpu = gpu_of_device(rows[0]["device"])
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r["kind"] == "prefill" and not r.get("tflops"):
            continue  # a prefill row without its FLOP rate cannot give an efficiency
        if r["kind"] in KINDS and r.get("backend", "").startswith(kernel):
            groups.setdefault((r["scheme"], r["kind"]), []).append(r)
    out = []
    for (scheme, kind), rs in sorted(groups.items()):
        if kind == "prefill":
            effs = [float(r["tflops"]) * 1e12 / gpu.bf16_flops for r in rs]
            eff, lat = statistics.median(effs), 0.0
        else:
            a, b = _fit_line([float(r["bytes"]) for r in rs], [float(r["median_us"]) * 1e-6 for r in rs])
            eff, lat = 1.0 / (b * gpu.memory_bandwidth), a
        out.append(
            KernelEfficiency(kernel, scheme, kind, round(eff, 4), round(lat, 9), gpu.name, len(rs), p.name)
        )
    return out


CSV_FIELDS = ("kernel", "scheme", "kind", "efficiency", "latency_us", "gpu", "points", "source")


def write_efficiency_table(rows: list[KernelEfficiency], path: str | Path) -> None:
    """Write fitted kernels as the CSV :func:`read_efficiency_table` reads."""
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in rows:
            w.writerow(
                [
                    r.kernel,
                    r.scheme,
                    r.kind,
                    r.efficiency,
                    round(r.latency_s * 1e6, 3),
                    r.gpu,
                    r.points,
                    r.source,
                ]
            )


def read_efficiency_table(path: str | Path) -> list[KernelEfficiency]:
    """Read a table written by :func:`write_efficiency_table` (or by hand: same columns)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"efficiency table {str(path)!r} is not a file")
    with p.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = set(CSV_FIELDS) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"efficiency table {str(p)!r} lacks the columns {sorted(missing)}")
        out = []
        for i, r in enumerate(reader):
            try:
                out.append(
                    KernelEfficiency(
                        r["kernel"],
                        r["scheme"],
                        r["kind"],
                        float(r["efficiency"]),
                        float(r["latency_us"]) * 1e-6,
                        r["gpu"],
                        int(r["points"]),
                        r["source"],
                    )
                )
            except ValueError as exc:
                raise ValueError(f"efficiency table {str(p)!r} row {i + 1}: {exc}") from None
    return out


def fit_gemm_efficiency(
    tokens: list[int],
    seconds: list[float],
    parameters: int,
    weight_bytes: int,
    gpu: GPUProfile,
    dtype: str = "bf16",
) -> tuple[float, float]:
    """``(gemm_compute, gemm_memory)`` from timed weight GEMMs of ``tokens`` tokens each.

    ``gemm_memory`` = weight bytes / (time × bandwidth) at the fewest tokens (memory bound);
    ``gemm_compute`` = ``2 × parameters × tokens`` / (time × peak FLOP/s) at the most tokens
    (compute bound). Each is capped at 1.
    """
    if len(tokens) != len(seconds) or len(tokens) < 2:
        raise ValueError("need at least two (tokens, seconds) measurements")
    few = min(range(len(tokens)), key=lambda i: tokens[i])
    many = max(range(len(tokens)), key=lambda i: tokens[i])
    memory = weight_bytes / (seconds[few] * gpu.memory_bandwidth)
    compute = 2 * parameters * tokens[many] / (seconds[many] * gpu.flops_for(dtype))
    return min(1.0, compute), min(1.0, memory)
