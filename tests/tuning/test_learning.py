"""What data buys: the learning curves read from head manifests, the recorded experiments, and their figure."""

from __future__ import annotations

import json

from specviz.output.viz.learning import learning_figure
from specviz.tuning import learning

FEATURES = {"kind": "features", "manifest": {"/a": {"split": "train-corpus"}, "/b": {"split": "train"}}}


def _manifest(kind: str = "eagle", data: dict | None = None) -> dict:
    return {
        "trainer": {"kind": kind},
        "data": data or FEATURES,
        "curve_start": {"positions": 0, "top1": [0.05, 0.01]},
        "curve": [{"positions": 1000, "top1": [0.2, 0.1]}, {"positions": 3000, "top1": [0.3]}],
        "command": "python -m specviz train eagle",
    }


def test_a_manifest_curve_reads_with_its_start_and_data(tmp_path) -> None:
    (tmp_path / "models" / "h").mkdir(parents=True)
    (tmp_path / "models" / "h" / "manifest.json").write_text(json.dumps(_manifest()))
    (tmp_path / "models" / "broken").mkdir()
    (tmp_path / "models" / "broken" / "manifest.json").write_text("{not json")
    (found,) = learning.curves(tmp_path / "models", experiments=tmp_path)
    assert found.kind == "eagle" and found.data == ("corpus", "sharegpt") and found.folder == "models/h"
    assert found.top1(1) == [(0, 0.05), (1000, 0.2), (3000, 0.3)]
    assert found.top1(2) == [(0, 0.01), (1000, 0.1)]  # the last point measured depth 1 only
    assert found.where is None and "corpus + sharegpt" in found.label


def test_an_experiment_keeps_the_curve_of_a_head_it_did_not_keep(tmp_path) -> None:
    warm = _manifest() | {"trainer": {"kind": "eagle", "init": "models/eagle"}}
    (tmp_path / "docs" / "experiments").mkdir(parents=True)
    (tmp_path / "docs" / "experiments" / "x.json").write_text(json.dumps({"curves": [warm, {"curve": "?"}]}))
    (found,) = learning.curves(tmp_path / "models", experiments=tmp_path / "docs" / "experiments")
    assert found.start == "models/eagle" and found.label.endswith("from models/eagle")
    assert found.folder == "docs/experiments/x.json"
    fig = learning_figure([found], [])
    assert [t.text for t in fig.data if t.mode == "markers+text"] == [("start: models/eagle",)]
    assert next(t for t in fig.data if t.mode == "lines+markers").line.dash == "dot"  # fine-tuned: dotted


def test_two_kept_runs_of_one_kind_data_and_start_are_told_apart_by_their_variant(tmp_path) -> None:
    warm = _manifest("medusa") | {"trainer": {"kind": "medusa", "init": "models/medusa"}}
    runs = [warm | {"variant": "labels at every position"}, warm | {"variant": "labels on the greedy path"}]
    (tmp_path / "x.json").write_text(json.dumps({"curves": runs}))
    found = learning.curves(tmp_path / "models", experiments=tmp_path)
    assert [c.label.rsplit(" (", 1)[-1] for c in found] == ["labels at every position)", "labels on the greedy path)"]
    assert len({c.label for c in found}) == 2


def test_a_head_continued_in_stages_keeps_one_curve(tmp_path) -> None:
    """finish() carries the init folder's run as an earlier stage; the curve counts positions from the first."""
    from specviz.training.checkpoint import earlier_stages

    first = _manifest("draft") | {"positions": 3000, "command": "train draft"}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "manifest.json").write_text(json.dumps(first))
    second = {"trainer": {"kind": "draft", "init": str(tmp_path / "a")}, "positions": 500}
    second |= {"data": {"kind": "features", "manifest": {"split": "train-corpus"}}, "command": "again"}
    second |= {"curve_start": {"positions": 0, "top1": [0.3]}, "curve": [{"positions": 500, "top1": [0.4]}]}
    second["earlier"] = earlier_stages(str(tmp_path / "a"))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(second))
    third = {
        **second,
        "trainer": {"kind": "draft", "init": str(tmp_path / "b")},
        "earlier": earlier_stages(str(tmp_path / "b")),
    }
    third |= {"curve": [{"positions": 200, "top1": [0.45]}]}
    curve = learning.curve_of(third, "models/draft")
    assert curve is not None and not curve.start  # the first stage started fresh
    assert curve.top1(1) == [(0, 0.05), (1000, 0.2), (3000, 0.3), (3500, 0.4), (3700, 0.45)]
    assert curve.command == "train draft ; again ; again" and curve.data == ("corpus", "sharegpt")
    assert earlier_stages("") == [] and earlier_stages(str(tmp_path / "nowhere")) == []
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "manifest.json").write_text("{broken")
    assert earlier_stages(str(tmp_path / "c")) == []


