"""kvlab's serving API: describe a configuration once, then ask about it.

Example::

    from kvlab.serving import EngineConfig, capacity, admission_need, simulate
    from kvlab.simulator import synthetic_workload

    cfg = EngineConfig("gemma-4-31b", kv_cache_memory="16GiB", tensor_parallel_size=2,
                       max_model_len=131072, profile="vllm-0.21")
    capacity(cfg).max_concurrency                        # requests of max_model_len at once
    admission_need(cfg, 65536, policy="uncapped").total  # blocks the gate asks for
    result = simulate(cfg, synthetic_workload(16, prompt_tokens=(2000, 8000), seed=1))
    result.summary, result.timeline[0].attempts

* :class:`EngineConfig` — vLLM's flags as a validated dataclass; it also builds the allocator
  (:meth:`EngineConfig.build_kv_cache_manager`) for hands-on use;
* :func:`capacity` → :class:`~kvlab.sizing.KVCachePlan`;
* :func:`admission_need` / :func:`compare_policies` → :class:`AdmissionNeed` per policy;
* :func:`simulate` → :class:`~kvlab.simulator.SimulationResult` (timeline, summary, stall report).
"""

from kvlab.serving.api import AdmissionNeed, GroupNeed, admission_need, capacity, compare_policies, simulate
from kvlab.serving.config import EngineConfig

__all__ = [
    "AdmissionNeed",
    "EngineConfig",
    "GroupNeed",
    "admission_need",
    "capacity",
    "compare_policies",
    "simulate",
]
