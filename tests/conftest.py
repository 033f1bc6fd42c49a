"""Shared fixtures: fresh random inputs on every run, reproducible per test.

Each run draws a base seed (printed in pytest's header); every test gets ``base + crc32(test id)``.
A failing test that drew random inputs prints both seeds in its report; to replay it, set
``KVLAB_TEST_SEED`` to the printed base seed.
"""

from __future__ import annotations

import os
import random
import zlib

import pytest
import torch

_BASE_SEED = int(os.environ.get("KVLAB_TEST_SEED", random.SystemRandom().randrange(2**31)))


def pytest_report_header(config):
    return f"kvlab random inputs: KVLAB_TEST_SEED={_BASE_SEED}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Name the seeds in the report of a failed test that used random inputs."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and "seed" in getattr(item, "fixturenames", ()):
        test_seed = (_BASE_SEED + zlib.crc32(item.nodeid.encode())) % 2**31
        message = f"replay with KVLAB_TEST_SEED={_BASE_SEED} (this test's seed: {test_seed})"
        report.sections.append(("kvlab random inputs", message))


@pytest.fixture
def seed(request) -> int:
    """A per-test seed: fresh each run, reproducible with KVLAB_TEST_SEED."""
    return (_BASE_SEED + zlib.crc32(request.node.nodeid.encode())) % 2**31


@pytest.fixture
def gen(seed) -> torch.Generator:
    """A torch CPU generator seeded with :func:`seed`."""
    return torch.Generator().manual_seed(seed)
