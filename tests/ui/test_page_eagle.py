"""The EAGLE page under AppTest with the committed head, plus its figure builders on a tiny run."""

from __future__ import annotations

import pytest
import torch

from specviz.core.sampling import Sampling
from specviz.heads.eagle import new_head
from specviz.methods import eagle
from specviz.output.viz import eagle as viz
from specviz.tuning import sweep
from specviz.tuning.eagle_replay import replay_trees
from tests.apptest import app_on, chart_specs, chart_title, titled, turns_taken


@pytest.fixture(scope="module")
def tiny_trace(tiny_lm):
    head = new_head(tiny_lm.hf.config, "tiny", seed=1).to(torch.float64).eval().requires_grad_(False)
    cfg = eagle.Config(depth=3, top_k=3, total_tokens=8, head_dtype="model")
    tr = eagle.generate(tiny_lm, tiny_lm.encode_prompt("Say hi."), Sampling(max_new_tokens=6), cfg, head=head)
    return tr, replay_trees(tiny_lm, tr, 1, cfg, head=head)


def test_growth_figure_reveals_one_depth_per_round(tiny_trace):
    tr, _ = tiny_trace
    tree = tr.steps[0].detail.tree
    for stage in (1, 2, 3, 4):
        fig = viz.growth_figure(tree, stage, tr.steps[0].detail.path)
        shown = sum(len(d.x) for d in fig.data if d.mode == "markers+text")
        assert shown == sum(1 for dep in tree["depth"] if dep <= stage)
    final = viz.growth_figure(tree, 4)
    kept = sum(len(d.x) for d in final.data if d.mode == "markers+text" and d.name.split(" ")[0] in ("root", "kept"))
    assert kept == sum(tree["kept"])
    pruned = [d for d in final.data if d.mode == "markers+text" and d.name.startswith("pruned")]
    assert sum(len(d.x) for d in pruned) == len(tree["kept"]) - sum(tree["kept"])
    diamonds = sum(len(d.x) for d in final.data if d.mode == "markers+text" and d.marker.symbol == "diamond")
    assert diamonds == sum(1 for r in tree["expanded"] if r > 0)


def test_verify_compare_and_feature_figures(tiny_trace):
    tr, replay = tiny_trace
    step = tr.steps[0]
    parents, _, status, _ = viz.verified_tree_data(step)
    assert parents == step.detail.verify_parents and status[0] == "accepted"
    assert status.count("accepted") == step.accepted  # T = 0: the path is what was committed
    tree_fig, mask = viz.verify_figures(step)
    assert sum(1 for t in tree_fig.data if t.mode == "lines" and t.line.width == 5) == step.accepted - 1
    assert len(mask.data[0].z) == step.forward_tokens
    both = viz.compare_figure(replay)
    assert [a.text.split(":")[0] for a in both.layout.annotations] == ["Static (calibrated)", "EAGLE-2 dynamic"]
    assert set(replay) == {"static", "dynamic"} and all(r["accepted"][0] == 0 for r in replay.values())
    feats = viz.feature_figure(step)
    assert len(feats.data[0].y) == 4 and len(feats.data[0].x) == 16
    assert set(viz.gallery(tr)) == {"tokens", "tree", "verify", "mask", "features"}


def test_replay_matches_the_run_at_temperature_zero(tiny_lm):
    """Re-growing a step's dynamic tree from the same context reproduces the tree and path the run had."""
    head = new_head(tiny_lm.hf.config, "tiny", seed=2).to(torch.float64).eval().requires_grad_(False)
    cfg = eagle.Config(depth=3, top_k=3, total_tokens=8, head_dtype="model")
    tr = eagle.generate(tiny_lm, tiny_lm.encode_prompt("Count"), Sampling(max_new_tokens=6), cfg, head=head)
    rep = replay_trees(tiny_lm, tr, 2, cfg, head=head)["dynamic"]
    d = tr.steps[2].detail
    assert rep["tokens"] == d.tree["tokens"] and rep["kept"] == d.tree["kept"]
    assert rep["accepted"] == d.path


