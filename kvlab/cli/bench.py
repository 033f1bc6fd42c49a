"""``kvlab bench``: time kvlab's Triton kernels on a CUDA GPU (see :mod:`kvlab.bench`).

``kvlab bench`` runs the decode grid and the prefill cases for every scheme, each row beside three
baselines measured in the same run (torch SDPA with its default dispatch, SDPA with the flash
backend forced, the physical floor), and the cache writes; it prints a table and saves
``benchmarks/results/decode_<GPU>.csv``. ``--sweep`` times candidate launch shapes beside the
automatic choice instead (tuning data, ``sweep_<GPU>.csv``).
``--interpreter`` is a tiny CPU smoke test of both kernels in Triton's interpreter.
"""

from __future__ import annotations

import argparse
import os

from kvlab.bench.config import DEFAULT_SCHEMES, BenchConfig
from kvlab.quantization.schemes import KVLAB_SCHEME_NAMES, SCHEME_NAMES, VLLM_SCHEME_NAMES

DEFAULT_OUT = os.path.join("benchmarks", "results")


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _schemes(text: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    low_bit = [s for s in names if s in KVLAB_SCHEME_NAMES]
    if low_bit:
        raise argparse.ArgumentTypeError(
            f"{', '.join(low_bit)}: kvlab low-bit scheme(s), not vLLM --kv-cache-dtype values; this "
            "benchmark times vLLM's formats, benchmarks/lowbit_bench.py times the low-bit ones")
    bad = [s for s in names if s not in SCHEME_NAMES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown scheme(s) {bad}; valid: {', '.join(VLLM_SCHEME_NAMES)}")
    return names


PARTS: tuple[str, ...] = ("decode", "prefill", "write")


def _parts(text: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in names if s not in PARTS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown part(s) {bad}; valid: {', '.join(PARTS)}")
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schemes", type=_schemes, default=DEFAULT_SCHEMES,
                   help="comma-separated kv-cache dtypes (default: each storage format once)")
    p.add_argument("--batches", type=_ints, default=(1, 16, 64), help="decode batch sizes (default 1,16,64)")
    p.add_argument("--contexts", type=_ints, default=(1024, 8192, 32768),
                   help="decode context lengths in tokens (default 1024,8192,32768)")
    p.add_argument("--parts", type=_parts, default=PARTS,
                   help="which cases to time: decode, prefill, write (default all three)")
    p.add_argument("--repeats", type=int, default=20, help="timed CUDA-graph replays per case (median)")
    p.add_argument("--no-sdpa", action="store_true", help="skip the two torch SDPA baselines")
    p.add_argument("--out", default=DEFAULT_OUT, help="folder of the CSV (default benchmarks/results)")
    p.add_argument("--sweep", action="store_true", help="time tilings and split counts instead (tuning)")
    p.add_argument("--interpreter", action="store_true",
                   help="tiny smoke test in Triton's interpreter on CPU (times are not GPU numbers)")


def run(args: argparse.Namespace) -> int:
    import torch

    from kvlab.bench.results import format_table, write_csv

    if args.interpreter:
        os.environ.setdefault("KVLAB_TRITON", "interpret")
        from kvlab.bench.runner import run_interpreter_smoke
        from kvlab.kernels import runtime

        if not runtime.INTERPRET:
            raise ValueError("--interpreter needs Triton in interpreter mode, but this process already "
                             "runs it compiled; start a new one")
        rows = run_interpreter_smoke(args.schemes)
        print(format_table(rows))
        print("(Triton interpreter on CPU: µs of emulation on this CPU, not GPU numbers)")
        return 0

    if not torch.cuda.is_available():
        raise ValueError("needs a CUDA GPU, and none is visible here; `kvlab bench --interpreter` runs a "
                         "CPU smoke test of the kernels instead")
    from kvlab.kernels import runtime

    if runtime.INTERPRET:
        raise ValueError("Triton runs in interpreter mode in this process (KVLAB_TRITON or TRITON_INTERPRET "
                         "is set); unset it to benchmark the compiled kernels")
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    parts = args.parts
    defaults = BenchConfig()
    config = BenchConfig(schemes=args.schemes, batches=args.batches if "decode" in parts else (),
                         contexts=args.contexts, repeats=args.repeats, sdpa=not args.no_sdpa,
                         prefill=defaults.prefill if "prefill" in parts else (),
                         write_tokens=defaults.write_tokens if "write" in parts else ())
    from kvlab.bench.context import csv_name, gpu_context
    from kvlab.bench.runner import run_gpu_benchmark, run_sweep

    ctx = gpu_context()
    print(f"{ctx.device}: device-to-device copy {ctx.copy_bw_gbps:.0f} GB/s (read + written bytes)")
    path = os.path.join(args.out, csv_name(ctx.device, "sweep" if args.sweep else "decode"))

    def save(rows_so_far) -> None:  # the CSV grows row by row: a run cut short keeps what it measured
        write_csv(rows_so_far, path)

    if args.sweep:
        from kvlab.bench.sweeps import default_sweep
        from kvlab.kernels.devices import multiprocessor_count

        sweep = default_sweep(config, multiprocessor_count(torch.cuda.current_device()))
        rows = run_sweep(config, sweep, ctx, on_row=save)
    else:
        rows = run_gpu_benchmark(config, ctx, on_row=save)
    write_csv(rows, path)
    print(format_table(rows))
    print(f"saved {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="time the Triton kernels on a CUDA GPU (decode grid, prefill, write)")
    add_arguments(p)
    p.set_defaults(func=run)
