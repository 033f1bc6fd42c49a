"""Does kvlab's llama forward compute what llama.cpp computes on the same GGUF file?

Runs the shipped text (first ``--tokens`` tokens, no BOS: the GGUF says ``add_bos_token = false``)
through llama.cpp (``llama-cpp-python``, every position's logits) and through kvlab's forward with an
unquantized fp32 paged cache, then compares the next-token distributions position by position:

* perplexity of each and their gap (target: within 1%);
* argmax agreement overall, and where llama.cpp's top-1 margin exceeds 0.1 / 0.25 logit (llama.cpp
  multiplies quantized weights with Q8 activations while kvlab multiplies dequantized float weights,
  so near-ties may flip; where llama.cpp is decided, a miss is a bug);
* mean KL(llama.cpp ‖ kvlab).

It writes ``benchmarks/results/llama_cpp_comparison.csv`` (one row of figures) and the reference
slice ``tests/data/llama_cpp_reference.json`` (tokens, llama.cpp's log-probabilities of the targets,
its top-5 per position, for the first ``--slice`` positions) that ``tests/lm`` compares against in
CI without llama.cpp. llama-cpp-python is not a kvlab dependency; it builds from source with
``CMAKE_ARGS=-DGGML_NATIVE=OFF pip install llama-cpp-python==0.3.16`` (several minutes).

    python scripts/validate_llama_cpp.py [--tokens 2048] [--slice 128]
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def llama_cpp_logprobs(model_path: Path, text: str, num_tokens: int) -> tuple[list[int], np.ndarray, str]:
    """llama.cpp's tokens of ``text`` (first ``num_tokens``) and log-softmax of every position."""
    import llama_cpp

    llm = llama_cpp.Llama(str(model_path), n_ctx=num_tokens, n_batch=512, logits_all=True, verbose=False,
                          n_threads=2, seed=0)
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)[:num_tokens]
    llm.reset()
    llm.eval(ids)
    logits = np.array(llm.scores[: len(ids)], dtype=np.float64)
    logits -= logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return ids, logp.astype(np.float32), llama_cpp.__version__


@torch.no_grad()
def kvlab_logprobs(model, ids: list[int], chunk: int = 256) -> np.ndarray:
    """kvlab's log-softmax of every position: fp32 weights, unquantized fp32 paged cache."""
    from kvlab.lm import ModelKVCache

    kv = ModelKVCache(model.config, "auto", max_tokens=len(ids))
    seq = kv.add_sequence()
    out = []
    for lo in range(0, len(ids), chunk):
        hi = min(lo + chunk, len(ids))
        batch = kv.plan_step([seq], [hi - lo])
        hidden = model.forward(torch.tensor(ids[lo:hi]), kv, batch)
        out.append(torch.log_softmax(model.logits(hidden), -1).numpy())
    return np.concatenate(out)


def compare(ref: np.ndarray, ours: np.ndarray, ids: list[int]) -> dict[str, float]:
    """Figures of the comparison over positions 0..n-2 (each predicts the next token)."""
    targets = np.array(ids[1:])
    r, o = ref[:-1], ours[:-1]
    rows = np.arange(len(targets))
    nll_ref, nll_ours = -r[rows, targets], -o[rows, targets]
    top2 = np.sort(r, axis=-1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    agree = r.argmax(-1) == o.argmax(-1)
    kl = (np.exp(r) * (r - o)).sum(-1)
    ppl_ref, ppl_ours = float(np.exp(nll_ref.mean())), float(np.exp(nll_ours.mean()))
    return {
        "positions": len(targets),
        "perplexity_llama_cpp": ppl_ref,
        "perplexity_kvlab": ppl_ours,
        "perplexity_gap_pct": 100 * (ppl_ours / ppl_ref - 1),
        "argmax_agreement": float(agree.mean()),
        "argmax_agreement_margin_gt_0.1": float(agree[margin > 0.1].mean()),
        "argmax_agreement_margin_gt_0.25": float(agree[margin > 0.25].mean()),
        "positions_margin_gt_0.25": int((margin > 0.25).sum()),
        "mean_kl": float(kl.mean()),
        "max_abs_target_logprob_diff": float(np.abs(nll_ref - nll_ours).max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--slice", type=int, default=128, help="positions stored for the CI test")
    args = parser.parse_args()
    from kvlab.lm import load_model, require_model_file
    from kvlab.lm.corpus import CORPUS_SOURCE, corpus_text

    path = require_model_file()
    text = corpus_text()
    t0 = time.perf_counter()
    ids, ref, version = llama_cpp_logprobs(path, text, args.tokens)
    t1 = time.perf_counter()
    model = load_model()
    ours_ids = model.encode(text)[: len(ids)]
    tokens_equal = ours_ids == ids
    ours = kvlab_logprobs(model, ids)
    t2 = time.perf_counter()
    figures = {"llama_cpp_python": version, "kv_cache_llama_cpp": "f16 (default)", "kv_cache_kvlab": "fp32",
               "tokenizer_identical": tokens_equal, **compare(ref, ours, ids),
               "seconds_llama_cpp": round(t1 - t0, 1), "seconds_kvlab": round(t2 - t1, 1)}
    for k, v in figures.items():
        print(f"{k:34s} {v}")
    out = ROOT / "benchmarks" / "results" / "llama_cpp_comparison.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(figures))
        w.writeheader()
        w.writerow(figures)
    n = min(args.slice, len(ids))
    top = np.argsort(-ref[:n], axis=-1)[:, :5]
    slice_ = {
        "source": f"llama-cpp-python {version}, f16 KV cache, n_threads=2, on {path.name}; "
                  f"text: {CORPUS_SOURCE}",
        "token_ids": ids[:n],
        "target_logprob": [round(float(ref[i, ids[i + 1]]), 5) for i in range(n - 1)],
        "top5_ids": top.tolist(),
        "top5_logprob": [[round(float(ref[i, j]), 5) for j in row] for i, row in enumerate(top)],
    }
    (ROOT / "tests" / "data" / "llama_cpp_reference.json").write_text(json.dumps(slice_) + "\n")
    print(f"wrote {out} and tests/data/llama_cpp_reference.json")


if __name__ == "__main__":
    main()
