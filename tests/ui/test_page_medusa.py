"""The Medusa page under AppTest with the committed heads, plus its figure builders on plain data."""

from __future__ import annotations

from typing import Any

import pytest

from specviz.output.viz.tree import mask_figure, tree_figure, tree_layout
from tests.apptest import app_on, chart_specs, chart_title, titled


def test_tree_figure_and_mask_on_plain_data() -> None:
    parents = [-1, 0, 0, 1, 1, 2]
    labels = ["the", "cat", "dog", "sat", "ran", "is"]
    status = ["accepted", "accepted", "rejected", "accepted", "rejected", "unreached"]
    pos = tree_layout(parents)
    assert pos[0][0] < pos[1][0] < pos[3][0]  # one column per depth, root on the left
    assert pos[1][1] > pos[2][1]  # first child on top
    fig = tree_figure(parents, labels, status)
    accepted = next(t for t in fig.data if t.name == "accepted")
    assert list(accepted.text) == ["the", "cat", "sat"]
    thick = [t for t in fig.data if t.mode == "lines" and t.line.width == 5]
    assert len(thick) == 2  # the two edges of the accepted path
    mask: Any = mask_figure(parents, labels, [0, 1, 3])
    z = mask.data[0].z
    assert [t.rsplit(" ", 1)[1] for t in mask.data[0].y] == ["p+0", "p+1", "p+1", "p+2", "p+2", "p+2"]  # position ids
    assert [t.name for t in mask.data[1:]] == ["masked", "sees: an ancestor or itself", "sees, on the accepted path"]
    assert [list(r) for r in z] == [
        [2, 0, 0, 0, 0, 0],
        [2, 2, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0],
        [2, 2, 0, 2, 0, 0],
        [1, 1, 0, 0, 1, 0],
        [1, 0, 1, 0, 0, 1],
    ]


@pytest.mark.real_model
def test_medusa_page_live(real_app) -> None:
    at = app_on("views/medusa.py", max_new_tokens=16)
    assert not at.exception and not at.error
    specs = chart_specs(at)
    tree = titled(specs, "Candidate tree")
    nodes = sum(len(d["x"]) for d in tree["data"] if d.get("mode") == "markers+text")
    mask = titled(specs, "Tree-attention mask")
    assert len(mask["data"][0]["z"]) == nodes
    assert any(m.label.startswith("Same tokens") and m.value == "yes" for m in at.metric)
    # Hydra beside it, in the same runs: accuracy by head, acceptance by depth, A, speedup, the twin trees
    assert len(titled(specs, "Held-out top-1 accuracy of each head")["data"]) == 2
    assert len(titled(specs, "Steps that accepted at least d drafted tokens")["data"]) == 2
    captions = [c.value for c in at.caption]
    aligned = any("Both methods' trees for the step that starts at output token" in c for c in captions)
    apart = any("Hydra has no step starting at output token" in c for c in captions)  # the fit's trees may not align
    assert aligned != apart and (not aligned or titled(specs, "Hydra (hover")), captions
    labels = [m.label for m in at.metric]
    assert "A, Medusa → Hydra" in labels and "Hydra's speedup" in labels
    # and Medusa + Lookahead beside it: its A, speedup, identity, who proposed each token and its tree
    assert "A, Medusa → with Lookahead" in labels and "Its speedup" in labels
    assert titled(specs, "Who proposed each committed token")
    assert len([s for s in specs if "Candidate tree" in chart_title(s)]) == 2  # Medusa's, then the pairing's
    assert sum(m.label.startswith("Same tokens") and m.value == "yes" for m in at.metric) == 3
    at.slider(key="medusa.total_tokens").set_value(4).run()  # the live run changes with the tree size
    assert not at.exception
    tree = titled(chart_specs(at), "Candidate tree")
    assert sum(len(d["x"]) for d in tree["data"] if d.get("mode") == "markers+text") == 4
    at.slider(key="medusa.step").set_value(1).run()  # 16 tokens take several steps
    assert not at.exception
    at.radio(key="medusa.acceptance").set_value("typical").run()
    at.slider(key="medusa.temperature").set_value(0.7).run()
    assert not at.exception and not at.error


def test_trace_figures_on_tiny_run(tiny_lm) -> None:
    from specviz.core.sampling import Sampling
    from specviz.methods import medusa
    from specviz.output.viz.tree import budget_figure, cost_figure, gallery, steps_figure, token_strip
    from tests.methods.test_medusa import ACC, tiny_heads

    ids = tiny_lm.encode_prompt("Say hi.")
    tr = medusa.generate(
        tiny_lm,
        ids,
        Sampling(max_new_tokens=12),
        medusa.Config(heads=3, total_tokens=6),
        heads=tiny_heads(tiny_lm, random=False),
        calibration=ACC,
    )
    figs = gallery(tr)
    assert set(figs) == {"tokens", "tree", "mask"}
    strip = token_strip(tr, upto=1).data[0]
    assert len(strip.x) == sum(st.accepted for st in tr.steps[:2])
    steps = steps_figure(tr, baseline=tr)
    assert list(steps.data[0].y) == [st.accepted for st in tr.steps] and steps.data[1].name.startswith("running")
    assert steps.layout.yaxis2.title.text == "speedup ×" and steps.layout.yaxis.title.text == "tokens committed"
    assert len(budget_figure([1, 5], [1.0, 1.5], [1.0, 1.4], 5).data) == 2
    cost = cost_figure([0, 4], [0.5, 0.6], [60, 70], 60, [1.0, 1.2])
    assert len(cost.data) == 3
    assert cost.layout.yaxis2.title.text == "speedup ×" and cost.layout.yaxis.title.text == "ms per step"
