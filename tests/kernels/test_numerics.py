"""The conversions of ``kvlab.kernels.numerics`` against torch, bit for bit, in both Triton modes.

In the interpreter these checks prove the workarounds for its broken casts; on a GPU they prove that
the compiled path (hardware casts, the fp8 → bf16 bit moves) is exact too. The probe values cover
what breaks conversions: ties (exact midpoints), mantissa carries into the exponent, subnormals,
the largest finite values, signed zeros, Inf and NaN.
"""

from __future__ import annotations

import pytest
import torch

from kvlab.kernels.dtypes import fp8_constexprs, fp8_to_bf16_asm_for
from kvlab.kernels.numerics import (
    fp8_to_bf16,
    fp8_to_fp32,
    round_half_even,
    round_to_dot_dtype,
    to_bf16,
    to_fp8,
    to_fp32,
)
from kvlab.kernels.runtime import INTERPRET, tl, triton

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
_BLOCK = 1024


@triton.jit
def _convert_kernel(x_ptr, y_ptr, n, OP: tl.constexpr, DST: tl.constexpr,
                    MANT_BITS: tl.constexpr, EXP_BIAS: tl.constexpr, SUBNORMAL_SCALE: tl.constexpr,
                    MIN_NORMAL: tl.constexpr, NAN_CODE: tl.constexpr, SPECIAL_MASK: tl.constexpr,
                    HAS_INF: tl.constexpr, DECODE_ASM: tl.constexpr, INTERPRET_: tl.constexpr,
                    BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if OP == 0:
        y = to_bf16(x, INTERPRET_)
    elif OP == 1:
        y = to_fp32(x, INTERPRET_)
    elif OP == 2:
        y = to_fp8(x, DST, MANT_BITS, EXP_BIAS, SUBNORMAL_SCALE, MIN_NORMAL, NAN_CODE, INTERPRET_)
    elif OP == 3:
        y = fp8_to_fp32(x, MANT_BITS, SPECIAL_MASK, HAS_INF, INTERPRET_)
    elif OP == 4:
        y = round_half_even(x)
    elif OP == 5:
        y = round_to_dot_dtype(x, DST, INTERPRET_)
    elif OP == 6:
        y = fp8_to_bf16(x, DECODE_ASM, SPECIAL_MASK, HAS_INF, MANT_BITS, True)
    elif OP == 7:
        y = x.to(DST)  # Triton's own cast, no workaround (to show what the interpreter gets wrong)
    else:
        y = x.to(tl.float32)
    tl.store(y_ptr + offs, y, mask=m)


def _run(op: int, x: torch.Tensor, out_dtype: torch.dtype, dst=tl.float32, fmt=None, interpret=INTERPRET):
    y = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    consts = fp8_constexprs(fmt if fmt is not None else torch.float32)
    asm = fp8_to_bf16_asm_for(fmt) if fmt is not None else ""
    _convert_kernel[(triton.cdiv(x.numel(), _BLOCK),)](
        x, y, x.numel(), OP=op, DST=dst, DECODE_ASM=asm, INTERPRET_=interpret, BLOCK=_BLOCK, **consts
    )
    return y


def _bits(t: torch.Tensor) -> torch.Tensor:
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    return t.contiguous().view(view)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit patterns, except that any NaN equals any NaN (payloads are not specified)."""
    nan = torch.isnan(a.float()) & torch.isnan(b.float())
    return bool(((_bits(a) == _bits(b)) | nan).all())


def _fp8_probe_values(fmt: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Every representable value, the midpoints between neighbours (ties), ±1 fp32 ulp around them,
    the largest finite value, signed zeros and random values over the whole range."""
    fmax = torch.finfo(fmt).max
    codes = torch.arange(256, dtype=torch.uint8).view(fmt).float()
    vals = torch.unique(codes[torch.isfinite(codes)])
    mids = (vals[1:] + vals[:-1]) / 2
    ulp_up = torch.nextafter(mids, torch.full_like(mids, float("inf")))
    ulp_down = torch.nextafter(mids, torch.full_like(mids, float("-inf")))
    exponents = torch.randint(-20, 10, (4000,), generator=gen).float()
    rand = torch.randn(4000, generator=gen) * torch.exp2(exponents)
    extra = torch.tensor([1.964, 100.0, 104.0, -0.0, 0.0, fmax, -fmax, 2.0**-12, -(2.0**-11), 3 * 2.0**-10])
    out = torch.cat([vals, mids, ulp_up, ulp_down, rand, extra])
    return out.clamp(-fmax, fmax)


@pytest.mark.parametrize("fmt", FP8, ids=["e4m3", "e5m2"])
def test_fp8_encoding_matches_torch(target, fmt, gen):
    x = _fp8_probe_values(fmt, gen).to(target.device)
    got = _run(2, x, fmt, dst=tl.float8e4nv if fmt == torch.float8_e4m3fn else tl.float8e5, fmt=fmt)
    want = x.to(fmt)
    bad = (_bits(got) != _bits(want)).nonzero().flatten()
    assert bad.numel() == 0, f"{bad.numel()} codes differ, e.g. x={x[bad[:5]].tolist()}"


@pytest.mark.parametrize("fmt", FP8, ids=["e4m3", "e5m2"])
def test_fp8_decoding_of_all_256_codes_matches_torch(target, fmt):
    codes = torch.arange(256, dtype=torch.uint8, device=target.device).view(fmt)
    want = codes.float()
    assert _same_bits(_run(3, codes, torch.float32, fmt=fmt), want)
    if not INTERPRET:  # the inline-PTX decoder exists in compiled mode only
        got = _run(6, codes, torch.bfloat16, fmt=fmt)
        assert _same_bits(got, want.to(torch.bfloat16))


#: what the bit moves read a special code as: its fields taken as a finite number of the format
#: (e4m3 0x7F: exponent 15, mantissa 7 -> 2**8 * 1.875; e5m2 exponent 31 -> 2**16 * (1 + m/4))
_SPECIALS_READ_AS = {torch.float8_e4m3fn: {0x7F: 480.0},
                     torch.float8_e5m2: {0x7C: 65536.0, 0x7D: 81920.0, 0x7E: 98304.0, 0x7F: 114688.0}}


@pytest.mark.parametrize("fmt", FP8, ids=["e4m3", "e5m2"])
def test_fp8_to_bf16_ptx_on_all_256_codes(fmt):
    """The PTX string itself, run by the model of :mod:`ptx_model` on every code (no GPU needed):
    finite codes give torch's value exactly, special codes the finite numbers their fields spell."""
    from .ptx_model import output_halves, run_ptx

    asm = fp8_to_bf16_asm_for(fmt)
    codes = torch.arange(256, dtype=torch.uint8)
    got = []
    for w in range(64):
        word = int.from_bytes(codes[4 * w:4 * w + 4].numpy().tobytes(), "little")
        got += output_halves(run_ptx(asm, [word]), torch.bfloat16)
    want = codes.view(fmt).double()
    for code, value in _SPECIALS_READ_AS[fmt].items():
        assert not torch.isfinite(want[code]) and not torch.isfinite(want[code | 0x80])
        want[code], want[code | 0x80] = value, -value
    assert torch.isfinite(want).all()
    assert got == want.tolist()


def _bf16_probe_values(gen: torch.Generator) -> torch.Tensor:
    exponents = torch.randint(-130, 120, (4000,), generator=gen).float()
    rand = torch.randn(4000, generator=gen) * torch.exp2(exponents)
    b = torch.randn(1000, generator=gen).to(torch.bfloat16).float()
    ties = b + torch.ldexp(torch.ones_like(b), torch.frexp(b).exponent - 9)  # halfway to the next bf16
    extra = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 0.0, 3.3895314e38, 1e-40, -1e-45])
    return torch.cat([rand, ties, extra])


