"""Read Mamba / gated-DeltaNet state layers from a ``config.json`` (the field names of each family).

======================  =========================================================================
family                  fields read
======================  =========================================================================
gated DeltaNet          ``linear_conv_kernel_dim``, ``linear_num_key_heads``, ``linear_key_head_dim``,
(Qwen3-Next, Qwen3.5)   ``linear_num_value_heads``, ``linear_value_head_dim``
Mamba-2, Nemotron-H     ``mamba_num_heads``, ``mamba_head_dim``, ``ssm_state_size``, ``n_groups``,
                        ``conv_kernel``
Mamba-2, Granite 4.0-H  ``mamba_n_heads``, ``mamba_d_head``, ``mamba_d_state``, ``mamba_n_groups``,
/ Falcon-H1             ``mamba_d_conv``, ``mamba_d_ssm`` (Falcon-H1's inner width)
Mamba-1, Jamba          ``mamba_d_state``, ``mamba_d_conv``, ``mamba_expand`` × ``hidden_size``
======================  =========================================================================

The SSM state dtype is ``mamba_ssm_cache_dtype`` / ``mamba_ssm_dtype`` when the config sets it
(Qwen3.5 / 3.6 configs say ``"mamba_ssm_dtype": "float32"``); otherwise the model dtype (vLLM's
``mamba_ssm_cache_dtype="auto"``: Nemotron-Nano-9B-v2's 672-token attention block, reported in
vLLM issue #24280, is what a bf16 state gives).
"""

from __future__ import annotations

from typing import Any

from kvlab.models.state_layers import StateLayerKV


def _need(cfg: dict[str, Any], keys: tuple[str, ...], why: str, where: str) -> int:
    for key in keys:
        if cfg.get(key) is not None:
            return int(cfg[key])
    raise ValueError(f"{where} is missing {' or '.join(map(repr, keys))} (needed for {why})")


def state_layer(cfg: dict[str, Any], kind: str, name: str, where: str) -> StateLayerKV:
    """The state layer ``name`` of ``kind`` (``mamba1``, ``mamba2``, ``gated_delta_net``)."""
    ssm_dtype = str(cfg.get("mamba_ssm_cache_dtype") or cfg.get("mamba_ssm_dtype") or "auto")
    if kind == "gated_delta_net":
        why = "the gated-DeltaNet state"
        return StateLayerKV(
            name=name,
            kind=kind,
            conv_kernel=_need(cfg, ("linear_conv_kernel_dim",), why, where),
            num_k_heads=_need(cfg, ("linear_num_key_heads",), why, where),
            head_k_dim=_need(cfg, ("linear_key_head_dim",), why, where),
            num_v_heads=_need(cfg, ("linear_num_value_heads",), why, where),
            head_v_dim=_need(cfg, ("linear_value_head_dim",), why, where),
            ssm_dtype=ssm_dtype,
        )
    why = "the Mamba state"
    state = _need(cfg, ("ssm_state_size", "mamba_d_state", "state_size"), why, where)
    conv = _need(cfg, ("conv_kernel", "mamba_d_conv"), why, where)
    if kind == "mamba1":
        inner = cfg.get("mamba_d_ssm") or _need(cfg, ("mamba_expand",), why, where) * _need(
            cfg, ("hidden_size",), why, where
        )
        return StateLayerKV(name, kind, conv_kernel=conv, state_size=state, intermediate_size=int(inner),
                            ssm_dtype=ssm_dtype)
    heads = _need(cfg, ("mamba_num_heads", "mamba_n_heads"), why, where)
    head_dim = _need(cfg, ("mamba_head_dim", "mamba_d_head"), why, where)
    inner = cfg.get("mamba_d_ssm") or heads * head_dim
    return StateLayerKV(
        name,
        kind,
        conv_kernel=conv,
        state_size=state,
        intermediate_size=int(inner),
        n_groups=_need(cfg, ("n_groups", "mamba_n_groups", "mamba_num_groups"), why, where),
        num_heads=heads,
        head_dim=head_dim,
        ssm_dtype=ssm_dtype,
    )
