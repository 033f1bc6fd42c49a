"""Admission budgets: how many blocks the full-sequence gate charges each group (spec §4).

When a waiting request is scheduled, vLLM first asks whether its *whole* known sequence would fit
(``scheduler_reserve_full_isl``). Each policy here answers one question — the absolute number of
blocks group ``g`` needs for an ``N``-token request — and the manager then subtracts what the request
already holds or hits, exactly as §3.3 does. Policies plug in like kvpress presses: a small frozen
dataclass with one method and a docstring naming its source.

============================  ==============================================================
``uncapped``                  ``cdiv(N, B)`` for every group (vLLM ≤ 0.20)
``window_plus_chunk``         SWA: ``cdiv(min(N, W + MNBT), B)`` (PR #39866, closed unmerged)
``vllm``                      SWA: ``min(cdiv(N, B), cdiv(min(W - 1 + T, L), B) + 1)`` (PR #40946)
``trtllm``                    one pool per window; first step ``cdiv(min(N, window), B)``
``exact``                     the true peak of the request's own chunk schedule (kvlab)
============================  ==============================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from kvlab.sizing.specs import GroupSpec, SlidingWindowSpec, UniformTypeSpecs, cdiv, chunk_of, window_of
from kvlab.validation import require_choice


@dataclass(frozen=True)
class GroupBudget:
    """What a policy may know about one group and the engine.

    Attributes:
        spec: the group's spec.
        max_model_len: L (tokens).
        max_num_batched_tokens: the per-step token budget (tokens).
        in_flight_tokens: T (tokens) of the profile (MNBT, or 2 × MNBT under async for [new]).
        lagged_skip: True when ``remove_skipped_blocks`` counts only processed tokens and a step is
            in flight (async scheduling under the [new] profile), so frees lag one step.
    """

    spec: GroupSpec
    max_model_len: int
    max_num_batched_tokens: int
    in_flight_tokens: int
    lagged_skip: bool = False

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def block_size(self) -> int:
        return self.spec.block_size

    @property
    def window(self) -> int | None:
        return window_of(self.spec)

    @property
    def chunk(self) -> int | None:
        return chunk_of(self.spec)

    @property
    def extra_retained_tokens(self) -> int:
        rep = self.spec.representative if isinstance(self.spec, UniformTypeSpecs) else self.spec
        return rep.extra_retained_tokens if isinstance(rep, SlidingWindowSpec) else 0


@dataclass(frozen=True)
class AdmissionPolicy:
    """Base of the policies: ``required_blocks`` is the absolute per-group need of the gate.

    Attributes:
        name: the name used by ``--policy``.
        pool_layout: ``"shared"`` (one pool for all groups, vLLM) or ``"per_window"`` (TensorRT-LLM).
    """

    name: ClassVar[str] = "base"
    pool_layout: ClassVar[str] = "shared"

    def required_blocks(self, group: GroupBudget, num_tokens: int) -> int:
        """Blocks group ``group`` must be able to hold for a ``num_tokens``-token request."""
        raise NotImplementedError


@dataclass(frozen=True)
class UncappedPolicy(AdmissionPolicy):
    """The full-sequence gate of vLLM v0.19–v0.20 (``can_fit_full_sequence``, PR #37307).

    Charges every group ``cdiv(N, B)`` blocks, although a sliding-window group never holds more than
    about ``W + chunk`` tokens: the startup sizer already assumed the small footprint, so a request
    the pool was sized for can be refused forever (issues #39133, #39734).
    """

    name: ClassVar[str] = "uncapped"

    def required_blocks(self, group: GroupBudget, num_tokens: int) -> int:
        return cdiv(num_tokens, group.block_size)


@dataclass(frozen=True)
class WindowPlusChunkPolicy(AdmissionPolicy):
    """PR #39866 (proposed 2026-04-15, closed without merging): sliding-window groups are charged
    ``cdiv(min(N, W + max_num_batched_tokens), B)``; other groups ``cdiv(N, B)``."""

    name: ClassVar[str] = "window_plus_chunk"

    def required_blocks(self, group: GroupBudget, num_tokens: int) -> int:
        if group.window is not None:
            num_tokens = min(num_tokens, group.window + group.max_num_batched_tokens)
        return cdiv(num_tokens, group.block_size)


@dataclass(frozen=True)
class VllmCapPolicy(AdmissionPolicy):
    """vLLM's merged cap (PR #40946, v0.21.0 onwards): the gate clamps each sliding-window group at
    ``cdiv(min(W - 1 + extra + T, L), B) + 1`` and each chunked-local group at
    ``cdiv(min(C + T, L), B)`` — the same function that sizes the pool. T is the profile's
    in-flight allowance (``max_num_batched_tokens``; × 2 under async scheduling since ≈ v0.26)."""

    name: ClassVar[str] = "vllm"

    def required_blocks(self, group: GroupBudget, num_tokens: int) -> int:
        required = cdiv(num_tokens, group.block_size)
        cap = group.spec.admission_cap_blocks(group.in_flight_tokens, group.max_model_len)
        return required if cap is None else min(required, cap)


@dataclass(frozen=True)
class TrtllmPolicy(AdmissionPolicy):
    """TensorRT-LLM's capacity scheduler (``capacityScheduler.cpp``, ``MAX_UTILIZATION``).

    Memory is split into one pool per window size (:mod:`kvlab.sizing.window_pools`) and a request is
    admitted when every window pool can hold its *first step*: ``getNeededBlocksOneStep`` charges a
    context request ``cdiv(min(prompt, window), B)`` blocks (the window of a full-attention layer
    is ``max_model_len``). This is the stored version of ``kvCacheManager.cpp`` whose cap is the
    window; a later one caps at ``window + max_new_tokens``.
    """

    name: ClassVar[str] = "trtllm"
    pool_layout: ClassVar[str] = "per_window"

    def required_blocks(self, group: GroupBudget, num_tokens: int) -> int:
        window = group.window if group.window is not None else group.max_model_len
        return cdiv(min(num_tokens, window), group.block_size)


@lru_cache(maxsize=4096)
def peak_window_blocks(
    num_tokens: int, chunk_tokens: int, block_size: int, skip: tuple[str, int], lagged: bool
) -> int:
    """Most blocks a windowed group holds while an ``num_tokens`` prompt is prefilled alone.

    The prompt is processed in chunks of ``chunk_tokens``. Before chunk ``k`` (starting at token
    ``c_k``) the manager frees the blocks skipped as of ``c_k`` (or ``c_{k-1}`` when frees lag one
    step), then allocates blocks up to ``c_k + n_k``; the footprint is
    ``cdiv(c_k + n_k, B) - skipped_blocks``. ``skip`` is ``("window", W)`` (skipped tokens
    ``max(0, s - W + 1)``) or ``("chunk", C)`` (``(s // C) * C``).
    """
    kind, size = skip
    if kind not in ("window", "chunk"):
        raise ValueError(f"skip must be ('window', W) or ('chunk', C), got {skip!r}")
    peak, prev, start = 0, 0, 0
    while start < num_tokens:
        n = min(chunk_tokens, num_tokens - start)
        seen = prev if lagged else start
        skipped = max(0, seen - size + 1) if kind == "window" else (seen // size) * size
        peak = max(peak, cdiv(start + n, block_size) - skipped // block_size)
        prev, start = start, start + n
    return peak


@dataclass(frozen=True)
class ExactPolicy(AdmissionPolicy):
    """kvlab's own gate: the true peak footprint of the request's chunk schedule.

    Derivation. Alone in the engine, an ``N``-token prompt is prefilled in chunks of
    ``n_k = min(MNBT, N - c_k)`` tokens starting at ``c_k = k × MNBT``. At chunk ``k`` a
    sliding-window group first frees every block wholly before token ``s - W + 1`` (``s = c_k``, or
    ``c_{k-1}`` when frees lag an in-flight step) and then holds blocks up to ``c_k + n_k``, so it
    holds ``cdiv(c_k + n_k, B) - floor(max(0, s - W + 1) / B)`` blocks; the need is the maximum over
    chunks (:func:`peak_window_blocks`). Chunked-local groups free ``(s // C) × C`` tokens instead;
    full attention needs ``cdiv(N, B)``. Writing ``s - W + 1 = qB + r`` shows the peak is
    ``cdiv(r + W - 1 + n, B)`` ≤ vLLM's ``cdiv(W - 1 + T, B) + 1``: vLLM's cap is this bound for the
    worst alignment ``r = B - 1`` and the largest possible chunk; ``exact`` uses the alignment and
    chunk the schedule really has, and never more than ``cdiv(N, B)``. If the budget is shared with
    other requests, chunk boundaries shift and the real peak can exceed this by at most one block per
    group; the per-step allocation check still protects the pool (by preemption).
    """

    name: ClassVar[str] = "exact"

    def required_blocks(self, group: GroupBudget, num_tokens: int) -> int:
        full = cdiv(num_tokens, group.block_size)
        if group.window is not None:
            skip = ("window", group.window + group.extra_retained_tokens)
        elif group.chunk is not None:
            skip = ("chunk", group.chunk)
        else:
            return full
        peak = peak_window_blocks(
            num_tokens, group.max_num_batched_tokens, group.block_size, skip, group.lagged_skip
        )
        return min(full, peak)


POLICIES: dict[str, AdmissionPolicy] = {
    p.name: p
    for p in (UncappedPolicy(), WindowPlusChunkPolicy(), VllmCapPolicy(), TrtllmPolicy(), ExactPolicy())
}

#: Policy names, in the order they are compared.
POLICY_NAMES: tuple[str, ...] = tuple(POLICIES)


def get_policy(name: str | AdmissionPolicy) -> AdmissionPolicy:
    """Return the policy called ``name`` (a policy is returned unchanged)."""
    if isinstance(name, AdmissionPolicy):
        return name
    require_choice(name, POLICY_NAMES, "policy")
    return POLICIES[name]
