"""Number conversions the kernels share, exact in both of Triton's modes.

A quantized cache is only trustworthy if every conversion rounds the way the reference does. On the
GPU, Triton's casts are the hardware's (round to nearest even, correct subnormals), so the helpers
here are plain casts there. Triton's *interpreter* (3.6) emulates casts in NumPy and gets some of
them wrong; each helper takes the ``INTERPRET`` flag as a constexpr and, in interpreter mode only,
computes the same bits with integer arithmetic. The compiled kernel never contains that code: a
constexpr branch is resolved before code generation.

What the interpreter gets wrong (each checked against ``torch.Tensor.to`` on CPU by
``tests/kernels/test_numerics.py``):

* fp32 → bf16 truncates instead of rounding to nearest even;
* bf16 → fp32 mishandles bf16 subnormals;
* fp32 → fp8 (e4m3 and e5m2) loses the mantissa carry (1.964 → 1.0), does not round ties to even and
  flushes subnormals to zero;
* fp8 → fp32 decodes the NaN codes of e4m3 (0x7F/0xFF) as ±480 and the Inf/NaN codes of e5m2 as
  finite numbers, so a poisoned (NaN-filled) cache would look like data;
* ``tl.dot`` on bf16 operands multiplies raw 16-bit patterns. The attention kernel therefore keeps
  its dot operands in fp32 in the interpreter, after rounding them to the dot dtype
  (:func:`round_to_dot_dtype`), so both modes multiply the same values;
* it also needs NumPy < 2.4 (``int()`` of one-element arrays in ``range`` loops); kvlab pins it.

fp32 → fp16 and fp16/int8 → fp32 are correct in the interpreter and need no help.
"""

from __future__ import annotations

from kvlab.kernels.runtime import tl, triton


@triton.jit
def round_half_even(y):
    """Round fp32 values to the nearest integer, ties to even (what ``torch.round`` does).

    Written with a truncating cast and an exact remainder instead of a libdevice call, so the same
    code runs in the interpreter (which has no libdevice). Valid for ``|y| < 2**31``.
    """
    t = y.to(tl.int32)  # toward zero
    tf = t.to(tl.float32)
    frac = tl.abs(y - tf)  # exact: y and tf share their leading bits
    odd = (t & 1) != 0
    away = (frac > 0.5) | ((frac == 0.5) & odd)
    step = tl.where(y < 0, -1.0, 1.0)
    return tl.where(away, tf + step, tf)


@triton.jit
def _bf16_bits_rne(x):
    """fp32 → bf16 bit pattern (int32, low 16 bits used), rounding to nearest even.

    Adding ``0x7FFF`` plus the lowest kept bit, then dropping 16 bits, is round-half-even on the
    magnitude; a carry out of the mantissa bumps the exponent, as it should. NaN keeps a quiet NaN.
    """
    bits = x.to(tl.int32, bitcast=True)
    lsb = (bits >> 16) & 1
    rounded = (bits + 0x7FFF + lsb) >> 16
    return tl.where(x != x, (bits >> 16) | 0x40, rounded)


@triton.jit
def to_bf16(x, INTERPRET: tl.constexpr):
    """fp32 → bf16, round to nearest even in both modes (the interpreter's own cast truncates)."""
    if INTERPRET:
        return _bf16_bits_rne(x).to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(tl.bfloat16)


