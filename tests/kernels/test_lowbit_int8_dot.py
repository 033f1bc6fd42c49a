"""int4_per_token_head attention on int8 tensor-core dots (``int8_dots=True``).

* The PTX that makes ``16 · (code − 8)`` bytes, executed on the CPU instruction by instruction, against
  the reference unpacker (``kvlab.quantization.lowbit.unpack_codes``).
* The rounding of fp32 to int8 (an added magic number, no conversion instruction) against
  hand-computed values, ties to even, and against ``torch.round``.
* Attention against the float64 references: on the dequantized cache within the 16-bit kernel's own
  tolerance plus what rounding the query and ``p · v_scale`` to int8 per row adds, twice the RMS of
  rounding to a step of ``4.5 σ / 127`` for each of the two (the same reasoning as the scheme
  tolerances: the largest of a row of N(0, 1) numbers is about 4.5 σ); against the unquantized K/V
  the scheme's own error is added as in ``test_lowbit_kernels``.
Outputs start as NaN.
"""

from __future__ import annotations

import math

import pytest
import torch

import kvlab
from kvlab import build_paged_example, relative_error
from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention
from kvlab.kernels.lowbit_int8_dot import int8_codes
from kvlab.kernels.lowbit_unpack_asm import times16_int8_asm
from kvlab.kernels.runtime import tl, triton
from kvlab.quantization.lowbit import unpack_codes
from kvlab.reference import reference_attention

from .conftest import poisoned
from .ptx_model import run_ptx
from .test_lowbit_kernels import _tolerances

SCHEME = "int4_per_token_head"
#: RMS of rounding to a step of 4.5 σ / 127, in units of σ: one row rounded to int8
INT8_ROUNDING = 4.5 / 127 / math.sqrt(12.0)


def _signed_bytes(word: int) -> list[int]:
    return [b - 256 if b > 127 else b for b in word.to_bytes(4, "little")]


def test_times16_int8_asm_gives_sixteen_times_code_minus_eight(gen):
    assert _signed_bytes(run_ptx(times16_int8_asm(1), [0xA3], outputs=1)[0])[0] == 32  # docstring case
    words = torch.randint(0, 2**32, (64,), generator=gen, dtype=torch.int64).tolist() + [0, 0xFFFFFFFF]
    for part in (0, 1):
        asm = times16_int8_asm(part)
        for w in words:
            codes = unpack_codes(torch.tensor(list(w.to_bytes(4, "little")), dtype=torch.uint8), 4)
            want = [16 * (int(c) - 8) for c in codes.view(4, 2)[:, part]]
            assert _signed_bytes(run_ptx(asm, [w], outputs=1)[0]) == want, f"word {w:#010x}, part {part}"
    with pytest.raises(ValueError, match="part 0 or 1"):
        times16_int8_asm(2)


@triton.jit
def _round_kernel(x_ptr, inv_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, int8_codes(tl.load(x_ptr + i), tl.load(inv_ptr + i)))


def _round(target, x: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    out = torch.full(x.shape, 99, dtype=torch.int8, device=target.device)
    _round_kernel[(1,)](x.to(target.device), inv.to(target.device), out, N=x.numel())
    return out.cpu()


def test_int8_codes_round_to_nearest_even(target, gen):
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.7, -127.4, 3.4999, -0.0, 63.5, -64.5, 1.0, 7.0,
                      0.25, -100.5], dtype=torch.float32)
    inv = torch.ones_like(x)
    inv[12:14] = torch.tensor([100.0, 0.0625])  # 1.0 · 100 = 100; 7 · 1/16 = 0.4375 → 0
    want = torch.tensor([0, 2, 2, 0, -2, -2, 127, -127, 3, 0, 64, -64, 100, 0, 0, -100], dtype=torch.int8)
    assert torch.equal(_round(target, x, inv), want)
    y = (torch.rand(256, generator=gen) - 0.5) * 254.0
    s = torch.rand(256, generator=gen) + 0.5
    r = _round(target, y / s, s)
    assert torch.equal(r, torch.round((y / s) * s).to(torch.int8))


