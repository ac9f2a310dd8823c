"""Every committed head, sweep and trace loads through today's readers, and none needs a shim for an older layout
(migrated once): each head folder has its manifest.json, Medusa's sweep counts total_tokens (the root included), no
stored step keeps the old phase name draft_s, and no stored method setting uses an old option name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from specviz.core.paths import MODELS, REPO
from specviz.core.trace import TRACE_FORMAT, Trace
from specviz.heads import draft, eagle, eagle3, hydra, medusa, store

KINDS = {k.fmt: k for k in (eagle.KIND, eagle3.KIND, medusa.KIND, hydra.KIND, draft.KIND)}
HEADS = sorted(p.parent for p in MODELS.rglob("config.json"))
SWEEPS = [MODELS / "medusa" / "sweep.json", MODELS / "eagle" / "live_sweep.json", MODELS / "draft" / "gamma_sweep.json"]
PACK = REPO / "docs" / "lesson" / "pack.json"


def traces_in(data: object) -> Iterator[dict]:
    """Every stored trace (a JSON object of the trace format) anywhere inside a JSON document."""
    if isinstance(data, dict):
        if data.get("format") == TRACE_FORMAT:
            yield data
            return
        data = list(data.values())
    if isinstance(data, list):
        for item in data:
            yield from traces_in(item)


def test_there_are_heads_to_check():
    assert {p.name for p in HEADS} >= {"eagle", "eagle3", "medusa", "hydra", "draft"}


@pytest.mark.parametrize("folder", HEADS, ids=lambda p: str(p.relative_to(MODELS)))
def test_every_head_folder_has_its_manifest(folder: Path):
    """store.read_manifest reads manifest.json itself, not a record rebuilt from config.json (the old layout)."""
    kind = KINDS[json.loads((folder / "config.json").read_text())["format"]]
    assert (folder / "manifest.json").is_file(), f"{folder} has no manifest.json"
    manifest = store.read_manifest(folder, kind)
    assert isinstance(manifest.get("curve"), list)


@pytest.mark.full  # about 5 s: the heads' weights
@pytest.mark.parametrize("folder", [p for p in HEADS if p.name in ("eagle", "eagle3") or p.parent.name == "data"])
def test_the_eagle_heads_load(folder: Path):
    fmt = json.loads((folder / "config.json").read_text())["format"]
    head = (eagle3.load_head if fmt == eagle3.KIND.fmt else eagle.load_head)(folder)
    assert sum(p.numel() for p in head.parameters()) > 0


def test_the_sweeps_count_total_tokens():
    medusa_sweep = json.loads(SWEEPS[0].read_text())
    assert "budgets" not in medusa_sweep and medusa_sweep["total_tokens"][0] == 1  # the root alone: plain decoding
    for path in SWEEPS:
        assert isinstance(json.loads(path.read_text()).get("provenance"), dict), path


@pytest.mark.full  # about 1 s: plotly
def test_the_stored_sweeps_draw():
    from specviz.output.viz import stored

    assert stored.swept_sizes(json.loads(SWEEPS[0].read_text())) == json.loads(SWEEPS[0].read_text())["total_tokens"]
    assert "medusa_budget" in stored.stored_figures()


def test_the_stored_traces_load_with_todays_names():
    """The lesson's recorded runs: every trace rebuilds, no step keeps draft_s, no setting an old option name."""
    pack = json.loads(PACK.read_text(encoding="utf-8"))
    traces = list(traces_in(pack))
    assert len(traces) >= 5
    for data in traces:
        assert not any("draft_s" in step for step in data["steps"])
        assert "budget" not in (data.get("config") or {})
        Trace.from_dict(data)
    assert '"medusa.budget"' not in PACK.read_text(encoding="utf-8")


@pytest.mark.real_model
def test_every_committed_head_loads_on_the_real_model(real_lm):
    """Medusa's, Hydra's and the draft's loaders need the model they were trained on."""
    assert medusa.load_heads(real_lm, MODELS / "medusa").cfg.num_heads > 0
    assert hydra.load_heads(real_lm, MODELS / "hydra").cfg.num_heads > 0
    assert draft.load_draft(real_lm, MODELS / "draft") is not None
