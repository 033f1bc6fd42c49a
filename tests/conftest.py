"""Shared fixtures: fresh random inputs on every run, reproducible per test.

Each run draws a base seed (printed in pytest's header); every test gets ``base + crc32(test id)``.
To replay a failure, set ``KVLAB_TEST_SEED`` to the printed base seed.
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


@pytest.fixture
def seed(request) -> int:
    """A per-test seed: fresh each run, reproducible with KVLAB_TEST_SEED."""
    return (_BASE_SEED + zlib.crc32(request.node.nodeid.encode())) % 2**31


@pytest.fixture
def gen(seed) -> torch.Generator:
    """A torch CPU generator seeded with :func:`seed`."""
    return torch.Generator().manual_seed(seed)
