"""kvlab's forward against llama.cpp on the same GGUF file (a stored slice of its log-probabilities).

``tests/data/llama_cpp_reference.json`` was written by ``scripts/validate_llama_cpp.py`` with
llama-cpp-python 0.3.16 (f16 KV cache) on the first 128 tokens of the shipped text. llama.cpp
multiplies Q4_1 weights with Q8 activations where kvlab multiplies dequantized float weights, so
the two agree closely but not exactly: the full comparison over 2,047 positions
(``benchmarks/results/llama_cpp_comparison.csv``) gives a perplexity gap of 0.65% and mean KL
0.0027. A wrong RoPE pairing, a missing norm or a wrong KV-head mapping moves these by orders of
magnitude (and changes decided argmaxes), which is what the tolerances below are set to catch.
"""

import json
from pathlib import Path

import pytest
import torch

from kvlab.lm import ModelKVCache

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "llama_cpp_reference.json"


@pytest.fixture(scope="module")
def reference():
    return json.loads(REFERENCE.read_text())


@pytest.fixture(scope="module")
def kvlab_logprobs(model, reference):
    ids = reference["token_ids"]
    kv = ModelKVCache(model.config, "auto", max_tokens=len(ids))
    seq = kv.add_sequence()
    out = []
    with torch.no_grad():
        for lo in range(0, len(ids), 64):
            batch = kv.plan_step([seq], [min(64, len(ids) - lo)])
            hidden = model.forward(torch.tensor(ids[lo : lo + 64]), kv, batch)
            out.append(torch.log_softmax(model.logits(hidden).double(), -1))
    return torch.cat(out)


def test_tokenizer_matches_llama_cpp(reference, corpus_ids):
    assert corpus_ids[: len(reference["token_ids"])] == reference["token_ids"]


def test_target_logprobs_and_perplexity_match_llama_cpp(reference, kvlab_logprobs):
    ids = torch.tensor(reference["token_ids"])
    ours = kvlab_logprobs[:-1].gather(1, ids[1:, None]).squeeze(1)
    theirs = torch.tensor(reference["target_logprob"], dtype=torch.float64)
    gap = float(torch.exp(-ours.mean()) / torch.exp(-theirs.mean()) - 1)
    assert abs(gap) < 0.02, f"perplexity gap {gap:.2%}"
    # measured: mean 0.072, max 0.37 nats
    assert float((ours - theirs).abs().mean()) < 0.1
    assert float((ours - theirs).abs().max()) < 0.6


def test_decided_argmaxes_match_llama_cpp(reference, kvlab_logprobs):
    top5 = torch.tensor(reference["top5_logprob"], dtype=torch.float64)
    top_ids = torch.tensor(reference["top5_ids"])
    margin = top5[:, 0] - top5[:, 1]
    ours = kvlab_logprobs.argmax(-1)
    agree = ours == top_ids[:, 0]
    # measured: 102 of the 103 positions with margin > 0.25 agree (the one miss has margin 0.36 and
    # kvlab's top two within 0.013 of each other); every position with margin > 0.5 agrees
    assert int((margin > 0.25).sum()) >= 90
    assert float(agree[margin > 0.25].double().mean()) >= 0.98
    assert bool(agree[margin > 0.5].all())
    assert float(agree.double().mean()) >= 0.9
    # llama.cpp's five most likely tokens get nearly the same log-probabilities from kvlab
    diff = (kvlab_logprobs.gather(1, top_ids) - top5).abs()
    assert float(diff.mean()) < 0.1 and float(diff.max()) < 0.9  # measured 0.067 and 0.62
