"""Seconds, not blocks: the step-time model.

* :class:`StepTimeModel` — a scheduler step's time on a GPU as a roofline of weight GEMMs,
  attention prefill (FLOPs), attention decode (KV bytes read, per scheme), cache write and a fixed
  overhead; :class:`StepTime` is its breakdown;
* :class:`Efficiencies` — the efficiency of each part: kernels fitted to ``benchmarks/results/``
  (:mod:`~kvlab.timing.kernel_fit`), GEMMs and overhead as stated assumptions; all editable;
* :class:`ModelCosts` — weights, attention shapes and KV bytes per token on one GPU;
* :func:`estimate_kv_cache_memory` — KV memory left on a GPU after weights and activations.
"""

from kvlab.timing.efficiency import DEFAULT_TABLE, Efficiencies, PureRooflineWarning
from kvlab.timing.kernel_fit import (
    KernelEfficiency,
    fit_kernel_csv,
    read_efficiency_table,
    write_efficiency_table,
)
from kvlab.timing.memory_budget import estimate_kv_cache_memory
from kvlab.timing.model_costs import LayerGroupCost, ModelCosts
from kvlab.timing.step_model import StepTime, StepTimeModel

__all__ = [
    "DEFAULT_TABLE",
    "Efficiencies",
    "KernelEfficiency",
    "LayerGroupCost",
    "ModelCosts",
    "PureRooflineWarning",
    "StepTime",
    "StepTimeModel",
    "estimate_kv_cache_memory",
    "fit_kernel_csv",
    "read_efficiency_table",
    "write_efficiency_table",
]
