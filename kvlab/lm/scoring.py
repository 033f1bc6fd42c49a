"""Teacher-forced scoring of a text under several KV caches at once, position by position.

All caches run the same chunked prefill in lockstep, one
:meth:`~kvlab.lm.forward.LlamaModel.forward_lockstep` per chunk: for every chunk of ``chunk_size``
tokens the baseline (unquantized) cache's next-token distribution is computed, then each variant's,
and the per-position numbers are kept — never the whole ``[tokens, vocab]`` distributions, which would
need 0.4 GB per 2,048 tokens. For position ``t`` (predicting token ``t + 1``):

* ``nll``: ``−log p(x_{t+1})`` under the variant; perplexity is ``exp(mean nll)``;
* ``agree``: the variant's argmax equals the baseline's (teacher-forced top-1 agreement);
* ``kl``: ``KL(p_baseline ‖ p_variant) = Σ_v p_b(v) (log p_b(v) − log p_variant(v))`` in nats.

Variants that store identical codes (``fp8`` and ``fp8_e4m3``) are computed once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kvlab.lm.forward import LlamaModel
from kvlab.lm.inputs import require_fits_context, require_window
from kvlab.lm.kv_state import ModelKVCache
from kvlab.lm.variants import BASELINE_SCHEME, CacheVariant
from kvlab.validation import require_positive_int

#: positions whose next-token distributions are held at once (each ``[rows, vocab]`` fp32 is 12.6 MB
#: for SmolLM2's 49,152 tokens; a whole 256-token chunk per scheme lifted peak RSS past 1.5 GB)
_METRIC_ROWS = 64


@dataclass(frozen=True)
class PositionScores:
    """Per-position teacher-forced results of one cache variant (tensors of length ``tokens − 1``)."""

    variant: CacheVariant
    nll: torch.Tensor
    argmax: torch.Tensor
    agree: torch.Tensor
    kl: torch.Tensor
    saturated: int = 0

    @property
    def num_predictions(self) -> int:
        """Positions scored (tokens − 1)."""
        return int(self.nll.numel())

    @property
    def perplexity(self) -> float:
        """``exp`` of the mean negative log-likelihood."""
        return float(torch.exp(self.nll.double().mean()))

    @property
    def top1_agreement(self) -> float:
        """Fraction of positions whose argmax equals the baseline cache's."""
        return float(self.agree.double().mean())

    @property
    def mean_kl(self) -> float:
        """Mean KL divergence from the baseline's next-token distribution, nats."""
        return float(self.kl.double().mean())


def next_token_metrics(base_logprobs: torch.Tensor, logprobs: torch.Tensor, targets: torch.Tensor,
                       base_probs: torch.Tensor | None = None, base_top: torch.Tensor | None = None,
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-position ``(nll, argmax, agree, kl)`` of one cache against the baseline.

    Args:
        base_logprobs, logprobs: ``[positions, vocab]`` log-softmax of the baseline and of the cache.
        targets: ``[positions]`` the tokens that actually come next.
        base_probs, base_top: ``exp(base_logprobs)`` and its argmax, when the caller already has them
            (they are the same for every cache compared with one baseline).

    Returns:
        ``nll = −logprobs[t, target_t]``, ``argmax`` of ``logprobs``, ``agree`` (argmax equal to the
        baseline's) and ``kl = Σ_v exp(base) · (base − logprobs)`` (nats), each ``[positions]``.
    """
    top = logprobs.argmax(-1)
    base_probs = base_logprobs.exp() if base_probs is None else base_probs
    base_top = base_logprobs.argmax(-1) if base_top is None else base_top
    kl = (base_logprobs - logprobs).mul_(base_probs).sum(-1)  # one [positions, vocab] temporary
    nll = -logprobs.gather(1, targets[:, None]).squeeze(1)
    return nll, top, top == base_top, kl


def _variant_cache(model: LlamaModel, variant: CacheVariant, num_tokens: int,
                   block_size: int) -> ModelKVCache:
    return ModelKVCache(model.config, variant.scheme, max_tokens=num_tokens, block_size=block_size,
                        rounding=variant.rounding, model_dtype=model.dtype, device=model.device,
                        use_kernel=model.device.type == "cuda")


@torch.no_grad()
def score_tokens(
    model: LlamaModel,
    token_ids: Sequence[int],
    variants: Sequence[CacheVariant],
    *,
    chunk_size: int = 256,
    block_size: int = 16,
    sliding_window: int | None = None,
    backend: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, PositionScores]:
    """Score ``token_ids`` teacher-forced under the baseline cache and every variant.

    Args:
        model: a loaded model (:func:`kvlab.lm.load_model`).
        token_ids: the text's tokens (at least 2, at most the model's context).
        variants: caches to compare; the baseline (``auto``) is always scored and returned first.
        chunk_size: prefill chunk, tokens (also bounds memory).
        block_size: tokens per cache block.
        sliding_window: attend to the last ``W`` tokens only (a what-if for this model).
        backend: ``kvlab.attention`` backend (default: Triton on a GPU, float32 PyTorch on a CPU).
        progress: called with ``(tokens done, tokens total)`` after every chunk.

    Returns:
        ``{variant label: PositionScores}``, the baseline's label ``"auto"`` first.
    """
    n = len(token_ids)
    if n < 2:
        raise ValueError(f"scoring needs at least 2 tokens, got {n}")
    require_fits_context(n, model.config.context_length)
    require_positive_int(chunk_size, "chunk_size")
    require_window(sliding_window)
    baseline = CacheVariant(BASELINE_SCHEME)
    runs: dict[tuple, CacheVariant] = {baseline.computation_key(model.dtype): baseline}
    for v in variants:
        runs.setdefault(v.computation_key(model.dtype), v)
    caches = {key: _variant_cache(model, v, n, block_size) for key, v in runs.items()}
    seqs = {key: c.add_sequence() for key, c in caches.items()}
    parts: dict[tuple, list[tuple[torch.Tensor, ...]]] = {key: [] for key in runs}
    ids = torch.tensor(list(token_ids), dtype=torch.long)
    base_key = next(iter(runs))
    keys = list(runs)
    for lo in range(0, n, chunk_size):
        hi = min(n, lo + chunk_size)
        targets = ids[lo + 1 : hi + 1].to(model.device)  # the last position of the text has no target
        batches = [caches[key].plan_step([seqs[key]], [hi - lo]) for key in keys]
        hidden = model.forward_lockstep(ids[lo:hi], [caches[key] for key in keys], batches, backend=backend,
                                        sliding_window=sliding_window)
        for r in range(0, targets.numel(), _METRIC_ROWS):  # bounded [rows, vocab] temporaries
            rows = slice(r, min(r + _METRIC_ROWS, targets.numel()))
            base = None
            for key, h in zip(keys, hidden, strict=True):
                lp = torch.log_softmax(model.logits(h[rows]), dim=-1)
                if base is None:
                    base = (lp, lp.exp(), lp.argmax(-1))
                metrics = next_token_metrics(base[0], lp, targets[rows], *base[1:])
                parts[key].append(tuple(t.cpu() for t in metrics))
                del lp
            del base
        del hidden
        if progress:
            progress(hi, n)

    def collect(key: tuple, variant: CacheVariant) -> PositionScores:
        nll, top, agree, kl = (torch.cat(col) for col in zip(*parts[key], strict=True))
        return PositionScores(variant, nll, top, agree, kl, caches[key].saturated)

    out = {baseline.label: collect(base_key, baseline)}
    for v in variants:
        out.setdefault(v.label, collect(v.computation_key(model.dtype), v))
    return out
