"""Auto-checked exercises: the learner writes a small piece, runs one check, and is told precisely
what is wrong.

Every check takes the learner's function (or kernel, or class), runs it on fresh random cases and
on named edge cases, compares each answer with kvlab's own implementation and returns a
:class:`CheckResult`:

* ``passed`` — True when every case agreed;
* ``message`` — on success what was verified (``✓ quantize_int8: 200 random cases + 7 edge cases
  passed — ...``); on failure the first failing case with its inputs, the expected and the received
  value, and a hint when the mistake is a known one. Exceptions raised by the learner's code are
  reported the same way, never as a traceback.

A result prints as text and renders as a coloured box in a notebook. Every check accepts
``seed=`` (the report of a failure names the seed, so the same cases can be replayed).

========  ===================================  ================================================
exercise  check                                what the learner writes
========  ===================================  ================================================
1         :func:`check_bytes_per_token`        bytes per token of a model, scales included
1         :func:`check_kv_capacity`            blocks in the pool and maximum concurrency
2         :func:`check_quantize_int8`          per-token-head INT8 codes and scales
3         :func:`check_rounding_comparison`    error of truncation versus round-to-nearest
4         :func:`check_int8_scores_kernel`     a Triton kernel: scores straight from int8 keys
5         :func:`check_slot_mapping`           slots of new tokens from a block table
6         :func:`check_block_pool`             a block pool class: null block, queue, ref counts
7         :func:`check_remove_skipped_blocks`  nulling and freeing blocks that left the window
8         :func:`check_admission_need`         blocks the admission gate charges one group
9         :func:`check_stalling_config`        a configuration that stalls the uncapped gate
10        :func:`check_decode_bytes`           bytes one decode call must move
10        :func:`check_decode_speedup`         the roofline speed-up over a bf16 cache
11        :func:`check_cache_metrics`          perplexity, agreement and KL of a quantized cache
12        :func:`check_decode_step_time`       a decode step's time from the roofline
13        :func:`check_quantize_key_block`     KIVI keys of one block, per channel, packed
========  ===================================  ================================================

:data:`kvlab.exercises.catalogue.EXERCISES` lists the notebooks, what each checks and the lesson it
follows.

The shared machinery — cases, the runner, comparisons and value descriptions — lives in
:mod:`kvlab.exercises.runner`, :mod:`kvlab.exercises.compare` and :mod:`kvlab.exercises.report`.
"""

from kvlab.exercises.admission import check_admission_need
from kvlab.exercises.block_pool import check_block_pool
from kvlab.exercises.capacity import check_bytes_per_token, check_kv_capacity
from kvlab.exercises.lm_metrics import check_cache_metrics
from kvlab.exercises.lowbit_keys import check_quantize_key_block
from kvlab.exercises.quantization import check_quantize_int8, check_rounding_comparison
from kvlab.exercises.result import CheckResult
from kvlab.exercises.roofline import check_decode_bytes, check_decode_speedup
from kvlab.exercises.score_kernel import check_int8_scores_kernel
from kvlab.exercises.sliding_window import check_remove_skipped_blocks
from kvlab.exercises.slot_mapping import check_slot_mapping
from kvlab.exercises.stall import check_stalling_config
from kvlab.exercises.step_time import check_decode_step_time

__all__ = [
    "CheckResult",
    "check_admission_need",
    "check_block_pool",
    "check_bytes_per_token",
    "check_cache_metrics",
    "check_decode_bytes",
    "check_decode_speedup",
    "check_decode_step_time",
    "check_int8_scores_kernel",
    "check_kv_capacity",
    "check_quantize_key_block",
    "check_quantize_int8",
    "check_remove_skipped_blocks",
    "check_rounding_comparison",
    "check_slot_mapping",
    "check_stalling_config",
]
