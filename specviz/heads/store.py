"""One place for a head's folder: its weights (safetensors), config.json, manifest.json (the data it was trained on,
the positions it saw, its learning curve, where it stopped and on what machine) and calibration.json.

Writing is atomic per file (a `.partial` renamed into place), so a killed save never leaves half a file. Reading
goes through heads.files, which treats every file of a folder as untrusted input (size bounds, schemas, ids in
range); the head modules say what their config holds, the store does the rest the same way for every head.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from specviz.core.schema import SchemaError, read_json
from specviz.heads.files import MAX_CONFIG_BYTES, Kind, is_file, read_config, read_table, stamp

C = TypeVar("C")

CONFIG, MANIFEST, CALIBRATION = "config.json", "manifest.json", "calibration.json"


def write_atomic(path: Path, write: Callable[[Path], object]) -> Path:
    """Call write(tmp) on a sibling `.partial` file, then rename it over `path`."""
    tmp = path.with_name(path.name + ".partial")
    write(tmp)
    tmp.replace(path)
    return path


def write_json(path: Path, data: Any) -> Path:
    """`data` as indented JSON at `path`, atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8"))


def write_tensors(path: Path, tensors: dict[str, torch.Tensor], fmt: str, meta: dict[str, str] | None = None) -> Path:
    """A safetensors file (never a pickle), atomically, its format (and any other text) in the metadata."""
    from safetensors.torch import save_file

    return write_atomic(path, lambda tmp: save_file(tensors, str(tmp), metadata={"format": fmt, **(meta or {})}))


def tensors(
    state: dict[str, torch.Tensor],
    dtype: torch.dtype | None = None,
    skip: tuple[str, ...] = (),
    ids: tuple[str, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """What a head stores: its state (cast to dtype, names starting with `skip` left out) and a named id map."""
    out = {k: v.detach().to(dtype or v.dtype).contiguous() for k, v in state.items() if not k.startswith(skip)}
    if ids is not None:
        out[ids[0]] = ids[1].to(torch.int32).contiguous()
    return out


def save(
    folder: str | Path,
    weights: tuple[str, dict[str, torch.Tensor]],
    fmt: str,
    config: dict,
    manifest: dict | None = None,
) -> Path:
    """Write a head folder: weights (file name, tensors), config.json and, when given, manifest.json."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    write_tensors(out / weights[0], weights[1], fmt)
    write_json(out / CONFIG, config)
    if manifest is not None:
        write_json(out / MANIFEST, manifest)
    return out


def save_drafter(
    head: Any, folder: str | Path, dtype: torch.dtype = torch.bfloat16, manifest: dict | None = None
) -> Path:
    """A feature drafter's folder (EAGLE's head, DFlash's block drafter): its state in half precision by default
    (the rotary tables, rebuilt on load, left out; its draft vocabulary's id map where it drafts over part of the
    vocabulary) as model.safetensors, its config.json and, when given, the manifest."""
    ids = None if head.full_vocab else ("draft_ids", head.draft_ids)
    weights = tensors(head.state_dict(), dtype, skip=("rotary.",), ids=ids)
    return save(folder, ("model.safetensors", weights), head.config.format, asdict(head.config), manifest)


def cached(lm: Any, name: str, folder: str | Path | None, default: Path, load: Callable[..., Any]) -> Any:
    """The trained head of kind `name` in `folder` (else `default`) for `lm`: `load(folder, hf_config)`, moved to
    the model's device, once per (folder, file time) in `lm.resources` (a retrained file loads anew)."""
    where = Path(folder or default).expanduser().resolve()
    version = stamp(where / "model.safetensors")
    key = (name, str(where), version, str(lm.device))
    return lm.resources.get(key, lambda: load(where, lm.hf.config).to(lm.device))


def config(
    folder: str | Path, cls: type[C], specs: dict[str, Any], kind: Kind, missing: str, extra: Callable | None = None
) -> C:
    """A head folder's config.json as `cls`, checked (heads.files.read_config); kind.error(missing) without one."""
    path = Path(folder) / CONFIG
    if not is_file(path):
        raise kind.error(missing)
    return read_config(path, cls, specs, kind, extra)


def load_state(module: nn.Module, state: dict[str, torch.Tensor], path: Path, kind: Kind, rebuilt: str = "") -> None:
    """Every stored tensor into `module`, and every tensor of it from the file except those named `rebuilt…`
    (rebuilt from the config, as RoPE's frequencies are); kind.error with one sentence otherwise."""
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # a tensor of the wrong shape
        said = " ".join(str(exc).split())  # torch's message spans lines; the error is one sentence
        raise kind.error(f"{path} does not match its config ({said[:160]}).") from None
    missing = [k for k in missing if not (rebuilt and k.startswith(rebuilt))]
    if missing or unexpected:
        raise kind.error(f"{path} does not match its config (missing {missing[:3]}, unexpected {unexpected[:3]}).")


def write_calibration(folder: Path, acc: list[list[float]], positions: int, note: str, where: dict) -> Path:
    """The rank accuracies acc[depth][rank] measured on held-out data, as calibration.json beside the head."""
    body = {"accuracy": acc, "top1": [r[0] for r in acc], "positions": positions, "ranks": len(acc[0]) if acc else 0}
    return write_json(folder / CALIBRATION, body | {"note": note, "provenance": where})


def read_calibration(folder: str | Path, kind: Kind, spec: Any, command: str) -> list[list[float]]:
    """The rank accuracies acc[depth][rank] of calibration.json, checked by `spec`; kind.error naming `command`."""
    path = Path(folder) / CALIBRATION
    if not is_file(path):
        raise kind.error(f"No calibration at {path}; run: {command}")
    acc = read_table(path, spec, "accuracy", kind, f"rerun: {command}")
    return [[float(a) for a in row] for row in acc]


def read_manifest(folder: str | Path, kind: Kind) -> dict:
    """What a head folder says about its training: its manifest.json. A folder saved before manifests existed
    (its record in config.json) is refused: the committed heads were migrated once."""
    path = Path(folder) / MANIFEST
    if not is_file(path):
        raise kind.error(f"{path} is missing (a head saved before manifests had one, or no head); {kind.hint}.")
    try:
        data = read_json(path, MAX_CONFIG_BYTES, "a head manifest")
        if not isinstance(data, dict) or not isinstance(data.get("curve", []), list):
            raise SchemaError(f"{path} is not a manifest.")
    except SchemaError as exc:
        raise kind.error(f"{str(exc).rstrip('.')}; {kind.hint}.") from None
    return data