def test_fp32_to_bf16_rounds_to_nearest_even(target, gen):
    x = _bf16_probe_values(gen).to(target.device)
    assert _same_bits(_run(0, x, torch.bfloat16), x.to(torch.bfloat16))


def test_bf16_to_fp32_is_exact_for_subnormals_too(target, gen):
    x = _bf16_probe_values(gen).to(torch.bfloat16).to(target.device)
    assert _same_bits(_run(1, x, torch.float32), x.float())


def test_round_half_even_matches_torch_round(target, gen):
    x = torch.cat([torch.randn(2000, generator=gen) * 60, torch.arange(-128, 128) + 0.5,
                   torch.arange(-128, 128).float(), torch.tensor([-0.5, 0.5, 1.5, -2.5, 126.5, -127.5])])
    x = x.to(target.device)
    assert torch.equal(_run(4, x, torch.float32), torch.round(x))


@pytest.mark.parametrize("dot", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_round_to_dot_dtype_matches_a_torch_round_trip(target, dot, gen):
    x = torch.rand(4000, generator=gen).to(target.device) * 0.01  # probabilities times a V scale
    want = x.to(dot)
    dst = tl.bfloat16 if dot == torch.bfloat16 else tl.float16
    got = _run(5, x, torch.float32 if INTERPRET else dot, dst=dst)
    assert _same_bits(got.to(dot), want)


# -- the interpreter's own casts: why the workarounds exist ---------------------------------------------


@pytest.mark.interpreter
@pytest.mark.skipif(not INTERPRET, reason="probes Triton's interpreter")
def test_interpreter_casts_are_still_wrong_without_the_workarounds(gen):
    """If this fails, Triton fixed its interpreter and the matching workaround may be retired."""
    x = torch.tensor([1.964, 100.0, 2.0**-8, 2.0**-9 * 3])
    raw = _run(7, x, torch.float8_e4m3fn, dst=tl.float8e4nv)
    assert not _same_bits(raw, x.to(torch.float8_e4m3fn)), "fp32 -> e4m3 now rounds correctly"
    b = torch.randn(1000, generator=gen)
    raw_bf16 = _run(7, b, torch.bfloat16, dst=tl.bfloat16)
    assert not _same_bits(raw_bf16, b.to(torch.bfloat16)), "fp32 -> bf16 now rounds to nearest"
    nan_code = torch.tensor([0x7F], dtype=torch.uint8).view(torch.float8_e4m3fn)
    assert not torch.isnan(_run(8, nan_code, torch.float32)).any(), "e4m3 NaN now decodes to NaN"