def test_data_sources_name_where_positions_came_from() -> None:
    one = {"kind": "features", "manifest": {"split": "train-corpus", "positions": 5}}  # one folder: its manifest
    assert learning.data_sources(one) == ("corpus",)
    assert learning.data_sources({"kind": "distilled"}) == ("self-distilled",)
    assert learning.data_sources({"kind": "features", "manifest": {"/x": {"split": "train"}}}) == ("sharegpt",)
    two = {"/g": {"split": "train-corpus-greedy"}, "/s": {"split": "train-corpus-sampled"}}
    assert learning.data_sources({"kind": "features", "manifest": two}) == ("corpus-greedy", "corpus-sampled")
    assert all(d in learning.DATA_NAMES for d in ("corpus-greedy", "corpus-sampled", "corpus-opening"))


def test_a_curve_needs_two_points_and_numbers() -> None:
    one = _manifest() | {"curve_start": None, "curve": [{"positions": 5, "top1": [0.1]}]}
    assert learning.curve_of(one, "m") is None
    bad = _manifest() | {"curve": [{"positions": "many", "top1": [0.1]}]}
    assert learning.curve_of(bad, "m") is None


def test_the_shipped_records_read() -> None:
    """The committed fixed-dataset experiment and the draft's curve are found, with provenance."""
    rows = learning.experiment_rows()
    assert any(r.data == "sharegpt" and r.fresh for r in rows)
    assert any(r.data == "self-distilled" and r.kind == "eagle" and r.top1[0] > 0.5 for r in rows)
    assert all(r.where is not None and r.where.cpu for r in rows)  # which CPU: tests/project/test_committed_data.py
    found = learning.curves()
    assert any(c.kind == "draft" and c.top1(1)[0][0] == 0 for c in found)
    corpus = next(c for c in found if c.folder == "models/data/eagle-corpus")
    sharegpt = next(c for c in found if c.folder == "models/data/eagle-sharegpt")
    assert corpus.data == ("corpus",) and sharegpt.data == ("sharegpt",) and not corpus.start
    assert abs(corpus.points[-1][0] - sharegpt.points[-1][0]) < 2_000  # equal positions: the data is the difference


def test_the_figure_draws_every_curve_and_row_on_a_log_axis(tmp_path) -> None:
    curve = learning.curve_of(_manifest(), "models/h")
    assert curve is not None
    rows = [
        learning.Row("eagle", "sharegpt", True, 500, (0.3,), "fresh", "x.json", None),
        learning.Row("medusa", "self-distilled", False, 900, (0.4, 0.2), "warm", "x.json", None),
    ]
    fig = learning_figure([curve], rows, depth=1)
    names = [t.name for t in fig.data]
    assert fig.layout.xaxis.type == "log"
    assert any(n and "EAGLE-2 head" in n for n in names)
    assert sum(1 for n in names if n and n.startswith("recorded runs")) == 2  # one legend entry per data source
    twin = learning.curve_of(_manifest(), "models/twin")
    assert twin is not None
    both = learning_figure([curve, twin], [])
    assert sorted(t.text for t in both.data if t.mode == "markers+text") == [("",), ("untrained",)]  # said once
    near = learning.curve_of(_manifest() | {"curve_start": {"positions": 0, "top1": [0.06]}}, "models/near")
    assert near is not None  # untrained at 0.06 beside 0.05: the labels would overlap, so one is said
    close = learning_figure([curve, near], [])
    assert sorted(t.text for t in close.data if t.mode == "markers+text") == [("",), ("untrained",)]
    untrained = [t for t in fig.data if t.text == ("untrained",)]
    assert len(untrained) == 1 and untrained[0].mode == "markers+text"  # not joined to the curve on a log axis
    line = next(t for t in fig.data if t.name and "EAGLE-2 head" in t.name)
    assert tuple(line.x) == (1000, 3000)
    deep = learning_figure([curve], rows, depth=2)
    assert [len(t.x) for t in deep.data if t.name and t.name.startswith("recorded")] == [1]  # only rows with depth 2


def test_two_start_labels_close_above_each_other_go_one_above_one_below() -> None:
    """Two fine-tunes starting from different heads 0.08 apart: the lower start's label goes under its marker."""
    hi = learning.curve_of(
        _manifest("hydra")
        | {"trainer": {"kind": "hydra", "init": "models/hydra"}, "curve_start": {"positions": 0, "top1": [0.51]}},
        "a",
    )
    lo = learning.curve_of(
        _manifest("medusa")
        | {"trainer": {"kind": "medusa", "init": "models/medusa"}, "curve_start": {"positions": 0, "top1": [0.43]}},
        "b",
    )
    assert hi is not None and lo is not None
    for order in ([hi, lo], [lo, hi]):
        fig = learning_figure(order, [])
        where = {t.text[0]: t.textposition for t in fig.data if t.mode == "markers+text"}
        assert where == {"start: models/hydra": "top center", "start: models/medusa": "bottom center"}
    far = learning.curve_of(_manifest() | {"curve_start": {"positions": 0, "top1": [0.2]}}, "c")
    assert far is not None  # 0.2 lies well below: both labels stay on top
    fig = learning_figure([hi, far], [])
    assert {t.textposition for t in fig.data if t.mode == "markers+text"} == {"top center"}
