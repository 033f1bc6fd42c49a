"""Split-K decode whose merge kernel is a programmatic dependent (Hopper and later).

Every attention program lets the merge launch as soon as it starts, so the merge's programs may be
resident long before any partial exists: each must wait (``griddepcontrol.wait``) before it reads
one. A merge that read too early would mix stale partials (here: the NaN the workspace is poisoned
with, or the previous replay's values) into the output. So every check poisons the partials and the
output first, then compares the result bit for bit with the merge launched after the attention
kernel, and with the float64 reference. The CUDA-graph check replays one captured call over
changing queries: a replay that raced would show the previous replay's answer.
"""

from __future__ import annotations

import pytest
import torch

import kvlab
from kvlab import relative_error
from kvlab.kernels import prepare_paged_attention
from kvlab.kernels.dependent_launch import overlaps_dependent_launches
from kvlab.kernels.lowbit_attention_call import prepare_lowbit_call
from kvlab.reference import paged_attention_reference

from .conftest import kernel_tolerance, poisoned
from .test_fused_split_merge import _lengths
from .test_lowbit_kernels import _example as _lowbit_example
from .test_lowbit_kernels import _tolerances as _lowbit_tolerances
from .test_paged_attention import _example

SCHEMES = ["bfloat16", "fp8", "int8_per_token_head", "fp8_per_token_head"]


def _needs_dependent_launches(target) -> None:
    if not target.large:
        pytest.skip("dependent launches exist on the GPU only")
    if not overlaps_dependent_launches(target.device.index or 0):
        pytest.skip("programmatic dependent launches need compute capability 9.0 or later")


def _run_poisoned(call, out) -> torch.Tensor:
    launch = call._launch
    for t in (out, launch.part_acc, launch.part_stat):
        t.copy_(poisoned(t.shape, t.dtype, t.device))
    return call.run().clone()


def _both_ways(call, out) -> tuple[torch.Tensor, torch.Tensor]:
    """The output with the merge as a dependent, then with the merge launched after the kernel."""
    call._launch.dependent_merge = True
    assert call._launch.merges_as_dependent()
    assert call._launch.kernel_consts()["LAUNCH_DEPENDENTS"] is True
    dependent = _run_poisoned(call, out)
    call._launch.dependent_merge = False
    after = _run_poisoned(call, out)
    return dependent, after


def test_interpreter_never_launches_dependents(target):
    """CPU tensors and the interpreter: the merge runs after the attention kernel, whatever is asked."""
    if target.large:
        pytest.skip("the interpreter's rule")
    ex = _example(target, 0, [1, 1], [40, 70], hq=4, hkv=2, d=32, scheme="bfloat16")
    call = prepare_paged_attention(ex.query, ex.cache, ex.batch, num_splits=3)
    assert call._launch.dependent_merge is False and not call._launch.merges_as_dependent()
    assert call._launch.kernel_consts()["LAUNCH_DEPENDENTS"] is False
    assert not overlaps_dependent_launches(0)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_dependent_merge_matches_the_merge_after(target, seed, scheme):
    _needs_dependent_launches(target)
    slens = _lengths(target, seed, 4)
    ex = _example(target, seed, [1] * len(slens), slens, hq=32, hkv=8, d=128, scheme=scheme)
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], 128), q.dtype, target.device)
    call = prepare_paged_attention(q, ex.cache, ex.batch, out=out, num_splits=8)
    assert call.tiling.num_splits == 8
    dependent, after = _both_ways(call, out)
    assert torch.isfinite(dependent).all(), "a row was merged from poisoned partials or not at all"
    assert torch.equal(dependent, after)
    ref = paged_attention_reference(q, ex.cache, ex.batch)
    assert relative_error(dependent, ref) <= kernel_tolerance(q.dtype, scheme)


def test_dependent_merge_in_graph_replays(target, seed):
    """A captured split decode replayed over four different queries: each replay's output is the
    answer for its own query (bit for bit the merge-after result), never the previous one's."""
    _needs_dependent_launches(target)
    slens = _lengths(target, seed, 3)
    ex = _example(target, seed, [1] * 3, slens, hq=32, hkv=8, d=128, scheme="int8_per_token_head")
    q = ex.query.clone()
    out = poisoned((q.shape[0], q.shape[1], 128), q.dtype, target.device)
    call = prepare_paged_attention(q, ex.cache, ex.batch, out=out, num_splits=16)
    call._launch.dependent_merge = True
    call.run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call.run()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for _ in range(4):
        q.copy_(torch.randn(q.shape, generator=gen, device="cuda").to(q.dtype))
        out.copy_(poisoned(out.shape, out.dtype, out.device))
        graph.replay()
        torch.cuda.synchronize()
        replayed = out.clone()
        call._launch.dependent_merge = False
        want = _run_poisoned(call, out)
        call._launch.dependent_merge = True
        assert torch.isfinite(replayed).all()
        assert torch.equal(replayed, want)


@pytest.mark.parametrize("scheme", ["int4_per_token_head", "kivi2"])
def test_low_bit_decode_dependent_merge(target, seed, scheme):
    """The low-bit kernels share the split launch: split, both merges agree bit for bit."""
    _needs_dependent_launches(target)
    slens = _lengths(target, seed, 3)
    ex = _lowbit_example(target, seed, [1] * 3, slens, scheme, hq=32, hkv=8, d=128)
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], 128), q.dtype, target.device)
    call = prepare_lowbit_call(q, ex.cache, ex.batch, out=out, num_splits=8)
    dependent, after = _both_ways(call, out)
    assert torch.isfinite(dependent).all()
    assert torch.equal(dependent, after)
    ref = kvlab.attention(q, ex.cache, ex.batch)  # float64 over the dequantized low-bit cache
    assert relative_error(dependent, ref) <= _lowbit_tolerances(scheme, q.dtype)[0]
