"""Fitting kernel CSVs and deriving KV memory from GPU memory, against hand-made inputs."""

from __future__ import annotations

import csv
import random

import pytest

from kvlab.sizing.gpu_memory import estimate_activation_bytes, kv_cache_memory_from_gpu, weight_bytes
from kvlab.timing import fit_kernel_csv, read_efficiency_table, write_efficiency_table

HEADER = ["scheme", "batch", "context", "kind", "median_us", "bytes", "tflops", "device", "backend"]


def test_fit_recovers_a_known_efficiency_and_latency(tmp_path, seed):
    rng = random.Random(seed)
    eff, lat = rng.uniform(0.3, 0.95), rng.uniform(2e-6, 30e-6)
    path = tmp_path / "decode_x.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for _ in range(7):
            nbytes = rng.randint(10**6, 10**10)
            w.writerow(
                [
                    "bfloat16",
                    1,
                    1,
                    "decode",
                    (lat + nbytes / (eff * 3.35e12)) * 1e6,
                    nbytes,
                    0,
                    "NVIDIA H100 80GB HBM3",
                    "kvlab-triton",
                ]
            )
        w.writerow(["bfloat16", 1, 1, "prefill", 100.0, 1, 247.25, "NVIDIA H100 80GB HBM3", "kvlab-triton"])
        w.writerow(["bfloat16", 1, 1, "decode", 1.0, 10**9, 0, "NVIDIA H100 80GB HBM3", "torch-sdpa"])
    fitted = {(k.scheme, k.kind): k for k in fit_kernel_csv(path)}
    assert fitted["bfloat16", "decode"].efficiency == pytest.approx(eff, rel=1e-3)
    assert fitted["bfloat16", "decode"].latency_s == pytest.approx(lat, rel=1e-3)
    assert fitted["bfloat16", "decode"].points == 7  # the SDPA baseline row is not kvlab's kernel
    assert fitted["bfloat16", "prefill"].efficiency == pytest.approx(247.25 / 989, rel=1e-3)
    out = tmp_path / "table.csv"
    write_efficiency_table(list(fitted.values()), out)
    again = {(k.scheme, k.kind): k for k in read_efficiency_table(out)}
    assert again["bfloat16", "decode"].efficiency == pytest.approx(eff, rel=1e-3)


def test_the_shipped_table_is_the_fit_of_the_committed_csv():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    shipped = {
        (k.scheme, k.kind): k for k in read_efficiency_table(root / "kvlab/timing/kernel_efficiency.csv")
    }
    fresh = fit_kernel_csv(root / "benchmarks/results/decode_NVIDIA_H100_80GB_HBM3.csv")
    for k in fresh:
        assert shipped[k.scheme, k.kind].efficiency == pytest.approx(k.efficiency, abs=1e-4)
    lowbit = fit_kernel_csv(root / "benchmarks/results/lowbit_NVIDIA_H100_80GB_HBM3.csv")
    for k in lowbit:
        if k.scheme not in {f.scheme for f in fresh}:  # schemes only the low-bit benchmark measures
            assert shipped[k.scheme, k.kind].efficiency == pytest.approx(k.efficiency, abs=1e-4)
    assert ("kivi4", "decode") in shipped
    # bf16 decode at 64 × 32k reads 8.59 GB in 2.832 ms: 3.03 TB/s of the spec sheet's 3.35 TB/s
    assert 0.85 < shipped["bfloat16", "decode"].efficiency < 0.95


def test_kv_memory_from_gpu_memory_matches_the_worked_example():
    w = weight_bytes(8_030_000_000, "bf16")
    act = estimate_activation_bytes(8192, 4096)
    est = kv_cache_memory_from_gpu(80 * 10**9, 0.9, w, act)
    assert w == 16_060_000_000
    assert act == 8192 * 4096 * 36 + 2**30
    assert est.kv_cache_bytes == 72_000_000_000 - 16_060_000_000 - act
    assert "(estimate)" in est.describe()


def test_weights_that_do_not_fit_say_by_how_much():
    # 141.2e9 B of weights + 1 GiB on 0.9 × 24e9 = 21.6e9 B: over by 119.6e9 B + 1 GiB = 112.39 GiB
    w = weight_bytes(70_600_000_000, "bf16")
    with pytest.raises(ValueError, match=r"exceed .* by 112\.39 GiB"):
        kv_cache_memory_from_gpu(24 * 10**9, 0.9, w, 2**30)


@pytest.mark.parametrize("util", [0, -0.1, 1.01, float("nan"), "0.9", True])
def test_utilization_outside_0_1_is_refused(util):
    with pytest.raises(ValueError, match=r"gpu_memory_utilization must be a number in \(0, 1\]"):
        kv_cache_memory_from_gpu(80 * 10**9, util, 10**9, 10**9)


def test_unknown_weight_dtype_lists_the_choices():
    with pytest.raises(
        ValueError, match="weight_dtype must be one of 'bf16', 'fp16', 'fp8', 'int4', 'nvfp4'"
    ):
        weight_bytes(10**9, "int3")
