"""A model, in Python, of the few PTX instructions kvlab's inline-asm unpackers use.

The tests that check those unpackers on the CPU execute the PTX strings line by line here, so a wrong
constant (mask, magic number, permute selector, operand order) fails on any machine, not only on a
GPU. Each instruction is modelled from the PTX ISA's definition, not from the code under test:

* ``mov.b32``, ``xor.b32``, ``and.b32``, ``shr.b32``, ``shl.b32`` (the bits shifted past bit 31 are lost);
* ``prmt.b32 d, a, b, sel``: byte ``i`` of ``d`` is byte ``sel[4i:4i+3]`` of the 8-byte pool ``b:a``,
  or, when the nibble's top bit ``sel[4i+3]`` is set, that byte's sign bit copied into all 8 bits;
* ``lop3.b32 d, a, b, c, lut``: bit ``k`` of ``d`` is bit ``4·a_k + 2·b_k + c_k`` of ``lut`` (so
  ``0xEA`` is ``(a & b) | c`` and ``0x6A`` is ``(a & b) ^ c``);
* ``sub.rn``, ``mul.rn`` and ``fma.rn`` on packed pairs (``f16x2``, ``bf16x2``): each 16-bit half on its own,
  computed in float64 and rounded once to the half's format (exact in float64 for the operands these
  tests use: 16-bit numbers of moderate exponents).

Registers are b32 integers; the first ``outputs`` of ``$0, $1, ...`` are the outputs (two by default),
the inputs follow.
"""

from __future__ import annotations

import numpy as np
import torch


def half_value(bits16: int, dtype: torch.dtype) -> float:
    """The number a 16-bit pattern of ``dtype`` (float16 or bfloat16) holds, subnormals included."""
    return float(torch.tensor([bits16 & 0xFFFF], dtype=torch.int32).to(torch.int16).view(dtype).double())


def half_bits(value: float, dtype: torch.dtype) -> int:
    """``value`` rounded once (to nearest, ties to even) to ``dtype``, as a 16-bit pattern."""
    if dtype == torch.float16:
        return int(np.array([value], dtype=np.float64).astype(np.float16).view(np.uint16)[0])
    return int(torch.tensor([value], dtype=torch.float64).to(dtype).view(torch.int16)) & 0xFFFF


def _packed(op, dtype: torch.dtype, *words: int) -> int:
    """Apply ``op`` to the low halves and to the high halves of ``words``; the two results packed."""
    halves = [op(*(half_value(w >> s, dtype) for w in words)) for s in (0, 16)]
    return half_bits(halves[0], dtype) | (half_bits(halves[1], dtype) << 16)


_PACKED_DTYPES = {"f16x2": torch.float16, "bf16x2": torch.bfloat16}


def _lop3(a: int, b: int, c: int, lut: int) -> int:
    """PTX ``lop3.b32``: any function of three inputs, bit by bit, from its 8-entry truth table."""
    bits = ((lut >> (4 * ((a >> k) & 1) + 2 * ((b >> k) & 1) + ((c >> k) & 1))) & 1 for k in range(32))
    return sum(bit << k for k, bit in enumerate(bits))


def run_ptx(asm: str, inputs: list[int], outputs: int = 2) -> tuple[int, ...]:
    """Execute ``asm`` with b32 inputs ``$outputs, ...`` (``$2, $3, ...`` by default); the b32 outputs
    ``($0, ..)``."""
    regs = {f"${outputs + i}": w for i, w in enumerate(inputs)}

    def val(x: str) -> int:
        return regs[x] if x in regs else int(x, 0)

    for line in asm.splitlines():
        line = line.split("//")[0].strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        a = [x.strip() for x in args.split(",")]
        kind = op.rsplit(".", 1)[-1]
        if op == "mov.b32":
            regs[a[0]] = val(a[1])
        elif op == "xor.b32":
            regs[a[0]] = val(a[1]) ^ val(a[2])
        elif op == "and.b32":
            regs[a[0]] = val(a[1]) & val(a[2])
        elif op == "shr.b32":
            regs[a[0]] = val(a[1]) >> val(a[2])
        elif op == "shl.b32":
            regs[a[0]] = (val(a[1]) << val(a[2])) & 0xFFFFFFFF
        elif op == "prmt.b32":
            pool = val(a[1]).to_bytes(4, "little") + val(a[2]).to_bytes(4, "little")
            nibbles = [(val(a[3]) >> (4 * i)) & 0xF for i in range(4)]
            picked = [pool[n & 7] if n < 8 else (0xFF if pool[n & 7] & 0x80 else 0) for n in nibbles]
            regs[a[0]] = int.from_bytes(bytes(picked), "little")
        elif op == "lop3.b32":
            regs[a[0]] = _lop3(val(a[1]), val(a[2]), val(a[3]), int(a[4], 0))
        elif op.startswith("fma.rn.") and kind in _PACKED_DTYPES:
            operands = (val(a[1]), val(a[2]), val(a[3]))
            regs[a[0]] = _packed(lambda x, y, z: x * y + z, _PACKED_DTYPES[kind], *operands)
        elif op.startswith("mul.rn.") and kind in _PACKED_DTYPES:
            regs[a[0]] = _packed(lambda x, y: x * y, _PACKED_DTYPES[kind], val(a[1]), val(a[2]))
        elif op.startswith("sub.rn.") and kind in _PACKED_DTYPES:
            regs[a[0]] = _packed(lambda x, y: x - y, _PACKED_DTYPES[kind], val(a[1]), val(a[2]))
        else:
            raise AssertionError(f"unmodelled instruction {op}")
    return tuple(regs[f"${i}"] for i in range(outputs))


def output_halves(outputs: tuple[int, int], dtype: torch.dtype) -> list[float]:
    """The four 16-bit results of ``run_ptx``: low half of ``$0`` first."""
    return [half_value(r >> s, dtype) for r in outputs for s in (0, 16)]
