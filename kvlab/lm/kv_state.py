"""The model's KV cache: one :class:`~kvlab.cache.PagedKVCache` per layer, and the block tables.

Every layer shares one block table per sequence (all layers store the same tokens), like vLLM's
full-attention KV-cache group. Blocks are handed out from a shuffled free list, so a sequence's
blocks are scattered through the pool and every read really goes through its block table. One
extra block is never written: it stays poisoned (NaN) and pads the block tables, so a read past a
sequence's last block would show up as NaN in the output.
"""

from __future__ import annotations

import torch

from kvlab.cache.batch import AttentionBatch, cdiv
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.lm.config import LlamaConfig
from kvlab.quantization.per_token_head import ROUNDINGS
from kvlab.quantization.schemes import QuantMode, get_scheme
from kvlab.validation import require_choice, require_positive_int


class ModelKVCache:
    """Paged K/V of all layers of one model, for a few sequences.

    Args:
        config: the model shape (layers, KV heads, head size).
        scheme: kv-cache dtype name (see :data:`kvlab.SCHEME_NAMES`).
        max_tokens: total tokens of all sequences the pool must hold.
        max_sequences: sequences sharing the pool (each may leave its last block part-empty).
        block_size: tokens per block.
        rounding: int8 per-token-head rounding, ``"nearest"`` or ``"truncate"`` (vLLM's Triton store).
        model_dtype: the dtype K/V are produced in (what ``"auto"`` stores).
        k_scale, v_scale: per-tensor fp8 scales (vLLM's default without calibration is 1.0).
        use_kernel: write with the Triton cache-write kernel instead of the reference writer.
        seed: shuffles the free block list.
    """

    def __init__(
        self,
        config: LlamaConfig,
        scheme: str,
        *,
        max_tokens: int,
        max_sequences: int = 1,
        block_size: int = 16,
        rounding: str = "nearest",
        model_dtype: torch.dtype = torch.float32,
        k_scale: float = 1.0,
        v_scale: float = 1.0,
        device: str | torch.device = "cpu",
        use_kernel: bool = False,
        seed: int = 0,
    ) -> None:
        require_positive_int(max_tokens, "max_tokens")
        require_positive_int(block_size, "block_size")
        require_positive_int(max_sequences, "max_sequences")
        require_choice(rounding, ROUNDINGS, "rounding")
        self.scheme = get_scheme(scheme, model_dtype)
        self.block_size = block_size
        self.rounding = rounding
        self.use_kernel = use_kernel
        num_blocks = cdiv(max_tokens, block_size) + max_sequences  # + 1 poisoned padding block
        self.layers = [
            PagedKVCache.allocate(self.scheme, num_blocks, block_size, config.num_kv_heads, config.head_size,
                                  device=device, k_scale=k_scale, v_scale=v_scale, model_dtype=model_dtype)
            for _ in range(config.num_layers)
        ]
        order = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(seed)).tolist()
        self._pad_block = order[0]
        self._free = order[1:]
        self._blocks: list[list[int]] = []
        self._lengths: list[int] = []
        self._host_saturated = 0
        self._device_saturated: torch.Tensor | int = 0

    @property
    def num_sequences(self) -> int:
        """Sequences added so far."""
        return len(self._lengths)

    def length(self, seq: int) -> int:
        """Tokens cached for sequence ``seq``."""
        return self._lengths[seq]

    def add_sequence(self) -> int:
        """Start a new, empty sequence; returns its id."""
        self._blocks.append([])
        self._lengths.append(0)
        return len(self._lengths) - 1

    def plan_step(self, seqs: list[int], new_tokens: list[int]) -> AttentionBatch:
        """Reserve slots for ``new_tokens[i]`` more tokens of each sequence ``seqs[i]``.

        Returns the batch of this step (query offsets, lengths including the new tokens, block
        tables padded with the poisoned block). Raises if the pool is too small.
        """
        for s, n in zip(seqs, new_tokens, strict=True):
            need = cdiv(self._lengths[s] + n, self.block_size) - len(self._blocks[s])
            if need > len(self._free):
                raise ValueError(
                    f"the KV cache has no free block left for sequence {s} ({self._lengths[s]} tokens "
                    f"cached, {n} more asked); allocate it with a larger max_tokens"
                )
            self._blocks[s].extend(self._free[:need])
            del self._free[:need]
            self._lengths[s] += n
        width = max(len(self._blocks[s]) for s in seqs) + 1
        table = [self._blocks[s] + [self._pad_block] * (width - len(self._blocks[s])) for s in seqs]
        return AttentionBatch.from_lengths(new_tokens, [self._lengths[s] for s in seqs], table,
                                           device=self.layers[0].device)

    def write(self, layer: int, key: torch.Tensor, value: torch.Tensor, batch: AttentionBatch,
              slot_mapping: torch.Tensor) -> None:
        """Store one layer's new K/V at their slots with kvlab's cache write (reference or kernel).

        ``slot_mapping`` comes from the ``batch`` that :meth:`plan_step` made, so its slots are valid by
        construction. The Triton path (``use_kernel``) therefore launches the write without the
        per-call checks (they cost device synchronisations, 30 layers a step) and counts per-tensor
        fp8 saturations on the device; :attr:`saturated` reads the count. kvlab's low-bit schemes
        take the step's ``batch`` too (KIVI quantizes the blocks that leave its bf16 residual) and
        have one rounding only.
        """
        cache = self.layers[layer]
        if self.use_kernel and self.scheme.mode.is_low_bit:
            from kvlab.kernels.lowbit_cache_write import write_lowbit_cache

            write_lowbit_cache(cache, key, value, slot_mapping, batch=batch, check_finite=False)
        elif self.scheme.mode.is_low_bit:
            cache.write(key, value, slot_mapping, batch=batch, check_finite=False)
        elif self.use_kernel:
            from kvlab.kernels import launch_cache_write

            counts = torch.zeros(2 * key.shape[0] * cache.num_kv_heads, dtype=torch.int32, device=key.device)
            launch_cache_write(cache, key, value, slot_mapping, rounding=self.rounding, saturated=counts)
            if self.scheme.mode == QuantMode.FP8_PER_TENSOR:
                self._device_saturated = counts.sum() + self._device_saturated
        else:
            report = cache.write(key, value, slot_mapping, rounding=self.rounding, check_finite=False)
            self._host_saturated += report.key_saturated + report.value_saturated

    @property
    def saturated(self) -> int:
        """K and V values clipped to the fp8 range by all writes so far (per-tensor fp8 only)."""
        return self._host_saturated + int(self._device_saturated)
