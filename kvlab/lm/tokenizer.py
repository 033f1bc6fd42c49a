"""The model's tokenizer, built from the vocabulary and merges stored in its GGUF file.

SmolLM2 uses GPT-2-style byte-level BPE (``tokenizer.ggml.model = gpt2``) with the ``smollm``
pre-tokenizer: every digit is its own piece, then GPT-2's split into words, numbers, punctuation and
spaces. The Rust ``tokenizers`` library does the BPE; kvlab only feeds it the GGUF's tables.
Control tokens (``<|im_start|>``, ``<|endoftext|>``, ...) are registered as special tokens, so they
are recognised in text and never split.
"""

from __future__ import annotations

from dataclasses import dataclass

#: GGUF token type of control tokens (llama.cpp's ``LLAMA_TOKEN_TYPE_CONTROL``).
_CONTROL = 3


@dataclass(frozen=True)
class TokenizerInfo:
    """Special token ids and whether the model expects a BOS token in front of a text."""

    bos_id: int
    eos_id: int
    add_bos: bool


def _strings(reader, key: str) -> list[str]:
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def build_tokenizer(reader):
    """A ``tokenizers.Tokenizer`` from an open ``gguf.GGUFReader``, plus its :class:`TokenizerInfo`."""
    try:
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    except ImportError as exc:  # pragma: no cover
        raise ValueError("the tokenizer needs the 'tokenizers' package: pip install tokenizers") from exc
    model_kind = reader.fields["tokenizer.ggml.model"].contents()
    if model_kind != "gpt2":
        raise ValueError(f"only byte-level BPE ('gpt2') GGUF tokenizers are supported, got {model_kind!r}")
    tokens = _strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in _strings(reader, "tokenizer.ggml.merges")]
    types_field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types_field.parts[i][0]) for i in types_field.data]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, types, strict=True) if kind == _CONTROL])
    add_bos = reader.fields.get("tokenizer.ggml.add_bos_token")
    info = TokenizerInfo(
        bos_id=int(reader.fields["tokenizer.ggml.bos_token_id"].contents()),
        eos_id=int(reader.fields["tokenizer.ggml.eos_token_id"].contents()),
        add_bos=bool(add_bos.contents()) if add_bos else False,
    )
    return tok, info
