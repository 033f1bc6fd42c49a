"""Host side of the folded-scale KIVI decode kernel (:mod:`kvlab.kernels.kivi_folded_decode`): which
calls it serves, its rows per stack, and its arguments, derived from the low-bit kernel's launch
(:mod:`kvlab.kernels.lowbit_attention_call`), whose checks, launch shape and workspace it shares."""

from __future__ import annotations

import torch

from kvlab.kernels.dtypes import triton_dtype
from kvlab.kernels.kivi_folded_decode import kivi_folded_decode_kernel
from kvlab.kernels.launch_config import next_pow2
from kvlab.kernels.lowbit_unpack_asm import unpack_asm

#: the low-bit kernel's constexprs the folded kernel takes as they are
_SHARED_CONSTS = ("NUM_KV_HEADS", "GROUP", "D", "DP_PAD", "DV", "DVP_PAD", "BITS", "P", "G", "RES_BLOCKS",
                  "BLOCK_SIZE", "TILE_N", "OUT_DTYPE", "USE_WINDOW", "USE_SOFTCAP", "SPLIT_K", "INTERPRET_",
                  "STEP_TILES")


def serves(kivi: bool, query_lens: list[int]) -> bool:
    """Whether the folded kernel can run a call: a KIVI cache and a decode batch (one new token per
    sequence)."""
    return kivi and len(query_lens) > 0 and all(q == 1 for q in query_lens)


def stack_rows(group: int, tile_n: int, block_size: int, dvp_pad: int, codes_per_byte: int,
               group_size: int) -> int:
    """Rows ``R`` per stacked copy: the query heads of one KV head (``group``), padded to a power of
    two so that both stacks, ``tile_n / block_size`` key-scale copies and ``NG`` value-group copies,
    have at least the 16 rows a tensor-core dot computes."""
    blocks = tile_n // block_size
    groups = dvp_pad * codes_per_byte // group_size
    return max(next_pow2(group), -(-16 // blocks), -(-16 // groups))


def folded_launch(args: tuple, consts: dict, query: torch.Tensor, bits: int, fast_unpack: bool,
                  interpret: bool) -> tuple:
    """``(kernel, args, consts)`` of the folded kernel from the low-bit kernel's ``args`` and
    ``consts`` (its program lists are dropped: program ``i`` serves sequence ``i``)."""
    dot = torch.bfloat16 if query.dtype != torch.float32 else torch.float32
    asm = [""] * 4
    if fast_unpack and not interpret and dot == torch.bfloat16:
        asm[:consts["P"]] = [unpack_asm(bits, k, dot, 0) for k in range(consts["P"])]
    folded = {name: consts[name] for name in _SHARED_CONSTS}
    folded.update(
        R=stack_rows(consts["GROUP"], consts["TILE_N"], consts["BLOCK_SIZE"], consts["DVP_PAD"], consts["P"],
                     consts["G"]),
        DOT_DTYPE=triton_dtype(dot), DOT_PRECISION="ieee" if dot == torch.float32 else "tf32",
        ASM0=asm[0], ASM1=asm[1], ASM2=asm[2], ASM3=asm[3])
    return kivi_folded_decode_kernel, args[:16] + args[18:], folded
