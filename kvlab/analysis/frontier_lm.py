"""The frontier's real-model column: what each KV scheme does to a real language model's predictions.

:mod:`kvlab.analysis.frontier` measures attention-output error on one layer's K/V. This module asks
the end-to-end question on kvlab's runnable model (SmolLM2-135M-Instruct, :mod:`kvlab.lm`): every
layer writes its K/V into a paged cache of the scheme and attends over it, and the text's tokens are
scored teacher-forced. Each scheme gets perplexity, top-1 agreement and mean KL against the
unquantized cache (the model's own fp32 K/V), the numbers ``kvlab quality`` prints.

A scheme that cannot store the model's heads (a KIVI value group of 128 channels on SmolLM2's
64-channel heads) gets a note instead of numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvlab.quantization import get_scheme
from kvlab.validation import require_positive_int


@dataclass(frozen=True)
class ModelQuality:
    """One scheme on the real model.

    Attributes:
        scheme: scheme name; ``model``: which model; ``tokens``: tokens scored.
        perplexity: ``exp(mean −log p(next token))`` with this cache.
        top1_agreement: fraction of positions whose argmax equals the unquantized cache's.
        mean_kl: mean KL(unquantized ‖ this cache) of the next-token distributions, nats.
        note: why the numbers are missing (NaN), else empty.
    """

    scheme: str
    model: str
    tokens: int
    perplexity: float
    top1_agreement: float
    mean_kl: float
    note: str = ""


#: The model whose predictions the column reports.
MODEL_LABEL = "SmolLM2-135M-Instruct"


def model_quality(schemes: Sequence[str], *, max_tokens: int = 512, block_size: int = 16,
                  model=None) -> dict[str, ModelQuality]:
    """Perplexity, top-1 agreement and mean KL of every scheme on the shipped prose.

    Args:
        schemes: scheme names (vLLM's and kvlab's); ``"auto"`` (the baseline) is always scored too.
        max_tokens: tokens of the shipped prose scored (the first ``max_tokens``).
        block_size: tokens per cache block (KIVI key groups are blocks).
        model: a loaded :class:`kvlab.lm.LlamaModel` (default: :func:`kvlab.lm.load_model`).

    Returns:
        ``{scheme: ModelQuality}`` in the order of ``schemes``, the baseline ``"auto"`` first.

    Raises:
        kvlab.lm.ModelFileMissing: no model file is installed (the message says how to get it).
    """
    from kvlab.lm import BASELINE_SCHEME, CacheVariant, load_model, score_tokens
    from kvlab.lm.corpus import corpus_text

    require_positive_int(max_tokens, "max_tokens", minimum=2)
    model = model or load_model()
    head = model.config.head_size
    ids = model.encode(corpus_text())[:max_tokens]
    fits, notes = [], {}
    for name in schemes:
        sch = get_scheme(name)
        try:
            if sch.mode.is_low_bit:
                sch.check_shape(head, head, block_size)
            fits.append(CacheVariant(name))
        except ValueError as err:
            notes[name] = str(err)
    scores = score_tokens(model, ids, fits, block_size=block_size)
    out = {}
    for name in (BASELINE_SCHEME, *schemes):
        if name in notes:
            nan = float("nan")
            out[name] = ModelQuality(name, MODEL_LABEL, len(ids), nan, nan, nan, notes[name])
            continue
        s = scores[CacheVariant(name).label]
        out[name] = ModelQuality(name, MODEL_LABEL, s.num_predictions + 1, s.perplexity, s.top1_agreement,
                                 s.mean_kl)
    return out
