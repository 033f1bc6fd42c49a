"""Shared fixtures: fresh random inputs on every run, reproducible per test.

Each run draws a base seed (printed in pytest's header); every test gets ``base + crc32(test id)``.
A failing test that drew random inputs prints both seeds in its report; to replay it, set
``KVLAB_TEST_SEED`` to the printed base seed.

``KVLAB_TEST_SEEDS=0-49`` (or ``3,5,7``) runs every test that draws random inputs once per base seed
in that list, in one pytest process; each run is named ``[KVLAB_TEST_SEED=N]`` and uses exactly the
inputs of a plain run with ``KVLAB_TEST_SEED=N``.
"""

from __future__ import annotations

import os
import random
import re
import zlib

import pytest
import torch

# Exercise checks stop a learner's case after 10 s (an endless loop must not hang a class). The suite runs
# the shipped solutions on a busy 2-core machine, where a correct case can take longer: give them room.
# Tests of the limit itself set their own (kvlab.exercises.set_time_limit); kernels started by the
# notebook and browser tests inherit this.
os.environ.setdefault("KVLAB_CASE_TIME_LIMIT", "120")

_BASE_SEED = int(os.environ.get("KVLAB_TEST_SEED", random.SystemRandom().randrange(2**31)))
_SWEEP_ID = re.compile(r"-?KVLAB_TEST_SEED=\d+")


def _seed_list(text: str) -> list[int]:
    """``"0-49"`` → 0 … 49; ``"3,5,7"`` → [3, 5, 7]; ranges and single seeds may be mixed."""
    seeds = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        seeds += range(int(lo), int(hi) + 1) if sep else [int(lo)]
    return seeds


_SWEEP = _seed_list(os.environ.get("KVLAB_TEST_SEEDS", ""))


def pytest_report_header(config):
    if _SWEEP:
        return f"kvlab random inputs: KVLAB_TEST_SEEDS={os.environ['KVLAB_TEST_SEEDS']} ({len(_SWEEP)} seeds)"
    return f"kvlab random inputs: KVLAB_TEST_SEED={_BASE_SEED}"


def pytest_generate_tests(metafunc):
    if _SWEEP and "seed" in metafunc.fixturenames:
        metafunc.parametrize("base_seed", _SWEEP, ids=lambda s: f"KVLAB_TEST_SEED={s}")


def _test_seed(base: int, nodeid: str) -> int:
    """The seed of one test: the base plus the CRC of its id (without a sweep's ``KVLAB_TEST_SEED=N``)."""
    plain = _SWEEP_ID.sub("", nodeid).replace("[-", "[").replace("[]", "")
    return (base + zlib.crc32(plain.encode())) % 2**31


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Name the seeds in the report of a failed test that used random inputs."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and "seed" in getattr(item, "fixturenames", ()):
        callspec = getattr(item, "callspec", None)
        base = callspec.params.get("base_seed", _BASE_SEED) if callspec else _BASE_SEED
        message = f"replay with KVLAB_TEST_SEED={base} (this test's seed: {_test_seed(base, item.nodeid)})"
        report.sections.append(("kvlab random inputs", message))


@pytest.fixture
def base_seed() -> int:
    """The run's base seed (one of ``KVLAB_TEST_SEEDS`` in a sweep)."""
    return _BASE_SEED


@pytest.fixture
def seed(request, base_seed) -> int:
    """A per-test seed: fresh each run, reproducible with KVLAB_TEST_SEED."""
    return _test_seed(base_seed, request.node.nodeid)


@pytest.fixture
def gen(seed) -> torch.Generator:
    """A torch CPU generator seeded with :func:`seed`."""
    return torch.Generator().manual_seed(seed)
