"""Every committed measurement says where and when it was measured."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from specviz.core.measure import Provenance

MODELS = Path(__file__).resolve().parents[1] / "models"
# head configs describe weights, not measurements; everything else under models/ is a measured figure
MEASURED = sorted(p for p in MODELS.rglob("*.json") if p.name not in ("config.json", "manifest.json"))


def test_there_are_committed_measurements():
    assert len(MEASURED) >= 4, MEASURED


@pytest.mark.parametrize("path", MEASURED, ids=lambda p: str(p.relative_to(MODELS)))
def test_committed_measurement_has_provenance(path: Path):
    data = json.loads(path.read_text())
    assert "provenance" in data, f"{path} has no provenance record"
    p = Provenance.from_dict(data["provenance"])
    assert p.cpu and p.cores >= 1 and p.device and p.commit
    assert dt.datetime.fromisoformat(p.date).year >= 2026
    assert "this machine" not in p.describe()
