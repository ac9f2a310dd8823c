"""A training run's checkpoint and progress file.

`checkpoint.safetensors` holds the head's trainable weights, AdamW's moments and step counts, and, in its
metadata, the run's state as JSON (its position in the data stream, the learning curve, the settings it was
started with): one file, renamed into place, so a killed run leaves either the last checkpoint or the new one,
never half of each. `progress.json` beside it is for people: where the run is, how fast, and its last numbers.
Nothing is pickled.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from specviz.heads import store

WEIGHTS, PROGRESS = "checkpoint.safetensors", "progress.json"
FORMAT = "specviz-checkpoint/1"


def save(
    folder: Path, head: nn.Module, opt: torch.optim.Optimizer, state: dict, best: dict[str, torch.Tensor] | None = None
) -> None:
    """Weights, AdamW's state per parameter and the run's state (and the best evaluated weights, for --keep-best),
    in one file written atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {f"best.{k}": v.detach().contiguous() for k, v in (best or {}).items()}
    for name, p in head.named_parameters():
        tensors[f"w.{name}"] = p.detach().contiguous()
        for key, value in opt.state.get(p, {}).items():  # step, exp_avg, exp_avg_sq
            tensors[f"{key}.{name}"] = value.detach().reshape(value.shape or (1,)).contiguous()
    store.write_tensors(folder / WEIGHTS, tensors, FORMAT, {"state": json.dumps(state)})


def load(folder: Path, head: nn.Module, opt: torch.optim.Optimizer) -> dict | None:
    """Restore a checkpoint into head and optimiser and return the run's state; None when there is none."""
    from safetensors import safe_open

    path = folder / WEIGHTS
    if not path.is_file():
        return None
    with safe_open(str(path), "pt") as f:
        meta = f.metadata() or {}
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path} is not a training checkpoint; delete it or use another --checkpoint.")
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not a mapping)
    with torch.no_grad():
        for name, p in head.named_parameters():
            p.copy_(tensors[f"w.{name}"])
            if f"exp_avg.{name}" in tensors:
                opt.state[p] = {
                    "step": tensors[f"step.{name}"].reshape(()),
                    "exp_avg": tensors[f"exp_avg.{name}"],
                    "exp_avg_sq": tensors[f"exp_avg_sq.{name}"],
                }
    return json.loads(meta["state"])


def best_weights(folder: Path) -> dict[str, torch.Tensor] | None:
    """The best evaluated weights a checkpoint keeps (--keep-best), by parameter name; None when it keeps none."""
    from safetensors import safe_open

    path = folder / WEIGHTS
    if not path.is_file():
        return None
    with safe_open(str(path), "pt") as f:
        best = {k[len("best.") :]: f.get_tensor(k) for k in f.keys() if k.startswith("best.")}  # noqa: SIM118
    return best or None


def write_progress(folder: Path, progress: dict) -> None:
    """progress.json beside the checkpoint (atomically; a reader never sees half of it)."""
    folder.mkdir(parents=True, exist_ok=True)
    store.write_json(folder / PROGRESS, progress)


STAGE_KEYS = ("positions", "curve_start", "curve", "command", "data", "trainer", "provenance")


def earlier_stages(init: str) -> list[dict]:
    """The runs a head continued from `init` went through before this one, oldest first: the init folder's own
    earlier stages, then that folder's run (positions, curve, command, data, where), so a head trained in several
    stages keeps one learning curve. Empty when `init` is unset or its folder has no readable manifest."""
    path = Path(init) / "manifest.json" if init else None
    if path is None or not path.is_file() or path.stat().st_size > 1 << 20:
        return []
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(manifest, dict) or "curve" not in manifest:
        return []
    own = {k: manifest[k] for k in STAGE_KEYS if k in manifest}
    own["data"] = {k: v for k, v in (own.get("data") or {}).items() if k != "manifest"} | {
        "manifest": (manifest.get("data") or {}).get("manifest")
    }
    return [*(manifest.get("earlier") or []), own]