def _check_int8(target, ex, **opts):
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], ex.cache.head_size_v), q.dtype, target.device)
    call = prepare_lowbit_attention(q, ex.cache, ex.batch, out=out, int8_dots=True, **opts)
    assert call.run() is out and torch.isfinite(out).all(), "outputs left unwritten or poisoned"
    ref_opts = {k: v for k, v in opts.items() if k in ("sliding_window", "softcap")}
    k_tol, t_tol = _tolerances(SCHEME, q.dtype)
    extra = 2 * 2 * INT8_ROUNDING
    assert relative_error(out, kvlab.attention(q, ex.cache, ex.batch, **ref_opts)) <= k_tol + extra
    truth = reference_attention(q, ex.keys, ex.values, ex.batch, **ref_opts)
    assert relative_error(out, truth) <= t_tol + extra
    return out


def _example(target, seed, qlens, slens, *, hq=8, hkv=2, d=64, block=16, **kw):
    return build_paged_example(qlens, slens, num_q_heads=hq, num_kv_heads=hkv, head_size=d, scheme=SCHEME,
                               block_size=block, seed=seed, device=target.device, **kw)


def test_decode_batch_with_partial_blocks_and_a_zero_query_row(target, seed):
    """GQA 4:1, partial last blocks, one sequence of a single token; one query row all zeros (its
    int8 scale is 0, so all its scores are 0: uniform attention, as in the reference)."""
    slens = [1, 16, 1000, 4097, 300] if target.large else [1, 16, 37, 50]
    ex = _example(target, seed, [1] * len(slens), slens, d=128 if target.large else 64)
    ex.query[1, 2] = 0.0
    _check_int8(target, ex)


@pytest.mark.parametrize("splits", [1, 3])
def test_mixed_prefill_and_split_k(target, seed, splits):
    slens = [300, 2000, 40] if target.large else [60, 45, 17]
    qlens = [1, 1, 1] if splits > 1 else [1, 7, 17]
    _check_int8(target, _example(target, seed, qlens, slens), num_splits=splits)


@pytest.mark.parametrize("tile, warps, cap", [(128, 4, 128), (64, 2, None), (128, 8, None), (32, 4, None)])
def test_launch_shapes(target, seed, tile, warps, cap):
    """The full-grid launch (4 warps, 128-key tiles: warp-group products on a Hopper GPU), the split
    grids' 2 warps (warp-level products), 8 warps, and the smallest tile int8 products allow."""
    slens = [4097, 1000, 129, 16] if target.large else [70, 33, 17, 16]
    ex = _example(target, seed, [1] * 4, slens, hq=32, hkv=8, d=128)
    _check_int8(target, ex, tile_n=tile, num_warps=warps, max_registers=cap, num_splits=1)


def test_sliding_window_softcap_and_fp16_query_in_blocks_of_32(target, seed):
    slens = [3000, 40] if target.large else [60, 40]
    ex = _example(target, seed, [1, 1], slens, block=32, query_dtype=torch.float16, kv_dtype=torch.float16)
    _check_int8(target, ex, sliding_window=19, softcap=30.0)


def test_fp32_query_and_the_scheme_check(target, seed):
    """An fp32 query is rounded to int8 like a 16-bit one; a KIVI cache is refused, by name."""
    ex = _example(target, seed, [1, 1], [70, 33], query_dtype=torch.float32, kv_dtype=torch.float32)
    _check_int8(target, ex)
    kivi = build_paged_example([1], [40], num_q_heads=8, num_kv_heads=2, head_size=64, scheme="kivi2",
                               seed=seed, device=target.device)
    with pytest.raises(ValueError, match="int8_dots must be True or False, got 'yes'"):
        prepare_lowbit_attention(ex.query, ex.cache, ex.batch, int8_dots="yes")
    with pytest.raises(ValueError, match="int8_dots applies to int4_per_token_head caches only, not kivi2"):
        prepare_lowbit_attention(kivi.query, kivi.cache, kivi.batch, int8_dots=True)
    if target.large:  # the interpreter takes any tile
        with pytest.raises(ValueError, match="at least 32 keys"):
            prepare_lowbit_attention(ex.query, ex.cache, ex.batch, int8_dots=True, tile_n=16)
