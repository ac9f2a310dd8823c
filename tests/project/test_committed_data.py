"""Checks that pin committed data (stored benches, heads' manifests, learning curves), kept apart from the code's
tests: they fail when data is re-recorded, not when code breaks. Each says what to update. Run by scripts/soak.sh."""

from __future__ import annotations

import json

import pytest

from specviz.core.measure import Provenance
from specviz.core.paths import BENCH_DIR
from specviz.heads import eagle, eagle3, hydra, medusa, store
from specviz.training.kinds import TRAINERS
from specviz.tuning import learning

pytestmark = pytest.mark.soak

RE_RECORD = "re-recorded? update this pin in tests/project/test_committed_data.py"


def test_the_loads_the_review_found_are_flagged():
    """The stored benches measured under load say so (their load is in their provenance)."""
    for name, load in [
        ("prompt-kinds.json", 2.8),
        ("batched-batch-2026-12-01.json", 2.9),
        ("specbench-2026-12-01.json", 4.65),
    ]:
        p = Provenance.from_dict(json.loads((BENCH_DIR / name).read_text())["provenance"])
        assert p.load == load and "under load" in p.describe(), f"{name}: {RE_RECORD}"
    quiet = Provenance.from_dict(
        json.loads((BENCH_DIR / "specbench-lineage-copy-2026-12-01.json").read_text())["provenance"]
    )
    assert "under load" not in quiet.describe(), RE_RECORD


@pytest.mark.parametrize("kind", ["eagle", "eagle3", "medusa", "hydra"])
def test_the_committed_heads_record_their_positions(kind):
    """The positions each committed head was trained on, as its config recorded them (EAGLE-3's has none)."""
    files = {"eagle": eagle.KIND, "eagle3": eagle3.KIND, "medusa": medusa.KIND, "hydra": hydra.KIND}[kind]
    manifest = store.read_manifest(TRAINERS[kind].models, files)  # type: ignore[attr-defined]
    assert manifest["positions"] in (783137, 291334, None), f"{kind}: {manifest['positions']}; {RE_RECORD}"


def test_the_shipped_learning_records_were_measured_on_a_xeon():
    rows = learning.experiment_rows()
    assert all(r.where is not None and "Xeon" in r.where.cpu for r in rows), RE_RECORD


def test_what_data_buys_has_a_checkpoint_per_shipped_eagle_head():
    """The page's head-by-head bars: at least three EAGLE-2 checkpoints are shipped with their curves."""
    assert len(learning.eagle_checkpoints(learning.curves(), learning.experiment_rows())) >= 3, RE_RECORD
