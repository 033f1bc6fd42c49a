"""The PTX that unpacks four low-bit codes on the GPU, checked on the CPU by executing its
instructions one by one (byte permute, shift, lop3, packed 16-bit subtraction and FMA) in Python.

The GPU tests run the same strings for real; this catches a wrong constant (mask, magic number,
bias, permute selector, operand order) on any machine. Expected values come from the reference
unpacker (``kvlab.quantization.lowbit.unpack_codes``) and, for ``c · s + z``, from float64 arithmetic
rounded once to fp16 by numpy (the rounding ``fma.rn`` does), not from the PTX.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kvlab.kernels.lowbit_unpack_asm import unpack_asm, unpack_fma_asm
from kvlab.quantization.lowbit import unpack_codes

from .ptx_model import half_bits, output_halves, run_ptx


def _fma_f16(a: float, b: float, c: float) -> float:
    """``a · b + c`` rounded once to fp16 (exact in float64 for these operands: fp16 numbers of
    moderate exponents and codes below 16)."""
    return float(np.float16(np.float64(a) * np.float64(b) + np.float64(c)))


def _run(asm: str, word: int, dtype: torch.dtype, extra: tuple[int, ...] = ()) -> list[float]:
    """Execute the PTX on one b32 input ``$2`` (and b32 inputs ``$3``, ``$4`` ... from ``extra``); the
    four 16-bit results, low half of $0 first."""
    return output_halves(run_ptx(asm, [word, *extra]), dtype)


@pytest.mark.parametrize("bits", [4, 2])
@pytest.mark.parametrize("dtype, offset", [(torch.bfloat16, 8), (torch.float16, 8), (torch.float16, 0),
                                           (torch.bfloat16, 0)])
def test_unpack_asm_gives_code_minus_offset(bits, dtype, offset, gen):
    words = torch.randint(0, 2**32, (64,), generator=gen, dtype=torch.int64).tolist() + [0, 0xFFFFFFFF]
    for part in range(8 // bits):
        asm = unpack_asm(bits, part, dtype, offset)
        for w in words:
            codes = unpack_codes(torch.tensor(list(w.to_bytes(4, "little")), dtype=torch.uint8), bits)
            want = [float(c) - offset for c in codes.view(4, 8 // bits)[:, part]]
            assert _run(asm, w, dtype) == want, f"word {w:#010x}, part {part}"


def _pack_halves(values: list[float]) -> tuple[int, int]:
    """Four fp16 numbers as two b32 words, element 0 in the low half of the first (Triton's packing)."""
    bits = [half_bits(v, torch.float16) for v in values]
    return bits[0] | (bits[1] << 16), bits[2] | (bits[3] << 16)


@pytest.mark.parametrize("bits", [4, 2])
def test_unpack_fma_asm_gives_code_times_scale_plus_zero(bits, gen):
    """Worked case from the docstring: 2 bits, part 3, byte 0xC0 → code 3; 3 · 0.5 − 1 = 0.5. Then
    random words, scales in [2^-8, 2) and zero points in (−4, 4), each code against float64
    ``c · s + z`` rounded once to fp16, element by element (so a swapped operand or half shows)."""
    halves = (*_pack_halves([0.5] * 4), *_pack_halves([-1.0] * 4))
    doc = _run(unpack_fma_asm(2, 3), 0xC0, torch.float16, halves)
    assert doc[0] == 0.5
    words = torch.randint(0, 2**32, (48,), generator=gen, dtype=torch.int64).tolist() + [0, 0xFFFFFFFF]
    for part in range(8 // bits):
        asm = unpack_fma_asm(bits, part)
        for w in words:
            s = (torch.rand(4, generator=gen) * 2.0).clamp_min(2.0**-8).half().float().tolist()
            z = ((torch.rand(4, generator=gen) - 0.5) * 8.0).half().float().tolist()
            codes = unpack_codes(torch.tensor(list(w.to_bytes(4, "little")), dtype=torch.uint8), bits)
            c = codes.view(4, 8 // bits)[:, part].tolist()
            want = [_fma_f16(c[i], s[i], z[i]) for i in range(4)]
            got = _run(asm, w, torch.float16, (*_pack_halves(s), *_pack_halves(z)))
            assert got == want, f"word {w:#010x}, part {part}, scales {s}, zeros {z}"
