"""Packed low-bit codes → 16-bit numbers inside the low-bit attention kernel (one job: dequantization).

* ``int4_per_token_head``: ``code − 8`` is an int8 in −7..7, converted to the dot dtype (compiled:
  the host's PTX of :mod:`kvlab.kernels.lowbit_unpack_asm`, byte permutes and one packed subtraction
  per pair of codes; else Triton's own casts); the scales are applied by the tile (score, ``p``).
* KIVI with 16-bit queries: ``code · s + z`` in **fp16** (KIVI's scales and zero points are fp16 and
  its values lie within fp16's range), one rounding per element. ``HALF_DEQ`` says how:
  ``2``: the host's PTX unpacks four codes and applies ``s`` and ``z`` as packed ``fma.rn.f16x2`` (two
  codes per instruction); ``1``: the unpack PTX, then Triton's scalar fp16 multiply-add (``fma.rn.f16``
  compiled); ``0``: fp32 (an fp32 query). Without PTX (``ASM == ""``: the interpreter, or
  ``fast_unpack=False``) the same numbers come from the magic-number bitcast
  ``(0x6400 | c) as fp16 − 1024 = c`` (exact) times ``s`` plus ``z`` in Triton.
"""

from __future__ import annotations

from kvlab.kernels.numerics import round_to_dot_dtype, to_fp32
from kvlab.kernels.runtime import tl, triton


@triton.jit
def code_part(b, K: tl.constexpr, BITS: tl.constexpr):
    """Codes at position ``K`` of every byte of ``b`` (uint8 in, uint8 out)."""
    return (b >> (K * BITS)) & ((1 << BITS) - 1)


@triton.jit
def _run_unpack(b, ASM: tl.constexpr, FP16: tl.constexpr):
    if FP16:
        return tl.inline_asm_elementwise(ASM, "=r,=r,r", [b], dtype=tl.float16, is_pure=True, pack=4)
    else:
        return tl.inline_asm_elementwise(ASM, "=r,=r,r", [b], dtype=tl.bfloat16, is_pure=True, pack=4)


@triton.jit
def unpack_fma(b, s, z, ASM: tl.constexpr):
    """``c · s + z`` in fp16 for the codes of bytes ``b`` by the host's PTX
    (:func:`kvlab.kernels.lowbit_unpack_asm.unpack_fma_asm`): four codes, four scales and four zero
    points per instance, packed ``fma.rn.f16x2``. Compiled mode only."""
    return tl.inline_asm_elementwise(ASM, "=r,=r,r,r,r,r,r", [b, s.to(tl.float16), z.to(tl.float16)],
                                     dtype=tl.float16, is_pure=True, pack=4)


@triton.jit
def code_values(b, K: tl.constexpr, BITS: tl.constexpr, ASM: tl.constexpr, OFFSET: tl.constexpr,
                DTYPE: tl.constexpr):
    """``code − OFFSET`` of part ``K`` of bytes ``b`` as ``DTYPE`` (bf16/fp16), compiled mode only.

    With the host's PTX for this part (``ASM``, :func:`kvlab.kernels.lowbit_unpack_asm.unpack_asm`)
    four codes at a time become four 16-bit numbers by byte permutes, a shift, one logic op and a
    packed subtraction (about two instructions per code); without it, by Triton's own casts.
    """
    if ASM != "":
        x = _run_unpack(b, ASM, DTYPE.is_fp16())
    else:
        x = (code_part(b, K, BITS).to(tl.int8) - OFFSET).to(DTYPE)
    return x


@triton.jit
def as_dot_operand(x, DOT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """An exact int8/fp16/bf16 tensor → dot operand: the dot dtype compiled, fp32 in the interpreter
    (whose bf16 dot multiplies bit patterns; see :mod:`kvlab.kernels.numerics`)."""
    if INTERPRET_:
        return round_to_dot_dtype(to_fp32(x, INTERPRET_), DOT_DTYPE, INTERPRET_)
    else:
        return x.to(DOT_DTYPE)


@triton.jit
def kivi_dequant(b, K: tl.constexpr, BITS: tl.constexpr, s, z, ASM: tl.constexpr, HALF_DEQ: tl.constexpr,
                 DOT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """``c · s + z`` for the codes of part ``K`` of bytes ``b`` (fp16 scale and zero point broadcastable
    to ``b``) as dot operand; ``HALF_DEQ`` and ``ASM`` pick the instructions (module docstring)."""
    if HALF_DEQ == 2 and ASM != "":
        x = unpack_fma(b, s, z, ASM)
    elif HALF_DEQ and ASM != "":
        x = code_values(b, K, BITS, ASM, 0, tl.float16) * s + z
    elif HALF_DEQ:
        # code → fp16 without a conversion instruction: 0x6400 | c is the fp16 number 1024 + c
        # (c < 1024), and subtracting 1024 is exact
        c = code_part(b, K, BITS)
        x = ((c.to(tl.int16) | 0x6400).to(tl.float16, bitcast=True) - 1024.0) * s + z
    else:
        x = code_part(b, K, BITS).to(tl.float32) * s.to(tl.float32) + z.to(tl.float32)
    return as_dot_operand(x, DOT_DTYPE, INTERPRET_)


@triton.jit
def half_of_word(w, K: tl.constexpr):
    """fp16 number ``K`` (from the low end) of integer words ``w``."""
    return ((w >> (16 * K)) & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def code_times16_int8(b, K: tl.constexpr, ASM: tl.constexpr):
    """``16 · (code − 8)`` of the 4-bit codes at position ``K`` of bytes ``b``, as int8 operands of
    the int8 dots: one ``lop3`` per four codes with the host's PTX
    (:func:`kvlab.kernels.lowbit_unpack_asm.times16_int8_asm`), else Triton's integer ops (the
    interpreter). The factor 16 is taken off with the scales."""
    if ASM != "":
        return tl.inline_asm_elementwise(ASM, "=r,r", [b], dtype=tl.int8, is_pure=True, pack=4)
    else:
        return ((code_part(b, K, 4).to(tl.int32) - 8) * 16).to(tl.int8)
