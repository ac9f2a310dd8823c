"""Batch and context curves: long-context prompts of the asked length, figures drawn from the measured runs."""

from __future__ import annotations

import copy
import statistics

import pytest

from specviz.core import paths
from specviz.core.sampling import ConfigError, Sampling
from specviz.output.viz import scaling
from specviz.output.viz.stored import scaling_results
from specviz.tuning import contexts
from specviz.tuning.batched_bench import Grid
from specviz.tuning.batched_bench import run as run_bench
from tests.conftest import PROMPTS


def test_context_prompts_have_the_length_asked_and_differ_by_row(tiny_lm):
    for length in (64, 300, 900):
        rows = contexts.context_prompts(tiny_lm, length, 3)
        assert all(length - contexts.TOLERANCE <= len(r) <= length for r in rows), [len(r) for r in rows]
        assert len({tuple(r) for r in rows}) == 3
    text = tiny_lm.tokenizer.decode(rows[0])
    assert "GNU General Public License" in text and contexts.QUESTIONS[0] in text


def test_contexts_that_do_not_fit_are_refused(tiny_lm):
    with pytest.raises(ConfigError, match="at least"):
        contexts.check([10])
    top = contexts.limit(tiny_lm, 16)
    contexts.check([top], tiny_lm, 16)
    with pytest.raises(ConfigError, match="no room"):
        contexts.check([top + 1], tiny_lm, 16)


@pytest.fixture(scope="module")
def measured(tiny_lm) -> dict:
    """A real (tiny) batched bench over two batch sizes and the prompt set plus two context lengths."""
    prompts = [tiny_lm.encode_prompt(t) for t in PROMPTS[:2]]
    grid = Grid((1, 2), (None, 64, 96))
    return run_bench(tiny_lm, ["ar", "pld"], prompts, grid, Sampling(max_new_tokens=6), repeats=3)


def _point(result: dict, method: str, batch: int, context: int | None) -> dict:
    return next(p for p in result["points"] if (p["method"], p["batch"], p["context"]) == (method, batch, context))


def _trace(fig, name: str, axis: str = "x"):
    return next(d for d in fig.data if d.name == name and d.xaxis == axis)


def test_every_point_is_measured_identical_and_placed(measured):
    cells = {(p["method"], p["batch"], p["context"]) for p in measured["points"]}
    assert cells == {(m, b, n) for m in ("ar", "pld") for b in (1, 2) for n in (None, 64, 96)}
    for p in measured["points"]:
        assert p["identical"] == p["batch"] and len(p["runs"]) == 3
        if p["context"]:
            assert p["context"] - contexts.TOLERANCE <= p["prompt_tokens"] <= p["context"]


def test_curves_are_the_medians_of_the_stored_runs(measured):
    points = scaling.merge([measured])
    fig = scaling.curve_figure(points, "context", {"batch": 1})
    pld = [p for p in measured["points"] if p["method"] == "pld" and p["batch"] == 1 and p["context"]]
    for key, axis in (("speedup", "x"), ("A", "x2"), ("r", "x3")):
        want = [statistics.median(r[key] for r in p["runs"]) for p in pld]
        assert list(_trace(fig, "pld", axis).y) == pytest.approx(want)
    assert list(_trace(fig, "pld").x) == ["64", "96"]

    # the summary the bench wrote beside the runs is not what is drawn: change a run, and only then the figure
    changed, summary_only = copy.deepcopy(measured), copy.deepcopy(measured)
    for r in _point(changed, "pld", 1, 64)["runs"]:
        r["speedup"] = 7.0
    _point(summary_only, "pld", 1, 64)["speedup"]["median"] = 9.0
    assert _trace(scaling.curve_figure(scaling.merge([changed]), "context", {"batch": 1}), "pld").y[0] == 7.0
    redrawn = scaling.curve_figure(scaling.merge([summary_only]), "context", {"batch": 1})
    assert list(_trace(redrawn, "pld").y) == list(_trace(fig, "pld").y)


def test_region_and_crossing_come_from_the_measured_grid(measured):
    points = scaling.merge([measured])
    batches, lengths, z = scaling.grid(points, "pld")
    assert (batches, lengths) == ([1, 2], [64, 96])
    fig = scaling.region_figure(points)
    heat = next(d for d in fig.data if d.type == "heatmap")
    assert [list(row) for row in heat.z] == z
    runs = _point(measured, "pld", 2, 96)["runs"]
    assert z[1][1] == statistics.median(r["speedup"] for r in runs)
    assert any(d.type == "contour" for d in fig.data)  # the 1× crossing
    slow = copy.deepcopy(points)
    for p in slow:
        for r in p["runs"]:
            r["speedup"] = 0.5 if p["batch"] == 2 else 1.5
    assert scaling.where_it_stops(slow, "batch", {"context": None}) == {"pld": 2}
    assert scaling.where_it_stops(slow, "batch", {"context": 64}) == {"pld": 2}


def test_bench_refuses_a_bad_context_before_loading_the_model(tmp_path, capsys, monkeypatch):
    import specviz.__main__ as cli_main

    monkeypatch.setattr(cli_main, "_load", lambda a: pytest.fail("the model was loaded"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "Say hello."}\n')
    assert cli_main.main(["bench", "--context", "128,x", "--methods", "ar", "--prompts", str(prompts)]) == 2
    assert "--context takes lengths" in capsys.readouterr().err


def test_committed_curves_are_measured_identical_and_placed():
    """Every stored batched bench: each point's rows all equal plain decoding, runs kept, provenance recorded."""
    found = scaling_results()
    for path, data in found:
        assert data["provenance"]["cpu"] and data.get("command", "").startswith("python -m specviz bench"), path
        for p in data["points"]:
            assert p["identical"] == p["batch"] and p["runs"], (path.name, p["method"], p["batch"], p.get("context"))
    names = {p.name for p, _ in found}
    assert names == {p.name for p in paths.BENCH_DIR.glob("batched-*.json")}, "a stored file could not be read"
