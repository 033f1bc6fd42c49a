"""Deliberately wrong answers to the exercises, one common mistake each.

Each entry is ``(mistake, learner_name, implementation, label)``: the check must fail on it and its
report must name the case (``failed on … “<label>”``, or the label of any case when ``label`` is None).
"""

from __future__ import annotations

import torch

from kvlab import dequantize_per_token_head, get_scheme, quantize_per_token_head, relative_error
from kvlab.serving import EngineConfig, capacity

# -- exercise 2 ---------------------------------------------------------------------------------------


def int8_truncating(x):
    xf = x.float()
    scales = torch.clamp(xf.abs().amax(dim=-1) / 127.0, min=1e-6)
    return torch.trunc(torch.clamp(xf * (1.0 / scales).unsqueeze(-1), -128, 127)).to(torch.int8), scales


def int8_without_floor(x):
    xf = x.float()
    scales = xf.abs().amax(dim=-1) / 127.0
    return torch.round(torch.clamp(xf * (1.0 / scales).unsqueeze(-1), -128, 127)).to(torch.int8), scales


def int8_max_not_absmax(x):
    xf = x.float()
    scales = torch.clamp(xf.amax(dim=-1) / 127.0, min=1e-6)
    return torch.round(torch.clamp(xf * (1.0 / scales).unsqueeze(-1), -128, 127)).to(torch.int8), scales


def int8_per_tensor_scale(x):
    xf = x.float()
    scale = torch.clamp(xf.abs().amax() / 127.0, min=1e-6)
    codes = torch.round(torch.clamp(xf * (1.0 / scale), -128, 127)).to(torch.int8)
    return codes, scale.expand(x.shape[:-1]).contiguous()


def int8_round_half_up(x):
    xf = x.float()
    scales = torch.clamp(xf.abs().amax(dim=-1) / 127.0, min=1e-6)
    y = torch.floor(xf * (1.0 / scales).unsqueeze(-1) + 0.5)
    return torch.clamp(y, -128, 127).to(torch.int8), scales


# -- exercise 3 ---------------------------------------------------------------------------------------


def _roundings(x):
    out = {}
    for rounding in ("nearest", "truncate"):
        out[rounding] = quantize_per_token_head(x, "int8_per_token_head", rounding)
    return out


def _error(codes_and_scales, x):
    return relative_error(dequantize_per_token_head(*codes_and_scales, torch.float64), x.double())


def roundings_swapped(x):
    q = _roundings(x)
    errs = [_error(q[r], x) for r in ("truncate", "nearest")]
    return errs[0], errs[1], float((q["nearest"][0] != q["truncate"][0]).double().mean())


def roundings_hand_norm(x):
    q = _roundings(x)
    errs = []
    for r in ("nearest", "truncate"):
        d = dequantize_per_token_head(*q[r], torch.float64)
        errs.append(float((d - x.double()).norm() / x.double().norm()))
    return errs[0], errs[1], float((q["nearest"][0] != q["truncate"][0]).double().mean())


def roundings_count_not_fraction(x):
    q = _roundings(x)
    errs = [_error(q[r], x) for r in ("nearest", "truncate")]
    return errs[0], errs[1], float((q["nearest"][0] != q["truncate"][0]).sum())


# -- exercise 5 ---------------------------------------------------------------------------------------


def slots_off_by_one(block_table, query_lens, seq_lens, block_size):
    out = []
    for row, q, n in zip(block_table, query_lens, seq_lens, strict=True):
        for p in range(n - q + 1, n + 1):
            b = p // block_size
            out.append((row[b] if b < len(row) else row[-1]) * block_size + p % block_size)
    return out


def slots_without_block_table(block_table, query_lens, seq_lens, block_size):
    return [p for q, n in zip(query_lens, seq_lens, strict=True) for p in range(n - q, n)]


