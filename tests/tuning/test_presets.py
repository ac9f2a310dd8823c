"""Method presets (fastest here / as in the paper) and the prompt presets shipped with the app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specviz.core.paths import PROMPT_KINDS, PROMPT_PRESETS
from specviz.core.prompts import MAX_PROMPT_TOKENS, preset_prompts, prompt_kinds, read_prompts
from specviz.heads.medusa import load_calibration
from specviz.methods import eagle, lookahead, medusa
from specviz.trees.tree import TreeSpec, sparse_tree
from specviz.tuning import presets

ROOT = Path(__file__).resolve().parents[2]


def test_fitted_is_the_devices_shape_and_paper_is_the_reference():
    for method, cls in (("medusa", medusa.Config), ("eagle", eagle.Config), ("lookahead", lookahead.Config)):
        assert presets.get(method, "fitted").config == cls()  # no fit given: the shape is left for the run's start
        assert presets.values(method, presets.get(method, "fitted")) == (
            {"tree": "dynamic"} if method == "eagle" else {}
        )
    shaped = presets.get("eagle", "fitted", {"depth": 2, "top_k": 3, "total_tokens": 5}).config
    assert (shaped.depth, shaped.top_k, shaped.total_tokens) == (2, 3, 5)
    e = presets.get("eagle", "paper").config
    assert (e.total_tokens, e.depth, e.top_k, e.tree) == (60, 5, 10, "dynamic")
    la = presets.get("lookahead", "paper").config
    assert 5 <= la.window <= 7 and la.ngram == 5 and 5 <= la.guesses <= 7
    with pytest.raises(KeyError, match="no preset"):
        presets.get("medusa", "nope")


def test_medusa_paper_tree_has_63_nodes_from_the_calibration():
    cfg = presets.get("medusa", "paper").config
    acc = load_calibration()
    paths, expected = sparse_tree(acc[: cfg.heads], cfg.total_tokens)
    spec = TreeSpec.from_paths(paths)
    assert len(paths) == 63 and len(spec) == 64  # 63 drafted nodes under the root, as mc_sim_7b_63
    assert max(spec.depths) <= 4 and max(max(p) for p in paths) < 10  # 4 heads, their top-10
    assert expected > sparse_tree(acc[: cfg.heads], 5)[1]  # a bigger tree predicts more
    assert presets.verified_tokens(cfg) == 64


def test_matching_and_applied_touch_only_the_preset_fields():
    paper = presets.get("eagle", "paper")
    mine = eagle.Config(tree="static", head_dtype="fp32")
    out = presets.applied("eagle", mine, paper)
    assert (out.total_tokens, out.depth, out.top_k, out.tree, out.head_dtype) == (60, 5, 10, "dynamic", "fp32")
    assert presets.matching("eagle", presets.values("eagle", paper)) == paper
    assert presets.matching("eagle", {"depth": 3, "top_k": 4, "total_tokens": 6, "tree": "dynamic"}) is None


def test_prompt_presets_cover_every_kind():
    items, kinds = preset_prompts(), prompt_kinds()
    assert list(kinds) == ["chat", "code", "extraction", "summarisation", "translation", "maths", "long document"]
    assert {p.category for p in items} == set(kinds)
    assert len({p.id for p in items}) == len(items) and all(p.title for p in items)
    for name in kinds:
        if name != "long document":
            assert sum(p.category == name for p in items) >= 3, name
    assert all(k.hint and k.label for k in kinds.values())
    assert read_prompts(PROMPT_PRESETS) == items  # the bench reads the same file


def test_prompt_presets_fit_and_the_long_document_is_long(tiny_lm):
    from specviz.core.prompts import prepare

    lengths = {p.id: len(prepare(tiny_lm, p.text)) for p in preset_prompts()}
    assert max(lengths.values()) <= MAX_PROMPT_TOKENS
    long = [n for p, n in zip(preset_prompts(), lengths.values(), strict=True) if p.category == "long document"]
    assert long and all(1300 <= n <= 1900 for n in long), long


def test_heads_are_never_trained_on_the_prompt_presets():
    """The presets demonstrate and evaluate; no head-training or calibration module may read them."""
    names = {"PROMPT_PRESETS", "PROMPT_KINDS", "preset_prompts", "prompts.jsonl", "DATA"}
    lib = ROOT / "specviz"
    # sharegpt.evaluation_prompts reads them only to drop every conversation that contains one
    corpus = [p for p in (lib / "corpus").glob("*.py") if p.name != "sharegpt.py"]
    training = [*(lib / "training").glob("*.py"), *corpus]
    calibration = [lib / "tuning" / "calibrate.py", lib / "tuning" / "eagle_replay.py"]
    for path in sorted([*(lib / "heads").glob("*.py"), *training, *calibration]):
        tree = ast.parse(path.read_text())
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        used |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not used & names, (path.name, used & names)
    assert "never" in PROMPT_KINDS.read_text() and "train" in PROMPT_KINDS.read_text()


def test_the_fitted_preset_says_what_the_fit_predicts_here():
    """Named for the device that runs it, with the sentence the fit gives (no 'fastest on a 2-core CPU' constant)."""
    told = "fitted to this device: 5 nodes (predicted 1.40×, A 1.70 / r 1.21)"
    for method in ("medusa", "eagle", "lookahead"):
        p = presets.presets(method, None, told)[0]
        assert p.key == presets.FITTED and p.label == "fitted to this device" and p.why == told
    assert "fastest" not in {p.key for m in ("medusa", "eagle", "lookahead") for p in presets.presets(m)}
