"""Compile the paged-attention kernel for an H100 (sm_90) on a machine without a GPU, and report what
the compiler made of it: registers and stack per thread (spills), shared memory, and a few PTX counts.

    PYTHONPATH=. python benchmarks/compile_offline.py [scheme ...] [--loops] [--int8-cast | --int8-values=0|1]

For each scheme it compiles the launch shapes the benchmark times (B=1 and B=64 at L=32768, B=1 at
L=1024 and 8192, the 2,048-token prefill chunk over 8,192), with the tiling ``choose_tiling`` picks for them.
``--loops`` adds, per case, the instructions of each loop body of the SASS (per warp and key tile: the
backward branch's target to the branch) and their commonest opcodes; ``--int8-cast`` compiles int8
with Triton's own cast instead of :mod:`kvlab.kernels.int8_decode`, ``--int8-values=0|1`` overrides
its rule for the values (round 7's counts). The numbers quoted in ``kernel_notes.md`` (for example,
the int8 decode step spilling 400 bytes per thread under its register cap when V was loaded next to
K) come from this script. It costs no device time: Triton's own ``ptxas`` and ``cuobjdump`` do the
work on the CPU.

How: kvlab picks compiled Triton only where CUDA is available, so the script tells
it CUDA is there before importing it, builds each call on CPU tensors (the tensors only give dtypes
and strides; nothing runs), and hands the kernel with the call's arguments to ``triton.compile`` for
``GPUTarget("cuda", 90, 32)``, with the 16-byte divisibility hints the launcher would give.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tempfile

import torch

torch.cuda.is_available = lambda: True  # choose compiled Triton (nothing is launched)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import kvlab.kernels.attention as attention  # noqa: E402
import kvlab.kernels.attention_checks as attention_checks  # noqa: E402
from kvlab.cache import build_paged_example  # noqa: E402
from kvlab.kernels.launch_config import choose_tiling  # noqa: E402

attention_checks.require_kernel_device = lambda **tensors: None  # CPU tensors stand in for CUDA ones
attention.multiprocessor_count = lambda index: 132  # an H100 SXM

_TRITON_TYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.int8: "i8",
                 torch.int32: "i32", torch.int64: "i64", torch.float8_e4m3fn: "fp8e4nv",
                 torch.float8_e5m2: "fp8e5"}
_ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "int8_per_token_head": 1, "fp8_per_token_head": 1,
                  "fp8_e4m3": 1, "fp8_e5m2": 1}
#: (sequences, tokens per sequence, new tokens per sequence) of the benchmark's cases
CASES = ((1, 32768, 1), (64, 32768, 1), (1, 1024, 1), (1, 8192, 1), (1, 8192, 2048))


def compile_sm90(fn, args: tuple, consts: dict, num_warps: int, num_stages: int, maxnreg: int | None):
    """``triton.compile`` of ``fn`` for sm_90 with the launcher's argument types and hints."""
    signature, constexprs, attrs = {}, dict(consts), {}
    for i, (name, value) in enumerate(zip(fn.arg_names[:len(args)], args, strict=True)):
        if isinstance(value, torch.Tensor):
            signature[name] = "*" + _TRITON_TYPES[value.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, bool):
            signature[name] = "i1"
        elif isinstance(value, int):
            if value == 1:  # the launcher specialises 1 into a constant
                signature[name], constexprs[name] = "constexpr", 1
                continue
            signature[name] = "i32"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "fp32"
    signature.update({name: "constexpr" for name in consts})
    options = dict(num_warps=num_warps, num_stages=num_stages)
    if maxnreg:
        options["maxnreg"] = maxnreg
    return triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)


def _cuobjdump(cubin: bytes, flag: str) -> str:
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([os.path.join(tools, "cuobjdump"), flag, f.name], capture_output=True,
                              text=True, check=True).stdout


