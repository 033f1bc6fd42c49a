"""torch SDPA on the benchmark's shapes: the two dense baselines every attention row is compared with.

* **default dispatch**: ``scaled_dot_product_attention`` as a model would call it; torch picks the
  backend (on an H100 with torch 2.11 that is cuDNN for decode shapes). The backend it picked is
  recorded.
* **flash forced**: the same call inside ``sdpa_kernel([FLASH_ATTENTION])``.

K/V are contiguous bf16 ``[B, Hkv, L, D]``. Decode passes ``enable_gqa=True``, so SDPA reads each
KV head once, like kvlab (expanding K/V to the query heads would quadruple its bytes). Prefill is
bound by arithmetic, not bytes, so K/V are expanded to the query heads there, which every backend
accepts. A prefill chunk that sees earlier context needs a causal mask aligned to the bottom right
(query ``i`` of ``Lq`` sees keys ``<= L − Lq + i``): torch's ``causal_lower_right`` bias; a chunk
starting at position 0 uses ``is_causal=True``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

from kvlab.bench.context import SdpaBaselines
from kvlab.bench.measure import time_graph_us


@contextlib.contextmanager
def _only(backend: str | None) -> Iterator[None]:
    if backend is None:
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([getattr(SDPBackend, backend)]):
        yield


class SdpaShape:
    """The SDPA call of one case: queries, dense K/V copies (rotated past the L2), the mask."""

    def __init__(self, queries: list[torch.Tensor], keys: torch.Tensor, values: torch.Tensor,
                 query_len: int, num_q_heads: int, sets: int):
        b, hkv, length, d = keys.shape
        self.shape = (b * query_len, num_q_heads, d)
        self.query_len = query_len
        group = num_q_heads // hkv
        prefill = query_len > 1
        if prefill:  # bound by arithmetic: expanded heads, no GQA flag needed by any backend
            keys, values = keys.repeat_interleave(group, dim=1), values.repeat_interleave(group, dim=1)
        self.kv = [(keys, values)] + [(keys.clone(), values.clone()) for _ in range(sets - 1)]
        self.qs = [q.view(b, query_len, num_q_heads, d).transpose(1, 2) for q in queries[:sets]]
        self.gqa = not prefill
        self.mask = None
        self.is_causal = False
        if prefill and query_len == length:
            self.is_causal = True
        elif prefill:
            from torch.nn.attention.bias import causal_lower_right

            self.mask = causal_lower_right(query_len, length)

    def call(self, s: int) -> torch.Tensor:
        import torch.nn.functional as F

        k, v = self.kv[s]
        kwargs = dict(attn_mask=self.mask, is_causal=self.is_causal)
        if self.gqa:
            kwargs["enable_gqa"] = True
        return F.scaled_dot_product_attention(self.qs[s], k, v, **kwargs)

    def packed(self, out: torch.Tensor) -> torch.Tensor:
        """SDPA's ``[B, H, Lq, D]`` output as the kernel's ``[tokens, H, D]``."""
        return out.transpose(1, 2).reshape(self.shape)

    def default_backend(self) -> str:
        """The backend torch's default dispatch runs for this call (lower-case enum name)."""
        from torch.nn.attention import SDPBackend

        q, (k, v) = self.qs[0], self.kv[0]
        try:
            if self.mask is not None:
                from torch.backends.cuda import (
                    SDPAParams,
                    can_use_efficient_attention,
                    can_use_flash_attention,
                )

                params = SDPAParams(q, k, v, None, 0.0, False, False)
                if can_use_flash_attention(params):
                    return "flash_attention"
                return "efficient_attention" if can_use_efficient_attention(params) else "math"
            choice = torch._fused_sdp_choice(q, k, v, None, 0.0, self.is_causal, scale=None,
                                             enable_gqa=self.gqa)
            return SDPBackend(choice).name.lower()
        except (RuntimeError, TypeError, ValueError):
            return "unknown"


def time_sdpa(shape: SdpaShape, backend: str | None, repeats: int) -> tuple[float, torch.Tensor] | None:
    """Median µs of one SDPA call under ``backend`` (``None``: default dispatch) and its first output,
    or ``None`` when that backend refuses the shape."""
    try:
        with _only(backend):
            out = shape.call(0)
        torch.cuda.synchronize()
    except RuntimeError:
        return None

    def launch(s: int) -> Callable[[], object]:
        def fn():
            with _only(backend):
                return shape.call(s)
        return fn

    us = time_graph_us([launch(s) for s in range(len(shape.kv))], repeats)
    return us, shape.packed(out)


def sdpa_baselines(shape: SdpaShape, repeats: int
                   ) -> tuple[SdpaBaselines, dict[str, tuple[float, torch.Tensor]]]:
    """Both SDPA baselines of a shape, and per baseline name its (µs, output) for the SDPA rows."""
    measured = {}
    default = time_sdpa(shape, None, repeats)
    if default is not None:
        measured[f"default-{shape.default_backend()}"] = default
    flash = time_sdpa(shape, "FLASH_ATTENTION", repeats)
    if flash is not None:
        measured["flash"] = flash
    base = SdpaBaselines(default_us=None if default is None else default[0],
                         default_backend=shape.default_backend() if default is not None else "",
                         flash_us=None if flash is None else flash[0])
    return base, measured