def test_sweep_measures_every_shape_against_plain_decoding(tiny_lm):
    """The live sweep: one row per shape, greedy outputs identical, the default ringed in its figure."""
    shapes = ((1, 2, 3), (2, 4, 6))
    out = sweep.measure_eagle(
        tiny_lm, ["Say hi.", "Count"], shapes, max_new_tokens=6, repeats=1, head="random", progress=lambda _m: None
    )
    rows = out["rows"]
    assert [(r["depth"], r["top_k"], r["total_tokens"]) for r in rows] == list(shapes)
    assert all(r["identical"] == r["prompts"] == 2 for r in rows)
    assert all(r["speedup"] > 0 and 1 <= r["A"] <= 6 and r["verify_ms"] > 0 for r in rows)
    d = eagle.Config()
    assert out["chosen"] == {"depth": d.depth, "top_k": d.top_k, "total_tokens": d.total_tokens}
    assert out["best"] in rows
    fig = viz.sweep_figure(out)
    assert list(fig.data[0].text) == ["1/2/3", "2/4/6"]
    ringed = [w > 0 for w in fig.data[0].marker.line.width]
    assert ringed == [
        (r["depth"], r["top_k"], r["total_tokens"]) == (d.depth, d.top_k, d.total_tokens) for r in rows
    ]  # the default shape is ringed


@pytest.mark.real_model
def test_eagle_page_live(real_app, monkeypatch):
    from specviz.tuning import eagle_replay

    regrown = turns_taken(monkeypatch, eagle_replay, "replay_trees")  # it runs the model: in line with other runs
    at = app_on("views/eagle.py", max_new_tokens=16)
    assert not at.exception and not at.error
    specs = chart_specs(at)
    growth = titled(specs, "After the rerank")
    kept = sum(
        len(d["x"])
        for d in growth["data"]
        if d.get("mode") == "markers+text" and d["name"].split(" ")[0] in ("root", "kept", "accepted")
    )
    nodes = at.slider(key="eagle.total_tokens").value  # the page starts at the shape fitted to this device
    assert kept == nodes and 2 <= nodes <= 60
    assert len(titled(specs, "Tree-attention mask")["data"][0]["z"]) == nodes
    assert titled(specs, "static vs dynamic") and titled(specs, "What the head consumes")
    shapes = titled(specs, "Tree shapes, measured")  # models/eagle/live_sweep.json, committed, with provenance
    assert len(shapes["data"][0]["x"]) == len(sweep.EAGLE_SHAPES)
    assert any(m.label.startswith("Same tokens") and m.value == "yes" for m in at.metric)
    # EAGLE-3 beside it, in the same runs: its accuracy by depth, A, speedup, identity and the fused layers
    assert len(titled(specs, "Held-out top-1 accuracy by draft depth")["data"]) == 2
    assert "EAGLE-3 reads layers 2, 15, 27 of 30" in titled(specs, "EAGLE-3 reads layers")["layout"]["title"]["text"]
    labels = [m.label for m in at.metric]
    assert "A, EAGLE-2 → EAGLE-3" in labels and "EAGLE-3's speedup" in labels
    # and EAGLE-2 + n-gram pool on the same tree: A, speedup, identity, who proposed each token, its tree
    assert "A, EAGLE-2 → with the pool" in labels and "Its speedup" in labels
    # and DFlash's block drafter beside EAGLE-3: its A, speedup and identity
    assert "A, EAGLE-2 → DFlash" in labels and "DFlash's speedup" in labels
    assert titled(specs, "Each block drafted in one pass") and titled(specs, "What each block position earns")
    assert sum(m.label.startswith("Same tokens") and m.value == "yes" for m in at.metric) == 4
    origins = titled(specs, "Who proposed each committed token")
    assert sum(sum(d["y"]) for d in origins["data"]) == 16  # every committed token has one origin
    assert len([s for s in specs if "Tree-attention mask" in chart_title(s)]) == 2
    assert regrown == ["re-growing both trees"] and titled(specs, "static vs dynamic")
    at.slider(key="eagle.depth").set_value(2)  # a tree that can hold 6 nodes whatever this device's fit chose
    at.slider(key="eagle.top_k").set_value(3)
    at.slider(key="eagle.total_tokens").set_value(6).run()
    assert not at.exception
    assert len(titled(chart_specs(at), "Tree-attention mask")["data"][0]["z"]) == 6
    at.select_slider(key="eagle.stage").set_value("round 1").run()
    assert not at.exception and titled(chart_specs(at), "Round 1")
    at.slider(key="eagle.min_tokens").set_value(4).run()  # the confidence budget: 4 to 6 nodes a step
    assert not at.exception and not at.error
    assert 4 <= len(titled(chart_specs(at), "Tree-attention mask")["data"][0]["z"]) <= 6
    at.radio(key="eagle.tree").set_value("static").run()  # a static tree keeps its fixed shape under the budget
    at.slider(key="eagle.temperature").set_value(0.8).run()
    assert not at.exception and not at.error
