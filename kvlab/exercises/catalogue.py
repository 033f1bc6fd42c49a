"""The list of exercises: where each one lives, what it checks and which lesson it follows.

Exercise ``n`` is the notebook ``notebooks/exercises/<slug>.py``; its solution is
``notebooks/solutions/<slug>.py``. Each names the functions the learner writes and the check that
verifies each one (a function of :mod:`kvlab.exercises`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    """One exercise notebook.

    Attributes:
        number: 1, 2, …; the order the teacher's guide suggests.
        slug: file name (without ``.py``) in ``notebooks/exercises`` and ``notebooks/solutions``.
        title: one line.
        concept: what the checks verify, in one sentence.
        lesson: the lesson notebook it follows (``notebooks/<lesson>.py``).
        checks: ``(learner_name, check_name)`` pairs, in the order they appear in the notebook.
    """

    number: int
    slug: str
    title: str
    concept: str
    lesson: str
    checks: tuple[tuple[str, str], ...]


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        1, "ex01_bytes_and_capacity", "Bytes per token and the capacity of a real model",
        "K, V and per-token-head scale bytes over all layers; blocks in the pool and maximum concurrency",
        "01_memory_and_capacity",
        (("bytes_per_token", "check_bytes_per_token"), ("kv_capacity", "check_kv_capacity")),
    ),
    Exercise(
        2, "ex02_int8_per_token_head", "Per-token-head INT8 quantization",
        "scales max(max|x|/127, 1e-6) per head vector and round-half-even codes, bit-exact",
        "02_quantization_error", (("quantize_int8", "check_quantize_int8"),),
    ),
    Exercise(
        3, "ex03_truncation_vs_nearest", "Truncation versus round-to-nearest",
        "measuring the round-trip error of both int8 roundings and how many codes they disagree on",
        "02_quantization_error", (("compare_roundings", "check_rounding_comparison"),),
    ),
    Exercise(
        4, "ex04_fused_dequant_scores", "Dequantize inside the attention score (Triton)",
        "a Triton kernel applying per-token key scales after the int8 dot product, with GQA head mapping",
        "03_paged_attention_kernels", (("int8_scores_kernel", "check_int8_scores_kernel"),),
    ),
    Exercise(
        5, "ex05_slot_mapping", "From a block table to a slot mapping",
        "the physical slot of each new token from positions, block tables and the block size",
        "03_paged_attention_kernels", (("slot_mapping", "check_slot_mapping"),),
    ),
    Exercise(
        6, "ex06_block_pool", "A block pool with reference counts",
        "null block, free-queue order (head out, tail in) and reference counts after every operation",
        "04_block_allocator_and_prefix_caching", (("TinyBlockPool", "check_block_pool"),),
    ),
    Exercise(
        7, "ex07_remove_skipped_blocks", "Freeing the blocks that left the window",
        "which blocks a sliding-window group nulls and frees, and in which order",
        "05_sliding_windows_and_admission", (("remove_skipped_blocks", "check_remove_skipped_blocks"),),
    ),
    Exercise(
        8, "ex08_admission_need", "What the admission gate asks for",
        "blocks charged per group by the uncapped gate and by vLLM's capped gate",
        "05_sliding_windows_and_admission", (("admission_need", "check_admission_need"),),
    ),
    Exercise(
        9, "ex09_stall_the_gate", "Make the uncapped gate stall",
        "a configuration the startup accepts, the uncapped gate stalls on and the capped gate serves",
        "05_sliding_windows_and_admission", (("stalling_config", "check_stalling_config"),),
    ),
    Exercise(
        10, "ex10_decode_roofline", "Predict the decode speed-up of an INT8 cache",
        "bytes a decode call must move (cache, scales, query, output, block table) and their ratio",
        "03_paged_attention_kernels",
        (("decode_bytes", "check_decode_bytes"), ("predicted_decode_speedup", "check_decode_speedup")),
    ),
    Exercise(
        11, "ex11_cache_metrics", "Did the cache change the answer? Perplexity, agreement and KL",
        "perplexity, top-1 agreement and KL(baseline ‖ quantized) from two caches' next-token logits",
        "07_does_it_change_the_answer", (("cache_metrics", "check_cache_metrics"),),
    ),
    Exercise(
        12, "ex12_decode_step_time", "Predict a decode step's time from the roofline",
        "weight GEMMs (compute or bandwidth bound), K/V reads with sliding windows and the cache write",
        "06_serving_what_if", (("decode_step_ms", "check_decode_step_time"),),
    ),
    Exercise(
        13, "ex13_kivi_key_block", "Quantize a block of keys per channel (KIVI, a kvlab scheme)",
        "fp16 scale and zero point per (head, channel) over a block's tokens, and packed 2/4-bit codes",
        "02_quantization_error", (("quantize_key_block", "check_quantize_key_block"),),
    ),
)


def get_exercise(number: int) -> Exercise:
    """The exercise with this number."""
    for exercise in EXERCISES:
        if exercise.number == number:
            return exercise
    raise ValueError(f"no exercise {number!r}; exercises are {', '.join(str(e.number) for e in EXERCISES)}")
