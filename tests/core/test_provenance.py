"""Every committed measurement says where and when it was measured."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pytest

from specviz.core.measure import Provenance

MODELS = Path(__file__).resolve().parents[2] / "models"
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
    assert "the computer running specviz" not in p.describe()
    assert "unrecorded" not in p.describe() and "unknown" not in p.describe()  # it says what is known


def test_a_record_without_the_cpu_model_names_what_is_known():
    p = Provenance("unrecorded CPU", 2, "cpu · float32 · onednn", "2026-11-30T17:16:05+00:00", "5f02afb", 2.0, "2.13")
    assert (
        p.describe(flag_load=False) == "measured on a 2-core CPU with torch 2.13, cpu · float32 · onednn, on 2026-11-30"
    )
    assert replace(p, cpu="", memory_gb=23.5, torch="").machine == "a 2-core CPU (23.5 GiB)"


BENCH = Path(__file__).resolve().parents[2] / "docs" / "bench"
STORED = sorted([*MEASURED, *BENCH.glob("*.json")])


def test_two_machines_with_the_same_cpu_string_are_told_apart():
    """Every stored file says 'Intel(R) Xeon(R) Processor', 2 cores: only the machine id can say it is this one."""
    from specviz.core import measure

    here = measure.provenance("cpu · float32 · onednn")
    assert here.machine_id and here.machine_id == measure.machine_id()  # stable within a machine
    assert "the computer running specviz" in here.describe(here)
    assert "this machine" not in here.describe(here)  # a visitor's screen is not the machine measured on
    twin = replace(here, machine_id="0" * 16)  # same CPU string, cores, memory and device: another VM
    assert not twin.same_machine(here) and "the computer running specviz" not in twin.describe(here)
    unknown = replace(here, machine_id="")  # a record without one (every file from before) is never this machine
    assert not unknown.same_machine(unknown) and "the computer running specviz" not in unknown.describe(here)
    other = "avx2 avx512f" if here.cpu_flags == "avx2" else "avx2"  # whatever this CPU has, another set
    assert "the computer running specviz" not in replace(here, cpu_flags=other).describe(
        here
    )  # same id, other CPU: a clone
    assert Provenance.from_dict(here.to_dict()) == here


def test_the_machine_id_is_a_hash_or_nothing(tmp_path):
    from specviz.core import measure

    raw = tmp_path / "machine-id"
    raw.write_text("3d1219aa00000000000000000000beef\n")
    hashed = measure.machine_id((str(tmp_path / "absent"), str(raw)))
    assert len(hashed) == 16 and "3d1219" not in hashed and hashed == measure.machine_id((str(raw),))
    assert measure.machine_id((str(tmp_path / "absent"),)) == ""
    assert set(measure.cpu_flags().split()) <= set(measure.SPEED_FLAGS)
    assert measure.memory_gb() > 0


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.name)
def test_a_stored_figure_says_where_and_flags_a_load(path: Path):
    """Every stored record still loads; one measured with the cores busy says so wherever it is described."""
    from specviz.core.measure import contended, provenance

    data = json.loads(path.read_text())
    p = Provenance.from_dict(data["provenance"])
    elsewhere = replace(provenance(p.device), machine_id="0" * 16)  # someone else's screen (a record may carry an id)
    text = p.describe(elsewhere)
    assert "the computer running specviz" not in text
    assert ("under load" in text) == (p.load >= p.cores or contended(p))
    if p.load >= p.cores:
        assert f"load average {p.load:g} on {p.cores} cores" in text