def loop_bodies(cubin: bytes, top: int = 8) -> list[str]:
    """One line per loop of the SASS: its instruction count (target of a backward ``BRA`` to the
    branch) and its ``top`` commonest opcodes (predicates and modifiers dropped)."""
    sass = _cuobjdump(cubin, "-sass").splitlines()
    lines = [(int(m.group(1), 16), m.group(2).strip())
             for m in (re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", x) for x in sass) if m]
    index = {addr: i for i, (addr, _) in enumerate(lines)}
    out = []
    for i, (addr, ins) in enumerate(lines):
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < addr and int(m.group(1), 16) in index:
            body = [x for _, x in lines[index[int(m.group(1), 16)]:i + 1]]
            ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", x).split(" ")[0].split(".")[0]
                                      for x in body)
            mix = " ".join(f"{op} {n}" for op, n in ops.most_common(top))
            out.append(f"    loop of {len(body)} instructions: {mix}, LDL {ops['LDL']}, STL {ops['STL']}")
    return out


def resource_usage(cubin: bytes) -> tuple[int, int]:
    """(registers, stack bytes) per thread, read by Triton's bundled ``cuobjdump``."""
    text = _cuobjdump(cubin, "--dump-resource-usage")
    return int(re.search(r"REG:(\d+)", text).group(1)), int(re.search(r"STACK:(\d+)", text).group(1))


def report(scheme: str, batch: int, length: int, new: int, loops: bool = False, **options) -> str:
    """Compile one benchmark case of one scheme; one line of what the compiler made of it."""
    tiling = choose_tiling(group=4, head_size=128, head_size_v=128, kv_element_bytes=_ELEMENT_BYTES[scheme],
                           max_query_len=new, max_seq_len=length, num_tokens=batch * new, num_seqs=batch,
                           num_kv_heads=8, num_sms=132)
    # a small example of the same kind (decode or prefill): its tensors give dtypes and strides
    ex = build_paged_example([new if new == 1 else 64], [300], num_q_heads=32, num_kv_heads=8, head_size=128,
                             scheme=scheme)
    call = attention.prepare_paged_attention(ex.query, ex.cache, ex.batch, tiling=tiling, **options)
    t = call.tiling
    launch = call._launch
    kernel = compile_sm90(attention.paged_attention_kernel, launch.args, launch.kernel_consts(), t.num_warps,
                          t.num_stages, t.max_registers)
    regs, stack = resource_usage(kernel.asm["cubin"])
    ptx = kernel.asm["ptx"]
    return (f"{scheme:20s} B={batch:<3} L={length:<6} new={new:<5} tile={t.tile_n:<4} rows={t.block_m:<4} "
            f"warps={t.num_warps} stages={t.num_stages} splits={t.num_splits:<3} cap={t.max_registers} | "
            f"regs={regs} stack={stack} shared={kernel.metadata.shared} cp.async={ptx.count('cp.async.cg')} "
            f"ld.global={ptx.count('ld.global')} wgmma={ptx.count('wgmma.mma_async')}"
            + "".join("\n" + x for x in (loop_bodies(kernel.asm["cubin"]) if loops else [])))


def _options(flags: list[str]) -> dict:
    """``prepare_paged_attention`` options from the command line's int8 flags."""
    options: dict = {}
    for flag in flags:
        if flag == "--int8-cast":
            options["int8_fast_decode"] = False
        elif flag.startswith("--int8-values="):
            options["int8_fast_values"] = flag.split("=", 1)[1] == "1"
        elif flag != "--loops":
            raise SystemExit(f"unknown option {flag}; allowed: --loops, --int8-cast, --int8-values=0|1")
    return options


if __name__ == "__main__":
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    for scheme in [a for a in sys.argv[1:] if not a.startswith("--")] or list(_ELEMENT_BYTES):
        for case in CASES:
            print(report(scheme, *case, loops="--loops" in flags, **_options(flags)), flush=True)
