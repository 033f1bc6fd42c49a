"""Compile the low-bit attention kernel for an H100 (sm_90) on a machine without a GPU and report what
the compiler made of it: registers and stack per thread, shared memory, and PTX counts that tell
where the time goes (conversion instructions, shared-memory traffic, tensor-core instructions).

    PYTHONPATH=. python benchmarks/lowbit_compile_offline.py [--ptx DIR] [scheme ...]

Same method as ``benchmarks/compile_offline.py`` (whose compile helpers it uses): CPU tensors give the
dtypes and strides, ``triton.compile`` targets ``GPUTarget("cuda", 90, 32)``; nothing runs. Each case
also prints its SASS loops' instruction counts and commonest opcodes (per warp and key tile).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import compile_offline  # noqa: E402  (sets compiled-Triton mode first)
import torch  # noqa: E402
from compile_offline import compile_sm90, resource_usage  # noqa: E402

import kvlab.kernels.lowbit_attention_call as call_mod  # noqa: E402
from kvlab.cache import build_paged_example  # noqa: E402
from kvlab.kernels.lowbit_attention import lowbit_attention_kernel  # noqa: E402

call_mod.multiprocessor_count = lambda index: 132  # an H100 SXM
compile_offline._TRITON_TYPES[torch.uint8] = "u8"

#: (label, new tokens) of the cases compiled by default
CASES = (("decode", 1), ("prefill", 64))
PTX_COUNTS = ("cvt.", "ld.shared", "st.shared", "ldmatrix", "cp.async", "ld.global", "mma.sync",
              "wgmma.mma_async",
              "fma.rn.f16 ", "fma.rn.f16x2", "mul.f16", "prmt", "bar.sync")


def report(scheme: str, new: int, tile: int | None, warps: int | None, stages: int | None,
           ptx_dir: str | None, maxnreg: int | None = None, step: int | None = None,
           packed_fma: bool = False, int8_dots: bool = False) -> str:
    ex = build_paged_example([new], [300], num_q_heads=32, num_kv_heads=8, head_size=128, scheme=scheme,
                             query_dtype=torch.bfloat16)
    call = call_mod.prepare_lowbit_attention(ex.query, ex.cache, ex.batch, tile_n=tile, num_warps=warps,
                                             num_stages=stages, max_registers=maxnreg,
                                             tiles_per_step=step, packed_fma=packed_fma,
                                             int8_dots=int8_dots)
    launch = call._launch
    kernel = compile_sm90(lowbit_attention_kernel, launch.args, launch.kernel_consts(), call.num_warps,
                          call.options["num_stages"], maxnreg or call.options.get("maxnreg"))
    regs, stack = resource_usage(kernel.asm["cubin"])
    ptx = kernel.asm["ptx"]
    if ptx_dir:
        stem = os.path.join(ptx_dir, f"lowbit_{scheme}_{new}_{call.tile_n}x{call.tiles_per_step}"
                                     f"{'_packed_fma' if packed_fma else ''}{'_int8' if int8_dots else ''}")
        with open(stem + ".ptx", "w") as f:
            f.write(ptx)
        with open(stem + ".cubin", "wb") as f:  # SASS: cuobjdump -sass (Triton's own copy) on this file
            f.write(kernel.asm["cubin"])
    counts = " ".join(f"{c.strip().rstrip('.')}={ptx.count(c)}" for c in PTX_COUNTS)
    return (f"{scheme:20s} new={new:<3} tile={call.tile_n:<4}x{call.tiles_per_step} rows={call.block_m:<3} "
            f"warps={call.num_warps} "
            f"stages={call.options['num_stages']} cap={call.options.get('maxnreg')} | "
            f"regs={regs} stack={stack} shared={kernel.metadata.shared} {counts}"
            + "".join("\n" + x for x in compile_offline.loop_bodies(kernel.asm["cubin"])))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ptx", help="folder to write the PTX of each case to")
    ap.add_argument("--tile", type=int, action="append", help="key tiles to compile (default: the launch's)")
    ap.add_argument("--warps", type=int)
    ap.add_argument("--stages", type=int)
    ap.add_argument("--maxnreg", type=int)
    ap.add_argument("--step", type=int, help="key tiles per loop step")
    ap.add_argument("--packed-fma", action="store_true",
                    help="KIVI's c*s + z as packed fma.rn.f16x2 (notes v7)")
    ap.add_argument("--int8", action="store_true",
                    help="int4's decode on int8 tensor-core dots (kernels.lowbit_int8_dot)")
    ap.add_argument("--new", type=int, action="append", help="new tokens per program's sequence (1 = decode)")
    ap.add_argument("schemes", nargs="*", default=["int4_per_token_head", "kivi4", "kivi2"])
    a = ap.parse_args()
    for scheme in a.schemes:
        for new in a.new or [c[1] for c in CASES]:
            for t in a.tile or [None]:
                print(report(scheme, new, t, a.warps, a.stages, a.ptx, a.maxnreg, a.step, a.packed_fma,
                             a.int8),
                      flush=True)
