"""The packaged SmolLM2 model, loaded once per test session; tests that need it skip without it."""

import pytest

from kvlab.lm import INSTALL_HINT, find_model_file


@pytest.fixture(scope="session")
def model():
    if find_model_file() is None:
        pytest.skip(f"SmolLM2 model file not installed ({INSTALL_HINT})")
    from kvlab.lm import load_model

    return load_model()


@pytest.fixture(scope="session")
def corpus_ids(model):
    from kvlab.lm.corpus import corpus_text

    return model.encode(corpus_text())
