"""Benchmark rows, the CSV they are saved as, and the table printed at the end of a run.

CSV columns (stable: notebooks plot these files on machines without a GPU):

============== =====================================================================================
column         meaning
============== =====================================================================================
scheme         kv-cache dtype (``sdpa`` rows: ``bfloat16``, the dense K/V they read)
batch          sequences (``write`` rows: tokens written)
context        tokens per sequence, new ones included (``write`` rows: 0)
kind           ``decode``, ``prefill``, ``write`` or ``sdpa`` (torch SDPA on contiguous bf16 K/V)
query_len      new tokens per sequence (1 for decode)
median_us      median time of one call, µs (CUDA-graph replays, inputs rotated past the L2)
bytes          bytes the call must move at the least (see :mod:`kvlab.bench.traffic`)
gbps           ``bytes / median_us`` in GB/s (10⁹ bytes per second)
pct_copy_bw    ``gbps`` as a percentage of ``copy_bw_gbps``
rel_err_truth  ‖out − truth‖ / ‖truth‖ against float64 attention on the unquantized K/V (``write``:
               dequantized cache rows against the input rows)
device         GPU name
copy_bw_gbps   device-to-device copy bandwidth measured in the same run (read + written bytes)
num_splits     split-K segments (1 = none; empty for non-kvlab rows)
tile_n         keys per loop step of the kernel (``write`` rows: (token, KV head) rows per program)
num_warps      warps per program
num_stages     software-pipelining depth
max_registers  register cap per thread given to the compiler (empty: none)
tflops         achieved TFLOP/s of QKᵀ and PV (attention rows)
bit_exact      ``write`` rows: codes and scales equal the reference writer's (True/False)
floor_us       physical floor of the row, µs: the larger of ``bytes / copy_bw_gbps`` and
               ``flops / peak_tflops`` (what no kernel on this device beats by much)
pct_floor      ``100 × floor_us / median_us`` (100 = at the floor)
sdpa_default_us   torch SDPA on the same shape (contiguous bf16 K/V, GQA without copies for
               decode), backend left to torch's default dispatch, timed in the same run, µs
sdpa_default_backend  the backend that default dispatch ran (``cudnn_attention``, ``flash_attention``...)
sdpa_flash_us  the same with the flash backend forced (empty where flash refuses the shape), µs
x_sdpa_default ``median_us / sdpa_default_us``: < 1 means faster than SDPA's default dispatch
x_sdpa_flash   ``median_us / sdpa_flash_us``: < 1 means faster than SDPA with flash forced
peak_tflops    bf16 matrix-product rate measured in the same run (cuBLAS, 8192³), TFLOP/s
backend        ``kvlab-triton``, ``kvlab-triton-sweep`` (``-castdecode``: Triton's own fp8 conversion;
               ``-shortfirst``: a prefill launched in query order), ``torch-sdpa-default-<backend>``
               or ``torch-sdpa-flash``
triton, torch  versions
============== =====================================================================================
"""

from __future__ import annotations

import csv
import dataclasses
import os
from dataclasses import dataclass


@dataclass
class BenchRow:
    """One measured case; fields are the CSV columns (see the module docstring)."""

    scheme: str
    batch: int
    context: int
    kind: str
    query_len: int
    median_us: float
    bytes: int
    gbps: float
    pct_copy_bw: float
    rel_err_truth: float
    device: str
    copy_bw_gbps: float
    num_splits: int | None = None
    tile_n: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    max_registers: int | None = None
    tflops: float | None = None
    bit_exact: bool | None = None
    floor_us: float | None = None
    pct_floor: float | None = None
    sdpa_default_us: float | None = None
    sdpa_default_backend: str = ""
    sdpa_flash_us: float | None = None
    x_sdpa_default: float | None = None
    x_sdpa_flash: float | None = None
    peak_tflops: float | None = None
    backend: str = "kvlab-triton"
    triton: str = ""
    torch: str = ""


CSV_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(BenchRow))


def write_csv(rows: list[BenchRow], path: str) -> None:
    """Write rows to ``path`` (parent folders created), one header line then one line per row."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in dataclasses.asdict(r).items()})


def write_dict_rows(rows: list[dict], path: str) -> None:
    """Write rows that are plain dictionaries (a comparison script's own columns, the first row's keys
    in order) to ``path``, parent folders created: the A/B scripts under ``benchmarks/``."""
    if not rows:
        raise ValueError(f"no rows to write to {path}: the comparison measured nothing")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def read_csv(path: str) -> list[dict[str, str]]:
    """The rows of a benchmark CSV as dictionaries of strings (no GPU or Triton needed)."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def format_table(rows: list[BenchRow]) -> str:
    """A fixed-width text table of the rows, for the terminal."""
    head = (f"{'kind':<8}{'scheme':<21}{'B':>6}{'L':>7}{'q':>6}{'µs':>10}{'GB/s':>8}{'%copy':>7}"
            f"{'%floor':>7}{'TFLOP/s':>8}{'xSDPAdef':>9}{'xSDPAfl':>8}{'rel.err':>10}{'splits':>7}")
    lines = [head, "-" * len(head)]

    def opt(v, fmt: str) -> str:
        return "" if v is None else format(v, fmt)

    for r in rows:
        lines.append(
            f"{r.kind:<8}{r.scheme:<21}{r.batch:>6}{r.context:>7}{r.query_len:>6}{r.median_us:>10.1f}"
            f"{r.gbps:>8.0f}{r.pct_copy_bw:>7.1f}{opt(r.pct_floor, '.1f'):>7}{opt(r.tflops, '.0f'):>8}"
            f"{opt(r.x_sdpa_default, '.2f'):>9}{opt(r.x_sdpa_flash, '.2f'):>8}{r.rel_err_truth:>10.2e}"
            f"{'' if r.num_splits is None else r.num_splits:>7}"
        )
    return "\n".join(lines)
