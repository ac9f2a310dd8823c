"""The confidence budget (issue 42, item 3): its table fit, its rerank, its depth gate, and the refusals; greedy
identity under the budget is the contract's (tests/methods/test_contract.py, CONFIG_MATRIX)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from specviz.core.sampling import ConfigError, Sampling
from specviz.methods import eagle, eagle3, hybrid
from specviz.trees.draft_tree import Budget, DraftTree
from specviz.tuning.confidence import fit_table, judged_nodes


def test_the_table_is_the_share_accepted_per_tenth_made_monotone():
    samples = [(0.05, False)] * 9 + [(0.05, True)]  # bin 0: 0.1
    samples += [(0.35, True)] * 3 + [(0.35, False)]  # bin 3: 0.75
    samples += [(0.45, True)] + [(0.45, False)] * 3  # bin 4: 0.25, below bin 3: pooled with it to 0.5
    samples += [(0.99, True)] * 9 + [(1.0, False)]  # bin 9 (1.0 falls in the last tenth): 0.9
    fit = fit_table(samples)
    assert fit["counts"] == [10, 0, 0, 4, 4, 0, 0, 0, 0, 10]
    assert fit["raw"][3] == 0.75 and fit["raw"][4] == 0.25 and fit["raw"][1] is None
    assert fit["table"] == [0.1, 0.1, 0.1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.9]
    assert all(a <= b for a, b in zip(fit["table"], fit["table"][1:], strict=False))


def _tree() -> DraftTree:
    """Root; two children (0.95, 0.05); under the first, two more (0.85, 0.15); under 0.85 one of 0.65."""
    t = DraftTree(tokens=[0])
    a = t.add(0, 1, math.log(0.95))
    t.add(0, 2, math.log(0.05))
    b = t.add(a, 3, math.log(0.85))
    t.add(a, 4, math.log(0.15))
    t.add(b, 5, math.log(0.65))
    return t


def test_the_budget_keeps_its_floor_then_what_repays_and_leaves_a_tree():
    table = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the tenth's lower edge: a mild discount
    values = Budget(2, 0.0, 0.0, table).path_values(_tree())
    assert values == pytest.approx([1.0, 0.9, 0.0, 0.72, 0.09, 0.432])
    kept = _tree()
    kept.keep_budget(6, Budget(2, 0.4, 0.0, table))  # the floor's one node, then 0.72 and 0.432 repay 0.4
    assert [i for i, k in enumerate(kept.kept) if k] == [0, 1, 3, 5]
    small = _tree()
    small.keep_budget(6, Budget(3, 0.99, 0.0, table))  # nothing repays: the floor alone (root + 2)
    assert [i for i, k in enumerate(small.kept) if k] == [0, 1, 3]
    capped = _tree()
    capped.keep_budget(3, Budget(2, 0.0, 0.0, table))  # total_tokens caps it
    assert sum(capped.kept) == 3
    for t in (kept, small, capped):
        assert all(t.kept[t.parents[i]] for i in range(1, len(t.tokens)) if t.kept[i])
    assert Budget(2, 0.0, 0.0).accept(0.37) == 0.37  # no table: the draft probability itself


def test_the_depth_gate_stops_drafting_when_the_head_is_unsure(tiny_lm):
    res = eagle.tiny_resources(tiny_lm)
    cfg = eagle.Config(depth=4, top_k=3, total_tokens=10, head_dtype="model", min_tokens=3, depth_floor=1.0)
    trace = eagle.generate(
        tiny_lm, tiny_lm.encode_prompt("Hello there"), Sampling(max_new_tokens=6), cfg, head=res["head"]
    )
    for step in trace.drafted_steps:  # no node is certain: no round past the first; node_floor 0 keeps every child
        assert max(step.detail.tree["expanded"]) == 1
        assert step.forward_tokens == 1 + cfg.top_k
    free = eagle.generate(
        tiny_lm,
        tiny_lm.encode_prompt("Hello there"),
        Sampling(max_new_tokens=6),
        eagle.Config(depth=4, top_k=3, total_tokens=10, head_dtype="model", min_tokens=3),
        head=res["head"],
    )
    assert max(max(s.detail.tree["expanded"]) for s in free.drafted_steps) == 4
    assert free.output_ids == trace.output_ids


@pytest.mark.parametrize("module", [eagle, eagle3, hybrid])
@pytest.mark.parametrize(
    "bad",
    [
        {"min_tokens": 1},
        {"min_tokens": 7, "total_tokens": 6},  # above total_tokens
        {"min_tokens": 3, "tree": "static"},
        {"node_floor": 1.5},
        {"depth_floor": -0.1},
    ],
)
def test_bad_budgets_are_refused(module, bad):
    with pytest.raises(ConfigError):
        module.Config(**bad)


def test_judged_nodes_are_the_children_of_accepted_nodes():
    tree = {
        "tokens": [9, 1, 2, 3, 4],
        "parents": [-1, 0, 0, 1, 2],
        "kept": [True, True, True, True, False],
        "conf": [1.0, 0.7, 0.2, 0.5, 0.4],
    }
    step = SimpleNamespace(detail=SimpleNamespace(tree=tree, path=[0, 1]))
    assert judged_nodes([SimpleNamespace(steps=[step, SimpleNamespace(detail=None)])]) == [
        (0.7, True),
        (0.2, False),
        (0.5, False),
    ]