@triton.jit
def to_fp32(x, INTERPRET: tl.constexpr):
    """Exact upcast of a bf16/fp16/fp32/int8 tensor to fp32.

    In the interpreter bf16 is widened by a 16-bit shift of its pattern, which is exact for every
    value, subnormals included (its own conversion gets subnormals wrong).
    """
    if INTERPRET:
        if x.dtype == tl.bfloat16:
            return (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
        else:
            return x.to(tl.float32)
    else:
        return x.to(tl.float32)


@triton.jit
def to_storage(x, DST: tl.constexpr, INTERPRET: tl.constexpr):
    """fp32 values → a 16/32-bit float storage dtype (``DST``), rounding to nearest even."""
    if DST.is_bf16():
        return to_bf16(x, INTERPRET)
    else:
        return x.to(DST)


@triton.jit
def fp8_bits(y, MANT_BITS: tl.constexpr, EXP_BIAS: tl.constexpr, SUBNORMAL_SCALE: tl.constexpr,
             MIN_NORMAL: tl.constexpr, NAN_CODE: tl.constexpr):
    """fp32 → 8-bit float code (int32 holding 0..255) by integer arithmetic, round to nearest even.

    For the interpreter only (its fp8 cast is wrong, see the module docstring). ``y`` must already be
    clamped to the format's finite range. The format is given by its mantissa bits and exponent
    bias (e4m3: 3 and 7; e5m2: 2 and 15).

    * Normal results: round the fp32 mantissa from 23 to ``MANT_BITS`` bits with the same
      add-and-shift trick as bf16; re-biasing the exponent is a subtraction on the shifted pattern,
      and a mantissa carry flows into the exponent by itself (1.964 → 2.0 in e4m3).
    * Subnormal results (``|y| < MIN_NORMAL``): the code *is* the magnitude counted in units of the
      smallest subnormal, so scale by ``SUBNORMAL_SCALE`` (a power of two, exact) and round half to
      even. Rounding up to ``2**MANT_BITS`` gives the smallest normal's code, which is right.
    """
    bits = y.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    mag_bits = bits & 0x7FFFFFFF
    shift: tl.constexpr = 23 - MANT_BITS
    lsb = (mag_bits >> shift) & 1
    rounded = mag_bits + ((1 << (shift - 1)) - 1) + lsb
    normal = (rounded >> shift) - ((127 - EXP_BIAS) << MANT_BITS)
    mag = mag_bits.to(tl.float32, bitcast=True)
    # only lanes below MIN_NORMAL use this; zero the others so that no lane overflows the int cast
    tiny = tl.where(mag < MIN_NORMAL, mag, 0.0)
    subnormal = round_half_even(tiny * SUBNORMAL_SCALE).to(tl.int32)
    code = tl.where(mag < MIN_NORMAL, subnormal, normal) | sign
    return tl.where(y != y, NAN_CODE, code)


@triton.jit
def to_fp8(y, DST: tl.constexpr, MANT_BITS: tl.constexpr, EXP_BIAS: tl.constexpr,
           SUBNORMAL_SCALE: tl.constexpr, MIN_NORMAL: tl.constexpr, NAN_CODE: tl.constexpr,
           INTERPRET: tl.constexpr):
    """Clamped fp32 values → fp8 ``DST`` (e4m3 or e5m2), round to nearest even in both modes."""
    if INTERPRET:
        code = fp8_bits(y, MANT_BITS, EXP_BIAS, SUBNORMAL_SCALE, MIN_NORMAL, NAN_CODE)
        return code.to(tl.uint8).to(DST, bitcast=True)
    else:
        return y.to(DST, fp_downcast_rounding="rtne")


@triton.jit
def fp8_to_fp32(c, MANT_BITS: tl.constexpr, SPECIAL_MASK: tl.constexpr, HAS_INF: tl.constexpr,
                INTERPRET: tl.constexpr):
    """Decode fp8 codes to fp32, NaN and Inf included.

    The interpreter's decode is right for finite codes but turns NaN/Inf codes into large finite
    numbers; there the special codes are patched back, so a poisoned cache still reads as NaN.
    ``SPECIAL_MASK`` holds the bits that are all ones in every special code (0x7F for e4m3fn, whose
    only special codes are NaN; 0x7C for e5m2, the exponent field). ``HAS_INF`` is set for e5m2,
    where a zero mantissa means Inf rather than NaN.
    """
    x = c.to(tl.float32)
    if INTERPRET:
        bits = c.to(tl.uint8, bitcast=True).to(tl.int32)
        special = (bits & SPECIAL_MASK) == SPECIAL_MASK
        if HAS_INF:
            is_inf = special & ((bits & ((1 << MANT_BITS) - 1)) == 0)
            inf = tl.where((bits & 0x80) != 0, float("-inf"), float("inf"))
            x = tl.where(is_inf, inf, tl.where(special, float("nan"), x))
        else:
            x = tl.where(special, float("nan"), x)
    return x


def fp8_to_bf16_asm(mant_bits: int, exp_bias: int) -> str:
    """PTX that turns four packed fp8 codes into four bf16 values (two b32 registers), exactly.

    The code's exponent and mantissa bits are moved into bf16's field positions (sign to bit 15):
    read as bf16 that is the code's value times ``2**-(127 - exp_bias)`` (an fp8 subnormal lands on
    a bf16 subnormal, as both formats place their smallest exponent the same way relative to the
    bias). One packed bf16 multiply by ``2**(127 - exp_bias)`` then gives the exact value as a normal
    bf16.

    Why the permute sign-extends: a byte permute can copy the selected byte's sign bit into a
    whole byte, so each 16-bit lane becomes the code as a signed 16-bit integer (``0xFFcc`` or
    ``0x00cc``). Shifted left by ``7 - mant_bits``, the lane's top bit is the sign and the code's
    low 7 bits sit on bf16's exponent and mantissa fields; one mask clears the copies of the sign
    in between (and what the low lane shifted into the high one). That is 4 instructions per pair
    of codes: permute, shift, mask, multiply. Placing the code in the high byte instead and moving
    its sign and its other bits apart takes two masks and an ``or``, 5 per pair (the compiler
    cannot fold two different masks into one logic op), and in a decode kernel that streams fp8
    codes these instructions, not memory, are the largest part of the work per tile.
    """
    shift = 7 - mant_bits  # code bit 0 -> bf16 bit 7 - mant_bits (the lowest copied mantissa bit)
    mask = (0x8000 | (0x7F << shift)) * 0x10001  # the sign, and the code's exponent and mantissa
    rebias = ((127 + 127 - exp_bias) << 7) * 0x10001  # bf16 2**(127 - exp_bias) in both halves
    half = (
        "shl.b32 {x}, {x}, {shift};\n"
        "and.b32 {x}, {x}, {mask};\n"
        "mul.rn.bf16x2 {out}, {x}, s;\n"
    )
    return (
        "{\n.reg .b32 a, b, s;\n"
        f"mov.b32 s, {rebias:#x};\n"
        "prmt.b32 a, $2, 0, 0x9180;\n"  # codes 0, 1, each sign-extended to 16 bits
        "prmt.b32 b, $2, 0, 0xB3A2;\n"  # codes 2, 3
        + half.format(x="a", out="$0", shift=shift, mask=f"{mask:#x}")
        + half.format(x="b", out="$1", shift=shift, mask=f"{mask:#x}")
        + "}"
    )


@triton.jit
def fp8_to_bf16(c, DECODE_ASM: tl.constexpr, SPECIAL_MASK: tl.constexpr, HAS_INF: tl.constexpr,
                MANT_BITS: tl.constexpr, KEEP_SPECIALS: tl.constexpr):
    """fp8 codes → bf16 in compiled mode, by bit moves (:func:`fp8_to_bf16_asm`).

    Why not ``c.to(tl.bfloat16)``: on sm90 Triton converts e4m3 → f16 → bf16, 1.5 conversion
    instructions per element, and conversions issue at a fraction of the rate of logic and packed
    bf16 arithmetic. In a decode kernel that streams fp8 codes that conversion, not memory, would
    set the speed.

    The bit moves read NaN/Inf codes as large finite numbers. ``KEEP_SPECIALS`` restores them
    (two more ops per element, which the attention kernel does not pay; see its docstring).
    """
    x = tl.inline_asm_elementwise(DECODE_ASM, "=r,=r,r", [c.to(tl.uint8, bitcast=True)],
                                  dtype=tl.bfloat16, is_pure=True, pack=4)
    if KEEP_SPECIALS:
        b = c.to(tl.uint8, bitcast=True)
        special = (b & SPECIAL_MASK) == SPECIAL_MASK
        if HAS_INF:
            is_inf = special & ((b & ((1 << MANT_BITS) - 1)) == 0)
            inf = tl.where((b & 0x80) != 0, float("-inf"), float("inf"))
            x = tl.where(is_inf, inf, tl.where(special, float("nan"), x))
        else:
            x = tl.where(special, float("nan"), x)
    return x.to(tl.bfloat16)  # the ±Inf constants above promote to fp32; the values are bf16-exact


@triton.jit
def round_to_dot_dtype(x, DOT_DTYPE: tl.constexpr, INTERPRET: tl.constexpr):
    """fp32 values → the operand dtype of a ``tl.dot``.

    Compiled: a real cast (bf16/fp16 feed the tensor cores). Interpreter: the values are rounded to
    ``DOT_DTYPE`` exactly as the GPU would, but stay in fp32, because the interpreter's bf16 ``tl.dot``
    multiplies bit patterns. Both modes then multiply identical numbers, accumulating in fp32.
    """
    if INTERPRET:
        if DOT_DTYPE.is_bf16():
            return (_bf16_bits_rne(x) << 16).to(tl.float32, bitcast=True)
        elif DOT_DTYPE.is_fp16():
            return x.to(tl.float16).to(tl.float32)
        else:
            return x
    else:
        return x.to(DOT_DTYPE)
