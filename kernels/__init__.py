"""Triton kernels of kvlab (installed as ``kvlab.kernels``).

Importing this package decides how Triton runs (:mod:`kvlab.kernels.runtime`): compiled on an NVIDIA
GPU, otherwise in Triton's interpreter on CPU tensors. Each kernel is one lesson file:

* :mod:`kvlab.kernels.cache_write`: quantize new K/V and store them at their slots
  (:func:`write_kv_cache`);
* :mod:`kvlab.kernels.attention`: causal paged attention for mixed prefill/decode batches
  (:func:`paged_attention`), with GQA, sliding window, softcap and split-K; the kernel itself is in
  :mod:`kvlab.kernels.attention_kernel`, its step over one key tile in
  :mod:`kvlab.kernels.attention_tile`, the checks it shares with the low-bit kernel in
  :mod:`kvlab.kernels.attention_checks`;
* :mod:`kvlab.kernels.dequantized_prefill`: prefill over an 8-bit cache that converts each block once
  into a 16-bit scratch (:mod:`kvlab.kernels.dequantized_scratch`, shared with the low-bit schemes'
  :mod:`kvlab.kernels.lowbit_prefill`) and runs the 16-bit kernel over it; ``prepare_paged_attention``
  picks it by a measured rule;
* :mod:`kvlab.kernels.split_reduce`: the merge of split-K segments;
* :mod:`kvlab.kernels.numerics`: conversions exact in both modes (the interpreter's workarounds);
* :mod:`kvlab.kernels.launch_config`: tile shapes, the split-K rule, rows per cache-write program
  (every launch decision in one place).

In the interpreter an attention call takes about a second for a few decodes over ~100 keys with 32
query heads, and a few seconds for a 100-token prefill; a cache write 10–30 ms per (token, KV head).
Lessons and tests on CPU therefore use short sequences. On a GPU the same calls take microseconds.
"""

from kvlab.kernels.attention import PagedAttentionCall, paged_attention, prepare_paged_attention
from kvlab.kernels.cache_write import launch_cache_write, write_kv_cache
from kvlab.kernels.launch_config import AttentionTiling, choose_num_splits, choose_tiling
from kvlab.kernels.runtime import INTERPRET, kernel_device, mode

__all__ = [
    "INTERPRET",
    "AttentionTiling",
    "PagedAttentionCall",
    "choose_num_splits",
    "choose_tiling",
    "kernel_device",
    "launch_cache_write",
    "mode",
    "paged_attention",
    "prepare_paged_attention",
    "write_kv_cache",
]
