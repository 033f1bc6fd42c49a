"""KIVI's ``c · s + z`` inside the kernel (:func:`kvlab.kernels.lowbit_dequant.kivi_dequant`), run by a
one-tile Triton kernel on fresh random code bytes, fp16 scales and zero points.

* Fallback (no PTX: the interpreter, ``fast_unpack=False``): float64 ``c · s + z`` within fp16
  rounding (one rounding if the compiler fuses the multiply-add, two in the interpreter's numpy:
  at most one unit in the last place of the product plus one of the result).
* GPU, packed ``fma.rn.f16x2`` PTX: exactly float64 ``c · s + z`` rounded once to fp16, and within
  that same bound of the fallback compiled beside it.
Outputs start as NaN.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kvlab.kernels.lowbit_dequant import kivi_dequant
from kvlab.kernels.lowbit_unpack_asm import unpack_fma_asm
from kvlab.kernels.runtime import INTERPRET, tl, triton
from kvlab.quantization.lowbit import unpack_codes

N = 2048


@triton.jit
def _dequant_kernel(b_ptr, s_ptr, z_ptr, out_ptr, N_: tl.constexpr, K: tl.constexpr, BITS: tl.constexpr,
                    ASM: tl.constexpr, INTERPRET_: tl.constexpr):
    i = tl.arange(0, N_)
    x = kivi_dequant(tl.load(b_ptr + i), K, BITS, tl.load(s_ptr + i), tl.load(z_ptr + i), ASM, 2, tl.float16,
                     INTERPRET_)
    tl.store(out_ptr + i, x.to(tl.float32))


def _inputs(gen, device):
    b = torch.randint(0, 256, (N,), generator=gen, dtype=torch.int32).to(torch.uint8)
    s = (torch.rand(N, generator=gen) * 0.5).clamp_min(2.0**-10).half()
    z = ((torch.rand(N, generator=gen) - 0.5) * 6.0).half()
    return b.to(device), s.to(device), z.to(device)


def _run(b, s, z, part, bits, asm):
    out = torch.full((N,), float("nan"), device=b.device)
    _dequant_kernel[(1,)](b, s, z, out, N, part, bits, asm, INTERPRET)
    return out.cpu().double()


def _float64_truth(b, s, z, part, bits):
    c = unpack_codes(b.cpu(), bits).view(N, 8 // bits)[:, part].double()
    return c * s.cpu().double() + z.cpu().double()


def _fp16_bound(exact: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """One fp16 unit in the last place of the result plus one of the product (``|c · s| ≤ 15 |s|``)."""
    def ulp(x):
        return torch.from_numpy(np.spacing(np.abs(x.numpy()).astype(np.float16)).astype(np.float64))
    return ulp(exact) + ulp(15.0 * s.cpu().double())


@pytest.mark.parametrize("bits", [4, 2])
def test_fallback_matches_float64(target, bits, gen):
    b, s, z = _inputs(gen, target.device)
    for part in range(8 // bits):
        exact = _float64_truth(b, s, z, part, bits)
        got = _run(b, s, z, part, bits, "")
        assert torch.isfinite(got).all()
        assert ((got - exact).abs() <= _fp16_bound(exact, s)).all(), f"part {part}"


@pytest.mark.parametrize("bits", [4, 2])
def test_packed_fma_asm_rounds_once_and_agrees_with_the_fallback(target, bits, gen):
    if INTERPRET:
        pytest.skip("inline PTX runs only compiled (the interpreter uses the fallback, tested above)")
    b, s, z = _inputs(gen, target.device)
    for part in range(8 // bits):
        exact = _float64_truth(b, s, z, part, bits)
        got = _run(b, s, z, part, bits, unpack_fma_asm(bits, part))
        want = torch.from_numpy(exact.numpy().astype(np.float16).astype(np.float64))
        assert torch.equal(got, want), f"part {part}: {int((got != want).sum())} differ from fp16(c·s + z)"
        fallback = _run(b, s, z, part, bits, "")
        assert ((got - fallback).abs() <= _fp16_bound(exact, s)).all(), f"part {part}"
