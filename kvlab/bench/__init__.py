"""``kvlab bench``: how fast kvlab's Triton kernels run on a GPU, and how close to the hardware.

Every row of the result says how many bytes the work must move at the least (K, V and scales read
once, query read once, output written once, block table read once), how long it took (median of
CUDA-graph replays), the GB/s that makes, and what fraction that is of the device's own copy
bandwidth, measured in the same run. Accuracy comes with it: the relative error against float64
attention on the unquantized K/V.

* :mod:`kvlab.bench.config`: what to run (:class:`BenchConfig`);
* :mod:`kvlab.bench.traffic`: the byte counts;
* :mod:`kvlab.bench.measure`: timing, the copy-bandwidth and matrix-rate ceilings;
* :mod:`kvlab.bench.context`: the run's facts and how a row gets its three baselines;
* :mod:`kvlab.bench.workloads`: K/V, caches and batches on the GPU;
* :mod:`kvlab.bench.sdpa`: torch SDPA, default dispatch and flash forced, on the same shapes;
* :mod:`kvlab.bench.attention_cases`, :mod:`kvlab.bench.write_case`: one case each;
* :mod:`kvlab.bench.runner`, :mod:`kvlab.bench.sweeps`: whole runs and tuning sweeps;
* :mod:`kvlab.bench.results`: rows, the CSV (columns documented there) and the table.
"""

from kvlab.bench.config import BenchConfig
from kvlab.bench.results import CSV_COLUMNS, BenchRow, read_csv, write_csv

__all__ = ["CSV_COLUMNS", "BenchConfig", "BenchRow", "read_csv", "write_csv"]
