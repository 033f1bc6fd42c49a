"""Admission budgets of the full-sequence gate, one small class per policy (see
:mod:`kvlab.admission.policies`): ``uncapped``, ``window_plus_chunk``, ``vllm``, ``trtllm``, ``exact``.

A policy maps (group, request length) to the blocks the gate charges that group; select one by
name with :func:`get_policy`, or pass your own :class:`AdmissionPolicy` subclass.
"""

from kvlab.admission.policies import (
    POLICIES,
    POLICY_NAMES,
    AdmissionPolicy,
    ExactPolicy,
    GroupBudget,
    TrtllmPolicy,
    UncappedPolicy,
    VllmCapPolicy,
    WindowPlusChunkPolicy,
    get_policy,
    peak_window_blocks,
)

__all__ = [
    "POLICIES",
    "POLICY_NAMES",
    "AdmissionPolicy",
    "ExactPolicy",
    "GroupBudget",
    "TrtllmPolicy",
    "UncappedPolicy",
    "VllmCapPolicy",
    "WindowPlusChunkPolicy",
    "get_policy",
    "peak_window_blocks",
]
