"""Reading a llama GGUF file: its metadata as a :class:`LlamaConfig`, its tensors as float32 weights.

GGUF stores each tensor with its GGML type (here Q4_1 blocks for the projections, Q8_0 for the token
embedding, F32 for the norms); ``gguf.quants.dequantize`` turns every type into float32. A GGML
shape lists the fastest-varying dimension first, so a ``[576, 192]`` tensor is a ``[192, 576]``
matrix: exactly PyTorch's ``[out_features, in_features]`` layout.

The llama conversion to GGUF reorders the rows of ``attn_q`` and ``attn_k`` of every head so that
the two channels RoPE rotates together are *adjacent* (``2i, 2i + 1``) instead of half a head apart
(``i, i + D/2``) as in the original checkpoint. :mod:`kvlab.lm.rope` therefore rotates adjacent pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from kvlab.lm.config import LlamaConfig
from kvlab.lm.model_file import require_model_file

#: rows of a large tensor dequantized at a time (bounds the temporaries of loading)
_ROWS_PER_PIECE = 4096


def _import_gguf():
    try:
        import gguf
    except ImportError as exc:  # pragma: no cover - the lab/dev installs include it
        raise ValueError("reading GGUF files needs the 'gguf' package: pip install gguf==0.19.0") from exc
    return gguf


@dataclass(frozen=True)
class LayerWeights:
    """The float32 weights of one transformer block (matrices as ``[out, in]``)."""

    attn_norm: torch.Tensor
    wq: torch.Tensor
    wk: torch.Tensor
    wv: torch.Tensor
    wo: torch.Tensor
    ffn_norm: torch.Tensor
    w_gate: torch.Tensor
    w_up: torch.Tensor
    w_down: torch.Tensor


@dataclass(frozen=True)
class LlamaWeights:
    """Every weight of the model; ``output`` is the embedding itself when the model ties them."""

    token_embedding: torch.Tensor
    layers: tuple[LayerWeights, ...]
    output_norm: torch.Tensor
    output: torch.Tensor


def _field(reader, key: str):
    field = reader.fields.get(key)
    if field is None:
        raise ValueError(f"the GGUF file has no {key!r} entry; is it a llama model?")
    return field.contents()


def read_config(reader) -> LlamaConfig:
    """The model's shape from the GGUF metadata of an open ``gguf.GGUFReader``."""
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"expected a llama-architecture GGUF file, got architecture {arch!r}")
    hidden = int(_field(reader, "llama.embedding_length"))
    heads = int(_field(reader, "llama.attention.head_count"))
    head_size = hidden // heads
    rope_field = reader.fields.get("llama.rope.dimension_count")
    vocab_field = reader.fields.get("llama.vocab_size")
    vocab = int(vocab_field.contents()) if vocab_field else len(reader.fields["tokenizer.ggml.tokens"].data)
    return LlamaConfig(
        num_layers=int(_field(reader, "llama.block_count")),
        hidden_size=hidden,
        intermediate_size=int(_field(reader, "llama.feed_forward_length")),
        num_q_heads=heads,
        num_kv_heads=int(_field(reader, "llama.attention.head_count_kv")),
        head_size=head_size,
        rope_base=float(_field(reader, "llama.rope.freq_base")),
        rope_dim=int(rope_field.contents()) if rope_field else head_size,
        rms_norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        vocab_size=vocab,
        context_length=int(_field(reader, "llama.context_length")),
    )


def read_weights(reader, config: LlamaConfig) -> LlamaWeights:
    """Dequantize every tensor of an open ``gguf.GGUFReader`` to float32 torch tensors."""
    gguf = _import_gguf()
    tensors = {t.name: t for t in reader.tensors}

    def get(name: str) -> torch.Tensor:
        t = tensors.get(name)
        if t is None:
            raise ValueError(f"the GGUF file has no tensor {name!r}")
        shape = [int(n) for n in reversed([int(n) for n in t.shape])]
        data = t.data
        if data.ndim < 2 or data.shape[0] <= _ROWS_PER_PIECE:
            values = gguf.quants.dequantize(data, t.tensor_type)
            return torch.from_numpy(values.astype("float32")).reshape(*shape)
        # large tensors (the 49,152-row embedding) piece by piece: dequantizing all rows at once
        # holds several full-size temporaries and lifted the peak RSS of loading by ~0.3 GB
        out = torch.empty(data.shape[0], math.prod(shape) // data.shape[0], dtype=torch.float32)
        for lo in range(0, data.shape[0], _ROWS_PER_PIECE):
            piece = gguf.quants.dequantize(data[lo : lo + _ROWS_PER_PIECE], t.tensor_type)
            out[lo : lo + piece.shape[0]] = torch.from_numpy(piece.astype("float32", copy=False)).reshape(
                piece.shape[0], -1)
        return out.reshape(*shape)

    layers = tuple(
        LayerWeights(
            attn_norm=get(f"blk.{i}.attn_norm.weight"),
            wq=get(f"blk.{i}.attn_q.weight"),
            wk=get(f"blk.{i}.attn_k.weight"),
            wv=get(f"blk.{i}.attn_v.weight"),
            wo=get(f"blk.{i}.attn_output.weight"),
            ffn_norm=get(f"blk.{i}.ffn_norm.weight"),
            w_gate=get(f"blk.{i}.ffn_gate.weight"),
            w_up=get(f"blk.{i}.ffn_up.weight"),
            w_down=get(f"blk.{i}.ffn_down.weight"),
        )
        for i in range(config.num_layers)
    )
    embedding = get("token_embd.weight")
    output = get("output.weight") if "output.weight" in tensors else embedding
    return LlamaWeights(embedding, layers, get("output_norm.weight"), output)


def open_gguf(path: str | Path | None = None):
    """An open ``gguf.GGUFReader`` on ``path`` (default: the packaged SmolLM2 file)."""
    gguf = _import_gguf()
    return gguf.GGUFReader(str(require_model_file(path)))