def slots_from_row_index(block_table, query_lens, seq_lens, block_size):
    out = []
    for row, q, _ in zip(block_table, query_lens, seq_lens, strict=True):
        out += [row[t // block_size] * block_size + t % block_size for t in range(q)]
    return out


# -- exercise 1 ---------------------------------------------------------------------------------------


def _layer_bytes(layer, scheme, with_scales=True, with_v=True):
    head_v = layer.head_size if layer.head_size_v is None else layer.head_size_v
    data = layer.num_kv_heads * (layer.head_size + (head_v if with_v else 0)) * scheme.element_bytes
    scales = 2 * layer.num_kv_heads * 4 if with_scales and scheme.has_token_head_scales else 0
    return data + scales


def bytes_without_scales(model, kv_cache_dtype):
    scheme = get_scheme(kv_cache_dtype, getattr(torch, model.dtype))
    return sum(_layer_bytes(layer, scheme, with_scales=False) for layer in model.layers)


def bytes_keys_only(model, kv_cache_dtype):
    scheme = get_scheme(kv_cache_dtype, getattr(torch, model.dtype))
    return sum(_layer_bytes(layer, scheme, with_v=False) for layer in model.layers)


def bytes_auto_is_bf16(model, kv_cache_dtype):
    scheme = get_scheme(kv_cache_dtype)
    return sum(_layer_bytes(layer, scheme) for layer in model.layers)


def bytes_one_layer(model, kv_cache_dtype):
    scheme = get_scheme(kv_cache_dtype, getattr(torch, model.dtype))
    return _layer_bytes(model.layers[0], scheme)


def _bytes(model, kv_cache_dtype):
    scheme = get_scheme(kv_cache_dtype, getattr(torch, model.dtype))
    return sum(_layer_bytes(layer, scheme) for layer in model.layers)


def capacity_without_null_block(model, kv_cache_dtype, available_bytes, max_model_len, block_size):
    blocks = available_bytes // (block_size * _bytes(model, kv_cache_dtype)) - 1
    return blocks, blocks / -(-max_model_len // block_size)


def capacity_rounding_request_down(model, kv_cache_dtype, available_bytes, max_model_len, block_size):
    blocks = available_bytes // (block_size * _bytes(model, kv_cache_dtype))
    return blocks, blocks / (max_model_len // block_size)


def capacity_from_bytes(model, kv_cache_dtype, available_bytes, max_model_len, block_size):
    blocks = available_bytes // (block_size * _bytes(model, kv_cache_dtype))
    return blocks, available_bytes / (_bytes(model, kv_cache_dtype) * max_model_len)


# -- exercise 6 ---------------------------------------------------------------------------------------


class _ListPool:
    first_block = 1

    def __init__(self, num_blocks):
        self.refs = [0] * num_blocks
        self.queue = list(range(self.first_block, num_blocks))

    def get_new_blocks(self, n):
        if n > len(self.queue):
            raise ValueError("too few free blocks")
        taken, self.queue = self.queue[:n], self.queue[n:]
        for b in taken:
            self.refs[b] = 1
        return taken

    def touch(self, block_ids):
        for b in block_ids:
            if self.refs[b] == 0:
                self.queue.remove(b)
            self.refs[b] += 1

    def free_blocks(self, block_ids):
        for b in block_ids:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.queue.append(b)

    def ref_count(self, block_id):
        return self.refs[block_id]

    def free_block_ids(self):
        return list(self.queue)


class PoolHandingOutNullBlock(_ListPool):
    first_block = 0


class PoolFreeingToHead(_ListPool):
    def free_blocks(self, block_ids):
        for b in block_ids:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.queue.insert(0, b)


class PoolIgnoringRefCounts(_ListPool):
    def free_blocks(self, block_ids):
        for b in block_ids:
            self.refs[b] = 0
            if b not in self.queue:
                self.queue.append(b)


class PoolTouchKeepsFreeBlocksQueued(_ListPool):
    def touch(self, block_ids):
        for b in block_ids:
            self.refs[b] += 1


class PoolWithoutError(_ListPool):
    def get_new_blocks(self, n):
        taken, self.queue = self.queue[:n], self.queue[n:]
        for b in taken:
            self.refs[b] = 1
        return taken


# -- exercise 7 ---------------------------------------------------------------------------------------


def _remove(block_table, skipped_tokens, block_size, stop_at_null=True):
    table = list(block_table)
    freed = []
    for i in range(min(skipped_tokens // block_size, len(table)) - 1, -1, -1):
        if table[i] == 0 and stop_at_null:
            break
        freed.append(table[i])
        table[i] = 0
    return table, freed


def skip_off_by_one(block_table, num_computed_tokens, sliding_window, block_size):
    return _remove(block_table, max(0, num_computed_tokens - sliding_window), block_size)


def skip_deletes_instead_of_null(block_table, num_computed_tokens, sliding_window, block_size):
    table, freed = _remove(block_table, max(0, num_computed_tokens - sliding_window + 1), block_size)
    return [b for b in table if b != 0], freed


def skip_frees_head_first(block_table, num_computed_tokens, sliding_window, block_size):
    table, freed = _remove(block_table, max(0, num_computed_tokens - sliding_window + 1), block_size)
    return table, freed[::-1]


def skip_frees_null_blocks(block_table, num_computed_tokens, sliding_window, block_size):
    skipped = max(0, num_computed_tokens - sliding_window + 1)
    return _remove(block_table, skipped, block_size, stop_at_null=False)


# -- exercise 8 ---------------------------------------------------------------------------------------


def _cdiv(a, b):
    return -(-a // b)


def need_without_plus_one(policy, num_tokens, block_size, sliding_window, max_num_batched_tokens,
                          max_model_len):
    need = _cdiv(num_tokens, block_size)
    if policy == "vllm" and sliding_window is not None:
        cap = _cdiv(min(sliding_window - 1 + max_num_batched_tokens, max_model_len), block_size)
        need = min(need, cap)
    return need


def need_window_not_minus_one(policy, num_tokens, block_size, sliding_window, max_num_batched_tokens,
                              max_model_len):
    need = _cdiv(num_tokens, block_size)
    if policy == "vllm" and sliding_window is not None:
        cap = _cdiv(min(sliding_window + max_num_batched_tokens, max_model_len), block_size) + 1
        need = min(need, cap)
    return need


def need_capped_under_both(policy, num_tokens, block_size, sliding_window, max_num_batched_tokens,
                           max_model_len):
    need = _cdiv(num_tokens, block_size)
    if sliding_window is not None:
        cap = _cdiv(min(sliding_window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1
        need = min(need, cap)
    return need


def need_cap_without_min(policy, num_tokens, block_size, sliding_window, max_num_batched_tokens,
                         max_model_len):
    if policy == "vllm" and sliding_window is not None:
        return _cdiv(min(sliding_window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1
    return _cdiv(num_tokens, block_size)


# -- exercise 9 ---------------------------------------------------------------------------------------


def _just_enough(model):
    length = min(32768, model.max_position_embeddings)
    probe = EngineConfig(model, kv_cache_memory="4096GiB", max_model_len=length, max_num_batched_tokens=2048)
    plan = capacity(probe)
    return probe.replace(kv_cache_memory=plan.bytes_per_block * (plan.blocks_per_max_request + 1)), length


def stall_with_plenty_of_memory(model):
    config, length = _just_enough(model)
    return config.replace(kv_cache_memory=config.kv_cache_memory * 20), length


def stall_with_short_prompt(model):
    config, _ = _just_enough(model)
    return config, 64


def stall_with_too_little_memory(model):
    config, length = _just_enough(model)
    return config.replace(kv_cache_memory=config.kv_cache_memory // 3), length


def stall_with_prompt_over_max_len(model):
    config, length = _just_enough(model)
    return config, length + 1


# -- exercise 10 --------------------------------------------------------------------------------------


def _decode_bytes(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads, head_size, block_size,
                  scales=True, query=True, table=True):
    scheme = get_scheme(kv_cache_dtype)
    per_token = num_kv_heads * 2 * head_size * scheme.element_bytes
    if scales and scheme.has_token_head_scales:
        per_token += 2 * num_kv_heads * 4
    total = batch * context * per_token + batch * 2 * 4 + 4
    if query:
        total += 2 * batch * num_q_heads * head_size * 2
    if table:
        total += batch * -(-context // block_size) * 4
    return total


def decode_bytes_without_scales(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads, head_size,
                                block_size):
    return _decode_bytes(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads, head_size, block_size,
                         scales=False)


def decode_bytes_cache_only(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads, head_size, block_size):
    return _decode_bytes(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads, head_size, block_size,
                         query=False, table=False)


def speedup_inverted(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads, head_size, block_size):
    shape = (batch, context, num_q_heads, num_kv_heads, head_size, block_size)
    return _decode_bytes(kv_cache_dtype, *shape) / _decode_bytes("bfloat16", *shape)


def speedup_from_element_bytes(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads, head_size,
                               block_size):
    return 2 / get_scheme(kv_cache_dtype).element_bytes


_LONG_INT8_DECODE = "int8 per-token-head, 64 sequences of 32k tokens"

#: The label of a mistake that is wrong in general: the report must name a random case (and may
#: add that an edge case fails too), never only an edge case.
RANDOM = "<a random case>"

WRONG_VARIANTS = {
    "quantize_int8": [
        ("truncation instead of rounding", int8_truncating, RANDOM),
        ("no scale floor", int8_without_floor, None),
        ("max(x) instead of max|x|", int8_max_not_absmax, None),
        ("one scale for the whole tensor", int8_per_tensor_scale, None),
        ("halves rounded up", int8_round_half_up, None),
    ],
    "compare_roundings": [
        ("roundings swapped", roundings_swapped, None),
        ("norm / norm without a zero guard", roundings_hand_norm, "all-zero tensor"),
        ("count instead of fraction", roundings_count_not_fraction, None),
    ],
    "bytes_per_token": [
        ("scale bytes forgotten", bytes_without_scales, "Llama-3.1-8B, int8 per-token-head"),
        ("V forgotten", bytes_keys_only, "Llama-3.1-8B, bf16 cache"),
        ("'auto' taken as bf16", bytes_auto_is_bf16, "a float32 model with the 'auto' cache"),
        ("one layer only", bytes_one_layer, "Llama-3.1-8B, bf16 cache"),
    ],
    "kv_capacity": [
        ("null block left out of num_blocks", capacity_without_null_block, None),
        ("request blocks rounded down", capacity_rounding_request_down, None),
        ("concurrency from bytes, not blocks", capacity_from_bytes, None),
    ],
    "TinyBlockPool": [
        ("null block handed out", PoolHandingOutNullBlock, "the first blocks handed out"),
        ("freed blocks to the head", PoolFreeingToHead, "freed blocks go to the tail, in the order given"),
        ("ref counts ignored on free", PoolIgnoringRefCounts, "a block shared by two requests"),
        ("touch leaves free blocks queued", PoolTouchKeepsFreeBlocksQueued,
         "touching a free block takes it out of the queue"),
        ("no ValueError when too few blocks", PoolWithoutError, "every usable block, then one more"),
    ],
    "remove_skipped_blocks": [
        ("n − W instead of n − W + 1", skip_off_by_one, None),
        ("entries deleted instead of nulled", skip_deletes_instead_of_null, None),
        ("freed head-first", skip_frees_head_first, None),
        ("null blocks freed again", skip_frees_null_blocks, None),
    ],
    "admission_need": [
        ("cap without + 1", need_without_plus_one, None),
        ("W instead of W − 1", need_window_not_minus_one, None),
        ("cap applied to uncapped", need_capped_under_both, None),
        ("cap without min(cdiv(N, B), ·)", need_cap_without_min, None),
    ],
    "stalling_config": [
        ("too much memory", stall_with_plenty_of_memory, "gemma-3-27b"),
        ("prompt shorter than the window", stall_with_short_prompt, "gemma-3-27b"),
        ("too little memory for the startup", stall_with_too_little_memory, "gemma-3-27b"),
        ("prompt longer than max_model_len", stall_with_prompt_over_max_len, "gemma-3-27b"),
    ],
    "decode_bytes": [
        ("scale bytes forgotten", decode_bytes_without_scales, _LONG_INT8_DECODE),
        ("cache only", decode_bytes_cache_only, _LONG_INT8_DECODE),
    ],
    "predicted_decode_speedup": [
        ("ratio inverted", speedup_inverted, _LONG_INT8_DECODE),
        ("ratio of element sizes", speedup_from_element_bytes, _LONG_INT8_DECODE),
    ],
    "slot_mapping": [
        ("position off by one", slots_off_by_one, "decode of the first token of a new block"),
        ("positions, not slots", slots_without_block_table, None),
        ("row index instead of position", slots_from_row_index, None),
    ],
}
