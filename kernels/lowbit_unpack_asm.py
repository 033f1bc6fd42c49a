"""PTX strings that turn packed low-bit codes into 16-bit numbers without a conversion instruction,
built on the host and handed to the kernel as ``tl.inline_asm_elementwise`` bodies (four codes of one
b32 per instance, ``pack=4``). The interpreter cannot run inline PTX: there the kernel uses its pure
Triton fallback (:mod:`kvlab.kernels.lowbit_dequant`), and ``tests/kernels/test_lowbit_unpack_asm.py``
executes these strings instruction by instruction on the CPU.

**The magic number.** OR-ing a code ``c < 128`` into the low bits of the bf16 number 128 (``0x4300``)
or ``c < 1024`` into the fp16 number 1024 (``0x6400``) gives the number ``128 + c`` (``1024 + c``)
exactly; one packed subtraction takes the base (and any offset) off, two codes at a time.
"""

from __future__ import annotations

import torch

#: 16-bit patterns of the numbers 128 (bf16) and 1024 (fp16): OR-ing a code c < 128 into their low
#: bits gives the number 128 + c (1024 + c) exactly, with no conversion instruction.
MAGIC = {torch.bfloat16: (0x4300, 128, "bf16x2"), torch.float16: (0x6400, 1024, "f16x2")}


def _fp16_bits(value: int) -> int:
    """Bit pattern of an integer that fp16 holds exactly."""
    return int(torch.tensor(float(value), dtype=torch.float16).view(torch.int16)) & 0xFFFF


def _unpack_lines(bits: int, part: int, dtype: torch.dtype, offset: int, outs: tuple[str, str]) -> list[str]:
    """Body of :func:`unpack_asm`, writing the two result words to ``outs``."""
    magic, base, kind = MAGIC[dtype]
    mask = ((1 << bits) - 1) * 0x10001
    sub_bits = (magic + offset) if dtype == torch.bfloat16 else _fp16_bits(base + offset)
    lines = [".reg .b32 a, b, m;", f"mov.b32 m, {sub_bits * 0x10001:#x};",
             "prmt.b32 a, $2, 0, 0x4140;", "prmt.b32 b, $2, 0, 0x4342;"]
    for r, out in zip(("a", "b"), outs, strict=True):
        if part:
            lines.append(f"shr.b32 {r}, {r}, {part * bits};")
        lines.append(f"lop3.b32 {r}, {r}, {mask:#x}, {magic * 0x10001:#x}, 0xea;")
        lines.append(f"sub.rn.{kind} {out}, {r}, m;")
    return lines


def unpack_asm(bits: int, part: int, dtype: torch.dtype, offset: int) -> str:
    """PTX turning four code bytes (one b32, ``$2``) into ``code_k − offset`` of each as four ``dtype``
    numbers (two b32, ``$0`` and ``$1``), where ``code_k`` is the ``bits``-bit code at position ``part``
    of its byte.

    Per pair of codes: one byte permute that puts the two bytes in the low byte of each 16-bit half,
    one shift that brings code ``part`` down, one ``lop3`` (``(x & mask) | magic``: the 16-bit number
    ``M + code``), one packed subtraction of ``M + offset`` (exact: small integers). Example, 4 bits,
    part 1, bf16, offset 8: byte ``0xA3`` → code 10 → ``0x4300 | 10`` = 138 → 138 − 136 = 2.
    """
    return "\n".join(["{"] + _unpack_lines(bits, part, dtype, offset, ("$0", "$1")) + ["}"])


def unpack_fma_asm(bits: int, part: int) -> str:
    """PTX turning four code bytes (``$2``) and their fp16 scales (``$3``, ``$4``) and zero points
    (``$5``, ``$6``), two numbers per b32, into ``code_k · s + z`` as four fp16 numbers (``$0``,
    ``$1``): the unpack of :func:`unpack_asm` (offset 0) and one packed ``fma.rn.f16x2`` per pair of
    codes, rounded once, as the scalar ``fma.rn.f16`` it replaces. Example, 2 bits, part 3: byte
    ``0xC0`` → code 3, with ``s = 0.5``, ``z = −1``: ``3 · 0.5 − 1 = 0.5``.
    """
    body = _unpack_lines(bits, part, torch.float16, 0, ("a", "b"))
    return "\n".join(["{"] + body + ["fma.rn.f16x2 $0, a, $3, $5;", "fma.rn.f16x2 $1, b, $4, $6;", "}"])


def times16_int8_asm(part: int) -> str:
    """PTX turning four code bytes (``$1``) into ``16 · (code_k − 8)`` as four int8 (``$0``), where
    ``code_k`` is the 4-bit code at position ``part`` of its byte: the int8 dots of
    :mod:`kvlab.kernels.lowbit_int8_dot`.

    The code is moved to the high nibble of its byte (a left shift of the word for part 0; the mask
    drops what the shift carries in from the byte below) and its top bit flipped: one ``lop3``
    computing ``(x & 0xF0) ^ 0x80`` per byte. As a signed byte that is ``16 · code − 128``, exactly
    ``16 · (code − 8)``. Example, part 1: byte ``0xA3`` → code 10 → ``0xA0 ^ 0x80 = 0x20`` = 32.
    """
    if part not in (0, 1):
        raise ValueError(f"a 4-bit code is part 0 or 1 of its byte, got {part}")
    lop = "lop3.b32 $0, {}, 0xf0f0f0f0, 0x80808080, 0x6a;"
    if part:
        return lop.format("$1")
    return "\n".join(["{", ".reg .b32 t;", "shl.b32 t, $1, 4;", lop.format("t"), "}"])
