"""int8 codes → bf16 for the attention dots in fewer instructions than a cast, exactly.

**What a cast costs.** Compiled for sm_90, Triton 3.6 turns ``int8 → bf16`` into a magic-number
sequence per pair of codes: one byte permute (``0x43`` above each code: the bf16 number ``128 + c``
for the low 7 bits), two ``and`` (the low 7 bits, and the sign bit on its own: 128 or 256) and one
packed subtraction, i.e. 8 instructions per 4 codes. bf16 keeps 7 mantissa bits, so an 8-bit code
cannot sit in one binade: the sign bit needs the second mask.

**The subnormal trick.** The one place where a bf16 exponent step does not change the spacing is
the boundary between subnormals and the first normal binade: the 16-bit pattern ``0x00uu`` is the
number ``u · 2**-133`` for *every* byte ``u`` (0..255), subnormal below 128 and normal above. So,
per 4 codes: one ``xor`` with ``0x80808080`` (the offset code ``u = c + 128``), two byte permutes
(``0x00uu`` in each 16-bit half) and two packed ``fma``: ``u · 2**-133 · 2**127 − 2 = (u − 128) / 64
= c / 64``, exact (a product by a power of two, and a difference that bf16 holds exactly). 5
instructions per 4 codes instead of 8. The result is the code divided by :data:`CODE_DIVISOR`; the
kernel puts the 64 back where it costs nothing in the loop (the softmax scale for K, the output
scale for V; both exact, powers of two).

Example: code −3 → byte ``0xFD`` → ``u = 0x7D`` = 125 → ``125 · 2**-6 − 2 = −0.046875 = −3 / 64``.

The interpreter cannot run inline PTX; there :func:`int8_to_bf16_over_64` divides the fp32 value
(exact), so the kernel's scale bookkeeping is exercised on the CPU as well.
"""

from __future__ import annotations

from kvlab.kernels.runtime import tl, triton

#: the codes come out of :func:`int8_to_bf16_over_64` divided by this (a power of two)
CODE_DIVISOR = 64

#: four int8 codes ($2, one b32) → c/64 as four bf16 (two b32: codes 0, 1 in $0, codes 2, 3 in $1)
INT8_TO_BF16_OVER_64_ASM = "\n".join([
    "{",
    ".reg .b32 u, a, b, m, z;",
    "xor.b32 u, $2, 0x80808080;",  # u = c + 128 in every byte
    "prmt.b32 a, u, 0, 0x4140;",  # 0x00uu 0x00uu: bytes 0, 1 in the low byte of each half
    "prmt.b32 b, u, 0, 0x4342;",  # bytes 2, 3
    "mov.b32 m, 0x7F007F00;",  # bf16 2**127 in both halves
    "mov.b32 z, 0xC000C000;",  # bf16 -2.0
    "fma.rn.bf16x2 $0, a, m, z;",
    "fma.rn.bf16x2 $1, b, m, z;",
    "}",
])
_ASM: tl.constexpr = tl.constexpr(INT8_TO_BF16_OVER_64_ASM)


@triton.jit
def int8_to_bf16_over_64(c, INTERPRET: tl.constexpr):
    """int8 codes → ``code / 64`` in bf16, exact (see the module docstring)."""
    if INTERPRET:
        return c.to(tl.float32) * (1.0 / 64.0)
    else:
        return tl.inline_asm_elementwise(_ASM, "=r,=r,r", [c], dtype=tl.bfloat16, is_pure=True, pack=4)


def int8_parts_by_trick(decode_only: bool, num_splits: int, tile_n: int,
                        values: bool | None = None) -> tuple[bool, bool]:
    """Whether the keys and the values of an int8 cache are converted by the trick (else Triton's cast).

    Keys always. Values only in a decode that is not split into segments, or whose tiles hold at
    most 64 keys: compiled for sm_90 under the kernel's 128-register cap, split programs over
    128-key tiles spill with the values converted by the trick (136 bytes of stack per thread
    instead of 40, 34 local loads per tile instead of 10) and ran 7–22% slower on an H100 (B=16 at
    8K and 32K, B=1 at 32K tokens), where the keys alone add no spill; prefill converts its values in
    another layout and spills more with them too. ``values`` (``True``/``False``) overrides the rule.
    """
    if values is None:
        values = decode_only and (num_splits == 1 or tile_n <= 64)
    return True, values
