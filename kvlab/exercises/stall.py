"""Check for exercise 9: build a configuration on which the uncapped admission gate stalls forever.

The learner writes ``stalling_config(model) -> (EngineConfig, prompt_tokens)``. For every model of the
check (real hybrid models and random ones with sliding-window layers), kvlab must find that

1. vLLM's startup accepts the configuration (:func:`kvlab.serving.capacity` does not raise) and the
   prompt fits ``max_model_len``;
2. served alone under the ``"uncapped"`` gate, the request stalls: the simulator reports that the
   head of the queue can never be admitted;
3. served under the ``"vllm"`` gate (sliding-window groups capped), the same request finishes.

So the stall comes from the gate alone, not from a pool too small for the request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kvlab.exercises.capacity import model_summary
from kvlab.exercises.learner_check import check_learner
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    call_learner,
    choice,
    randint,
    random_cases,
)
from kvlab.models import LayerKV, ModelKV, get_model
from kvlab.serving import EngineConfig, capacity, simulate
from kvlab.simulator import make_request

#: Tokens the request generates once its prompt is in.
OUTPUT_TOKENS = 4
#: A run of the check stops after this many scheduler steps.
MAX_STEPS = 5000
#: Real models with sliding-window layers.
HYBRID_PRESETS = ("gemma-3-27b", "gemma-4-31b", "gpt-oss-20b", "mistral-7b-v0.1")


def _random_hybrid_model(gen: torch.Generator) -> dict[str, Any]:
    """Sliding-window layers (one window) mixed with full-attention layers, or sliding layers only."""
    window = choice(gen, (128, 512, 1024, 4096, randint(gen, 64, 4096)))
    heads, head = choice(gen, (1, 2, 4, 8, 16)), choice(gen, (64, 128, 256))
    period = randint(gen, 1, 6)  # every period-th layer is full attention; 1 = sliding only
    count = randint(gen, 2, 48)
    layers = tuple(
        LayerKV(f"layers.{i}", "full", heads, head) if period > 1 and i % period == period - 1
        else LayerKV(f"layers.{i}", "sliding_window", heads, head, sliding_window=window)
        for i in range(count)
    )
    return {"model": ModelKV(f"random hybrid ({count} layers)", layers, max_position_embeddings=131072)}


def _cases(num_random: int, seed: int) -> list[Case]:
    cases = [Case(name, {"model": get_model(name)}, edge=True) for name in HYBRID_PRESETS]
    cases += random_cases(num_random, seed, _random_hybrid_model)
    return [Case(c.label, c.args, c.edge, shown={"model": model_summary(c.args["model"])}) for c in cases]


def _run(config: EngineConfig, prompt_tokens: int, policy: str):
    return simulate(config.replace(policy=policy), [make_request("r0", prompt_tokens, OUTPUT_TOKENS)],
                    max_steps=MAX_STEPS, detail="counts")


def _trial(stalling_config: Callable[[ModelKV], Any]) -> Callable[[Case], str | None]:
    def trial(case: Case) -> str | None:
        model = case.args["model"]
        got = call_learner(stalling_config, model)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            return f"return a tuple (EngineConfig, prompt_tokens); got {type(got).__name__}"
        config, prompt = got
        if not isinstance(config, EngineConfig):
            return f"the first item must be a kvlab.serving.EngineConfig, got {type(config).__name__}"
        if config.model_kv != model:
            return f"the configuration serves {config.model_kv.name!r}, not the model passed in"
        if isinstance(prompt, bool) or not isinstance(prompt, int) or prompt < 1:
            return f"prompt_tokens must be an integer >= 1, got {prompt!r}"
        try:
            plan = capacity(config.replace(policy="uncapped"))
        except (ValueError, NotImplementedError) as error:
            return f"expected vLLM's startup to accept the configuration, got: {error}"
        if prompt > plan.max_model_len:
            return (f"expected prompt_tokens <= max_model_len = {plan.max_model_len}, got {prompt} (the "
                    "request would be rejected, not stalled)")
        facts = (f"pool: {plan.num_blocks - 1} usable blocks; one max-length request needs "
                 f"{plan.blocks_per_max_request} blocks at its peak")
        try:
            uncapped, capped = _run(config, prompt, "uncapped"), _run(config, prompt, "vllm")
        except Exception as error:  # the learner's configuration made the simulator give up
            return f"the simulator could not serve this configuration ({type(error).__name__}: {error})"
        if uncapped.summary.stalled is None:
            need = uncapped.timeline[0].attempts[0].need if uncapped.timeline[0].attempts else "?"
            return (f"expected a stall under the uncapped gate, got the request served (it asked {need} "
                    f"blocks)\n"
                    f"{facts}\nhint: the uncapped gate charges every group cdiv(N, B) blocks; make that sum "
                    "exceed the pool while the sizer still accepts the configuration")
        if capped.summary.step_cap_reached:
            return (f"expected the request to finish under the vllm gate within {MAX_STEPS} steps, got a run "
                    "still going: use a larger max_num_batched_tokens or a shorter prompt")
        if capped.summary.finished != 1:
            why = capped.summary.stalled.reason if capped.summary.stalled else "it did not finish"
            return (f"expected the request to finish under the vllm gate, got: {why}. The pool itself is too "
                    f"small, so the stall is not the gate's fault\n{facts}")
        return None

    return trial


def check_stalling_config(
    stalling_config: Callable[[ModelKV], tuple[EngineConfig, int]],
    *,
    seed: int | None = None,
    num_random: int = 8,
) -> CheckResult:
    """Check ``stalling_config(model) -> (EngineConfig, prompt_tokens)`` on real and random hybrid
    models: the startup accepts the configuration, the uncapped gate stalls on the request, and the
    vLLM-capped gate serves it (see the module docstring)."""
    return check_learner(
        stalling_config, "stalling_config", "check_stalling_config", seed=seed,
        cases=lambda s: _cases(num_random, s), trial=_trial,
        verified="each configuration starts, stalls the uncapped gate and is served by the vllm gate",
    )
