"""The PTX that unpacks four low-bit codes on the GPU, checked on the CPU by executing its
instructions one by one (byte permute, shift, lop3, packed 16-bit subtraction) in Python.

The GPU tests run the same strings for real; this catches a wrong constant (mask, magic number,
bias, permute selector) on any machine. Expected values come from the reference unpacker
(``kvlab.quantization.lowbit.unpack_codes``), not from the PTX.
"""

from __future__ import annotations

import pytest
import torch

from kvlab.kernels.lowbit_attention_call import unpack_asm
from kvlab.quantization.lowbit import unpack_codes


def _half_value(bits16: int, dtype: torch.dtype) -> float:
    return float(torch.tensor([bits16], dtype=torch.int32).to(torch.int16).view(dtype).float())


def _half_bits(value: float, dtype: torch.dtype) -> int:
    return int(torch.tensor([value], dtype=torch.float32).to(dtype).view(torch.int16)) & 0xFFFF


def _run(asm: str, word: int, dtype: torch.dtype) -> list[float]:
    """Execute the PTX on one b32 input; the four 16-bit results, low half of $0 first."""
    regs = {"$2": word}
    val = lambda x: regs[x] if x in regs else int(x, 0)  # noqa: E731
    for line in asm.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        a = [x.strip() for x in args.split(",")]
        if op == "mov.b32":
            regs[a[0]] = val(a[1])
        elif op == "prmt.b32":
            pool = val(a[1]).to_bytes(4, "little") + val(a[2]).to_bytes(4, "little")
            sel = val(a[3])
            regs[a[0]] = int.from_bytes(bytes(pool[(sel >> (4 * i)) & 7] for i in range(4)), "little")
        elif op == "shr.b32":
            regs[a[0]] = val(a[1]) >> val(a[2])
        elif op == "lop3.b32":
            assert int(a[4], 0) == 0xEA, "only (a & b) | c is modelled"
            regs[a[0]] = (val(a[1]) & val(a[2])) | val(a[3])
        elif op in ("sub.rn.bf16x2", "sub.rn.f16x2"):
            x, y = val(a[1]), val(a[2])
            halves = [_half_value((x >> s) & 0xFFFF, dtype) - _half_value((y >> s) & 0xFFFF, dtype)
                      for s in (0, 16)]
            regs[a[0]] = _half_bits(halves[0], dtype) | (_half_bits(halves[1], dtype) << 16)
        else:
            raise AssertionError(f"unmodelled instruction {op}")
    return [_half_value((regs[r] >> s) & 0xFFFF, dtype) for r in ("$0", "$1") for s in (0, 16)]


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
