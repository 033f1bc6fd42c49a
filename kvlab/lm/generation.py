"""Greedy generation from several prompts at once, and where two generations part ways.

All prompts share one :class:`ModelKVCache`: the first step prefills every prompt (a batch of
prefill chunks of different lengths), each later step decodes one token per prompt (a batch of
decodes), exactly the mixed batches kvlab's attention takes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from kvlab.lm.forward import LlamaModel
from kvlab.lm.inputs import require_fits_context, require_text, require_window
from kvlab.lm.kv_state import ModelKVCache
from kvlab.lm.variants import CacheVariant
from kvlab.validation import require_positive_int


@dataclass(frozen=True)
class Generation:
    """The greedy continuation of one prompt under one cache variant."""

    prompt: str
    variant: CacheVariant
    token_ids: tuple[int, ...]


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first differing token of two generations, ``None`` when they agree throughout.

    >>> first_divergence([5, 6, 7], [5, 6, 9])
    2
    """
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@contextmanager
def one_cpu_thread(device: torch.device) -> Iterator[None]:
    """Run torch's CPU operations on one thread inside the block (nothing changes on a GPU).

    A decode step of a few sequences is hundreds of small operations. With two threads each one
    waits at a barrier for the second thread to be scheduled, so on a machine busy with other work
    16 greedy tokens of 8 prompts took 51–100 s instead of 5–8 s on one thread (measured on the
    project's two-core machine at load ≈ 10); even on an idle machine the second thread gains little
    on operations this small.
    """
    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@torch.no_grad()
def generate_greedy(
    model: LlamaModel,
    prompts: Sequence[str],
    variant: CacheVariant,
    *,
    max_new_tokens: int = 32,
    sliding_window: int | None = None,
    block_size: int = 16,
    backend: str | None = None,
) -> list[Generation]:
    """Generate ``max_new_tokens`` tokens greedily (argmax) after each prompt, all prompts batched.

    Generation does not stop at end-of-text, so every variant produces the same number of tokens
    and divergences can be compared position by position.
    """
    require_positive_int(max_new_tokens, "max_new_tokens")
    require_window(sliding_window)
    if not prompts:
        raise ValueError("give at least one prompt")
    encoded = [model.encode(require_text(p, f"prompt {i}")) for i, p in enumerate(prompts)]
    for i, ids in enumerate(encoded):
        require_fits_context(len(ids) + max_new_tokens, model.config.context_length,
                             f"prompt {i} plus {max_new_tokens} new tokens")
    kv = ModelKVCache(model.config, variant.scheme, max_tokens=sum(map(len, encoded)) + len(prompts) *
                      max_new_tokens, max_sequences=len(prompts), block_size=block_size,
                      rounding=variant.rounding,
                      model_dtype=model.dtype, device=model.device, use_kernel=model.device.type == "cuda")
    with one_cpu_thread(model.device):
        return _generate(model, prompts, variant, encoded, kv, max_new_tokens, sliding_window, backend)


def _generate(model: LlamaModel, prompts: Sequence[str], variant: CacheVariant, encoded: list[list[int]],
              kv: ModelKVCache, max_new_tokens: int, sliding_window: int | None,
              backend: str | None) -> list[Generation]:
    seqs = [kv.add_sequence() for _ in prompts]
    batch = kv.plan_step(seqs, [len(ids) for ids in encoded])
    hidden = model.forward(torch.tensor([t for ids in encoded for t in ids]), kv, batch, backend=backend,
                           sliding_window=sliding_window)
    last = torch.tensor(batch.query_start_loc.tolist()[1:]) - 1
    out: list[list[int]] = [[] for _ in prompts]
    for step in range(max_new_tokens):
        nxt = model.logits(hidden[last.to(hidden.device)]).argmax(-1).cpu()
        for i, t in enumerate(nxt.tolist()):
            out[i].append(t)
        if step + 1 == max_new_tokens:
            break
        batch = kv.plan_step(seqs, [1] * len(seqs))
        hidden = model.forward(nxt, kv, batch, backend=backend, sliding_window=sliding_window)
        last = torch.arange(len(seqs))
    return [Generation(p, variant, tuple(ids)) for p, ids in zip(prompts, out, strict=True)]
