"""``kvlab info``: versions, the device, and how Triton runs here."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def collect() -> dict[str, str]:
    """Environment facts as a flat ``{name: value}`` mapping."""
    import torch

    import kvlab

    facts = {
        "kvlab": kvlab.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "torch": torch.__version__,
        "triton": _version("triton"),
        "numpy": _version("numpy"),
        "plotly": _version("plotly"),
        "ipywidgets": _version("ipywidgets"),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        facts["device"] = (f"cuda: {props.name}, {props.total_memory / 2**30:.1f} GiB, "
                           f"{props.multi_processor_count} SMs, sm_{props.major}{props.minor}")
    else:
        facts["device"] = f"cpu ({torch.get_num_threads()} threads), no CUDA GPU"
    try:
        from kvlab.kernels import runtime

        facts["triton_mode"] = (
            "interpreter (TRITON_INTERPRET=1, kernels run on CPU tensors; seconds per call)"
            if runtime.INTERPRET
            else "compiled (NVIDIA GPU)"
        )
    except (ImportError, RuntimeError) as exc:
        facts["triton_mode"] = f"unavailable: {exc}"
    return facts


def run(args: argparse.Namespace) -> int:
    facts = collect()
    if args.json:
        print(json.dumps(facts, indent=2))
    else:
        width = max(map(len, facts))
        for key, value in facts.items():
            print(f"{key:<{width}}  {value}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="versions, device and Triton mode")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=run)
