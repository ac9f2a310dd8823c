"""Every committed trace, head and sweep loads through today's readers, which keep no shim for an older layout
(the files were migrated once): each head folder has its manifest.json, Medusa's sweep counts total_tokens (the
root included), no stored step keeps the old phase name draft_s, no stored setting uses an old option name. A file
in an older layout is refused in one sentence where a person can hand one in (a trace upload or --traces, a head
folder, an option), never read through a rename."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specviz.core.paths import MODELS, REPO
from specviz.core.trace import BUNDLE_FORMAT, TRACE_FORMAT, Trace, TraceError, load_traces
from specviz.heads import dflash, draft, eagle, eagle3, hydra, medusa, store

KINDS = {k.fmt: k for k in (eagle.KIND, eagle3.KIND, medusa.KIND, hydra.KIND, draft.KIND, dflash.KIND)}
HEADS = sorted(p.parent for p in MODELS.rglob("config.json"))
SWEEPS = sorted(MODELS.rglob("*sweep*.json"))
PACK = REPO / "docs" / "lesson" / "pack.json"
# every committed JSON document a trace could be stored in (the lesson's pack, benches, experiments, models)
STORED = sorted(
    p for folder in ("docs", "models", "specviz/data", "tests/data") for p in (REPO / folder).rglob("*.json")
)
OLD_NAMES = {"draft_s", "budget", "budgets", "acceptance"}  # keys of the older layouts, in traces and settings


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


def formats_in(data: object) -> Iterator[str]:
    """Every "format" string anywhere inside a JSON document."""
    if isinstance(data, dict):
        if isinstance(data.get("format"), str):
            yield data["format"]
        data = list(data.values())
    if isinstance(data, list):
        for item in data:
            yield from formats_in(item)


def test_there_are_heads_sweeps_and_traces_to_check():
    assert {p.name for p in HEADS} >= {"eagle", "eagle3", "medusa", "hydra", "draft"}
    assert {p.name for p in SWEEPS} >= {"sweep.json", "live_sweep.json", "gamma_sweep.json", "lookahead_sweep.json"}
    assert PACK in STORED and len(STORED) >= 30


@pytest.mark.parametrize("folder", HEADS, ids=lambda p: str(p.relative_to(MODELS)))
def test_every_head_folder_has_its_manifest(folder: Path):
    """store.read_manifest reads manifest.json itself; a record rebuilt from config.json (the old layout) is gone."""
    kind = KINDS[json.loads((folder / "config.json").read_text())["format"]]
    assert (folder / "manifest.json").is_file(), f"{folder} has no manifest.json"
    manifest = store.read_manifest(folder, kind)
    assert isinstance(manifest.get("curve"), list)


def test_a_head_folder_saved_before_manifests_is_refused_in_one_sentence(tmp_path: Path):
    """The old layout kept the training record in config.json; that folder is now refused, naming the file."""
    old = tmp_path / "medusa"
    old.mkdir()
    shutil.copy(MODELS / "medusa" / "config.json", old / "config.json")
    with pytest.raises(medusa.KIND.error, match=r"manifest\.json is missing .*retrain or restore it from git") as err:
        store.read_manifest(old, medusa.KIND)
    assert "\n" not in str(err.value)


@pytest.mark.full  # about 5 s: the heads' weights
@pytest.mark.parametrize("folder", [p for p in HEADS if p.name in ("eagle", "eagle3") or p.parent.name == "data"])
def test_the_eagle_heads_load(folder: Path):
    fmt = json.loads((folder / "config.json").read_text())["format"]
    head = (eagle3.load_head if fmt == eagle3.KIND.fmt else eagle.load_head)(folder)
    assert sum(p.numel() for p in head.parameters()) > 0


def test_the_sweeps_count_total_tokens():
    medusa_sweep = json.loads((MODELS / "medusa" / "sweep.json").read_text())
    assert "budgets" not in medusa_sweep and medusa_sweep["total_tokens"][0] == 1  # the root alone: plain decoding
    for path in SWEEPS:
        assert isinstance(json.loads(path.read_text()).get("provenance"), dict), path


def test_the_draft_and_lookahead_sweeps_are_read():
    """The sweeps read outside the figures: the trained draft's γ, the acceptance the Lookahead fit prices."""
    from specviz.methods.sps import swept_gamma
    from specviz.tuning import fit

    assert swept_gamma() is not None
    rows = fit.lookahead_rows()
    assert len(rows) >= 10 and all(r["A"] >= 1 for r in rows)


@pytest.mark.full  # about 1 s: plotly
def test_every_stored_sweep_and_bench_draws():
    """Each file the pages draw from draws (stored_figures would skip one of an older format without a word)."""
    from specviz.output.viz import stored

    for path, draw in stored.sources():
        assert draw(json.loads(path.read_text(encoding="utf-8")), None), path
    assert stored.swept_sizes(json.loads((MODELS / "medusa" / "sweep.json").read_text()))[0] == 1
    assert "medusa_budget" in stored.stored_figures()


def test_every_stored_trace_loads_with_todays_names():
    """Every trace committed anywhere (the lesson's recorded runs) rebuilds; none keeps an old name."""
    found = 0
    for path in STORED:
        data = json.loads(path.read_text(encoding="utf-8"))
        formats = set(formats_in(data))
        assert not {f for f in formats if f.startswith(("specviz-trace/", "specviz-bundle/"))} - {
            TRACE_FORMAT,
            BUNDLE_FORMAT,
        }, f"{path} holds a trace of an older format"
        for trace in traces_in(data):
            assert not any(OLD_NAMES & set(step) for step in trace["steps"]), path
            assert not OLD_NAMES & set(trace["config"]["method"]), path
            Trace.from_dict(trace)
            found += 1
    assert found >= 40
    assert '"medusa.budget"' not in PACK.read_text(encoding="utf-8")


def _old_trace() -> dict:
    """One committed trace as an earlier specviz saved it: its steps' propose time named draft_s."""
    trace = next(traces_in(json.loads(PACK.read_text(encoding="utf-8"))))
    steps = [{"draft_s" if k == "propose_s" else k: v for k, v in step.items()} for step in trace["steps"]]
    return {**trace, "steps": steps}


def test_an_old_trace_is_refused_in_one_sentence_as_the_app_reads_it():
    """The app's upload reads a file through load_traces (one trace or a bundle): TraceError, which it shows."""
    old = _old_trace()
    for text in (json.dumps(old), json.dumps({"format": BUNDLE_FORMAT, "traces": [old]})):
        with pytest.raises(TraceError, match=r"older version of specviz .* run it again") as err:
            load_traces(text)
        assert "\n" not in str(err.value)


@pytest.mark.full  # about 3 s: the CLI starts in its own process
def test_an_old_trace_is_refused_in_one_line_by_the_cli(tmp_path: Path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_old_trace()), encoding="utf-8")
    cmd = [sys.executable, "-m", "specviz", "export", "--traces", str(path), "--out", str(tmp_path / "out")]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "older version of specviz" in done.stderr


@pytest.mark.real_model
def test_every_committed_head_loads_on_the_real_model(real_lm):
    """Medusa's, Hydra's and the draft's loaders need the model they were trained on."""
    assert medusa.load_heads(real_lm, MODELS / "medusa").cfg.num_heads > 0
    assert hydra.load_heads(real_lm, MODELS / "hydra").cfg.num_heads > 0
    assert draft.load_draft(real_lm, MODELS / "draft") is not None
