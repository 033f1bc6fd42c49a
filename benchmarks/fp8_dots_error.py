"""Would fp8 tensor-core dots keep the per-tensor fp8 prefill error? Measured on the CPU, float64.

A prefill chunk of ``Q`` queries over ``L`` keys (one KV head, ``G`` query heads, head 128, N(0, 1)
K/V and queries, causal), the K/V codes of a per-tensor ``fp8_e4m3`` cache (absmax scale), against
float64 attention on the unquantized K/V:

* ``bf16 dots`` (the kernel today): the query in bf16, codes exact, ``p`` rounded to bf16;
* ``fp8 dots``: the query and ``p`` rounded to e4m3 as well (the query by its own absmax scale;
  ``p`` in ``[0, 1]`` scaled by 256 first so that it keeps e4m3's normal range), products exact,
  sums in fp32, as an fp8 ``wgmma`` would.

    python benchmarks/fp8_dots_error.py
"""

import torch


def e4m3(x: torch.Tensor, scale: float) -> torch.Tensor:
    return (x / scale).to(torch.float8_e4m3fn).to(torch.float64) * scale


def attention(q, k, v, p_round):
    s = (q @ k.T) / k.shape[1] ** 0.5
    n, m = s.shape
    pos_q = torch.arange(m - n, m)[:, None]
    s = s.masked_fill(torch.arange(m)[None, :] > pos_q, float("-inf"))
    p = torch.exp(s - s.max(dim=1, keepdim=True).values)
    den = p.sum(dim=1, keepdim=True)
    return (p_round(p) @ v) / den


def main(Q=512, L=2048, G=4, D=128, seeds=3) -> None:
    for seed in range(seeds):
        g = torch.Generator().manual_seed(seed)
        k = torch.randn(L, D, generator=g, dtype=torch.float64)
        v = torch.randn(L, D, generator=g, dtype=torch.float64)
        q = torch.randn(Q * G, D, generator=g, dtype=torch.float64)
        ks, vs = k.abs().max().item() / 448, v.abs().max().item() / 448
        kq, vq = e4m3(k, ks), e4m3(v, vs)
        truth = torch.cat([attention(q[i::G], k, v, lambda p: p) for i in range(G)])
        bf16 = lambda x: x.to(torch.bfloat16).to(torch.float64)  # noqa: E731
        today = torch.cat([attention(bf16(q[i::G]), kq, vq, bf16) for i in range(G)])
        qs = q.abs().max().item() / 448
        fp8 = torch.cat([attention(e4m3(bf16(q[i::G]), qs), kq, vq, lambda p: e4m3(p, 1 / 256))
                         for i in range(G)])
        a, b = (((o - truth).norm() / truth.norm()).item() for o in (today, fp8))
        print(f"seed {seed}: relative error vs float64 truth: bf16 dots {a:.3e}, fp8 dots {b:.3e}")


if __name__ == "__main__":
    main()
