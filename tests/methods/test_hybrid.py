"""EAGLE-2 + n-gram pool: the lookup, the graft under the budget, and losslessness through the real generate."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specviz.core.details import HybridDetail
from specviz.core.sampling import Sampling
from specviz.heads.eagle_drafter import drafter
from specviz.methods import ar, hybrid
from specviz.methods.base import Outcome, Run
from specviz.methods.eagle import EagleDraft, EagleProposer
from specviz.methods.speculator import path_outcome
from specviz.output.viz.eagle import POOL_MARK, gallery, verify_figures
from specviz.output.viz.hybrid import origins, origins_figure
from specviz.trees.draft_tree import DraftTree
from specviz.trees.tree_graft import BOTH, HEAD, POOL, graft, lookup_tails
from specviz.trees.verifier import TreeVerifier
from tests.sampling_check import second_token_follows_p


def test_lookup_finds_distinct_continuations_longest_match_first():
    seq = [1, 2, 3, 9, 1, 2, 4, 7, 5, 1, 2]
    assert lookup_tails(seq, 3, 1, 3, 4) == [[4, 7, 5], [3, 9, 1]]  # after "1 2", most recent first
    assert lookup_tails(seq, 3, 1, 2, 1) == [[4, 7]]
    assert lookup_tails([5, 6, 7], 3, 1, 4, 2) == []


def small_tree() -> DraftTree:
    """root 0 → a(10) → b(11), root → c(12), scores -0.5, -1.0, -2.0; all kept."""
    tree = DraftTree(tokens=[0])
    a = tree.add(0, 10, -0.5)
    tree.add(a, 11, -0.5)
    tree.add(0, 12, -2.0)
    tree.kept = [True] * 4
    return tree


def kept_is_a_tree(tree: DraftTree) -> bool:
    return all(tree.kept[tree.parents[i]] for i in range(1, len(tree.tokens)) if tree.kept[i])


def test_graft_walks_the_tree_adds_the_rest_and_keeps_the_budget():
    tree = small_tree()
    sources = graft(tree, [[10, 11, 13, 14]], budget=6, sources=[HEAD] * 4)
    assert sum(tree.kept) == 6 and kept_is_a_tree(tree)
    assert tree.tokens[4:] == [13, 14] and tree.parents[4:] == [2, 4]
    assert sources == [HEAD, BOTH, BOTH, HEAD, POOL, POOL]

    tree = small_tree()  # budget 5: the weakest head leaf (token 12) gives up its place
    graft(tree, [[10, 11, 13, 14]], budget=5, sources=[HEAD] * 4)
    assert sum(tree.kept) == 5 and not tree.kept[3] and kept_is_a_tree(tree)

    tree = small_tree()  # a candidate no longer than the tree's deepest path is not grafted
    assert graft(tree, [[12, 15]], budget=8, sources=[HEAD] * 4) == [HEAD] * 4 and len(tree.tokens) == 4


def test_graft_cuts_a_candidate_when_nothing_can_leave():
    tree = small_tree()
    graft(tree, [[10, 11, 13, 14, 15, 16]], budget=5, sources=[HEAD] * 4)
    assert sum(tree.kept) == 5 and kept_is_a_tree(tree)
    children = {}
    for i in range(1, len(tree.tokens)):
        children.setdefault(tree.parents[i], []).append(tree.tokens[i])
    assert all(len(v) == len(set(v)) for v in children.values())  # siblings stay distinct (point masses)


def test_grafted_nodes_are_verified_and_carry_the_copy(tiny_lm, monkeypatch):
    """A pool that knows plain decoding's continuation (the lookup patched to return it): its nodes join the
    tree, are verified in the same forward and accepted, and the output is still plain decoding's."""
    ids = tiny_lm.encode_prompt("Tell me about rivers")
    s = Sampling(max_new_tokens=24)
    plain = ar.generate(tiny_lm, ids, s).output_ids
    kw = hybrid.tiny_resources(tiny_lm)

    def oracle(seq, max_ngram, min_ngram, length, count):
        done = len(seq) - len(ids)  # tokens committed so far, the root included
        return [plain[done : done + length]] if plain[done - 1 : done] == seq[-1:] else []

    monkeypatch.setattr(hybrid, "lookup_tails", oracle)
    t = hybrid.generate(tiny_lm, ids, s, **kw)
    assert t.output_ids == plain
    steps = [d for _, d in t.detailed(HybridDetail)]
    assert all(len(d.sources) == len(d.tree["tokens"]) for d in steps)
    assert all(sum(d.tree["kept"]) <= kw["config"].total_tokens for d in steps if not d.copy)
    on_path = [d.sources[n] for d in steps for n in d.path[1:]]
    assert on_path and on_path.count("head") < len(on_path)  # the pool's nodes were accepted
    assert t.mean_accepted > 3  # an untrained head alone accepts about nothing
    step = next(st for st, d in t.detailed(HybridDetail) if "pool" in d.sources)
    _, mask = verify_figures(step)  # the mask marks the pool's nodes
    assert any(POOL_MARK in str(tick) for tick in mask.layout.yaxis.ticktext or mask.data[0].y)
    # an elastic budget (pool_extra) lets the same copy run past the shared budget, and only the pool's nodes
    small = replace(kw["config"], total_tokens=4, length=10, copy_after=0)
    capped = hybrid.generate(tiny_lm, ids, s, **{**kw, "config": small})
    elastic = hybrid.generate(tiny_lm, ids, s, **{**kw, "config": replace(small, pool_extra=6)})
    assert capped.output_ids == elastic.output_ids == plain
    assert max(st.accepted for st in capped.steps) <= 4 < max(st.accepted for st in elastic.steps)


def test_copy_steps_verify_the_pool_alone_once_it_has_been_accepted(tiny_lm, monkeypatch):
    """With a pool that knows the continuation, the steps after one that accepted copy_after pool tokens are copy
    steps: the root and the pool's candidate only (up to copy_length, past the node budget), nothing drafted
    by the head, and the output is still plain decoding's; with copy_after = 0 there are none."""
    ids = tiny_lm.encode_prompt("Tell me about rivers")
    s = Sampling(max_new_tokens=40)
    plain = ar.generate(tiny_lm, ids, s).output_ids
    kw = hybrid.tiny_resources(tiny_lm)
    cfg = replace(kw["config"], total_tokens=4, copy_after=2, copy_length=7)

    def oracle(seq, max_ngram, min_ngram, length, count):
        done = len(seq) - len(ids)
        return [plain[done : done + length]]

    monkeypatch.setattr(hybrid, "lookup_tails", oracle)
    t = hybrid.generate(tiny_lm, ids, s, **{**kw, "config": cfg})
    assert t.output_ids == plain
    records = list(t.detailed(HybridDetail))
    copies = [(st, d) for st, d in records if d.copy]
    assert copies and not records[0][1].copy  # the first step has no evidence yet: the tree drafts
    for st, d in copies:
        assert d.sources[1:] == ["pool"] * (len(d.sources) - 1) and d.features == {}
        assert set(d.tree["expanded"][1:]) <= {-1}  # the head ran no node
        assert st.forward_tokens == len(d.tree["tokens"]) <= 1 + cfg.copy_length
    assert max(st.forward_tokens for st, _ in copies) > cfg.total_tokens
    assert set(gallery(t)) == {"tokens", "tree", "verify", "mask", "features"}  # features: from a drafted step
    rows = origins(t)  # who proposed each committed token: one origin each, copy steps' drafts all "copy"
    assert [sum(r.values()) for r in rows] == [st.accepted for st in t.steps]
    assert sum(r["copy"] for r in rows) == sum(st.drafts_accepted for st, _ in copies)
    fig = origins_figure(t)
    assert f"{len(copies)} of {len(t.steps)} steps were copy steps" in fig.layout.title.text
    assert sum(sum(bar.y) for bar in fig.data) == len(plain)
    off = hybrid.generate(tiny_lm, ids, s, **{**kw, "config": replace(cfg, copy_after=0)})
    assert off.output_ids == plain and not any(d.copy for _, d in off.detailed(HybridDetail))


def test_a_step_without_the_head_leaves_it_as_if_it_had_drafted(tiny_lm):
    """The head's queue keeps it in step: after a step it sat out (EagleProposer.skip), its next tree is the one it
    drafts when it drafted on that step too."""
    ids = tiny_lm.encode_prompt("Tell me about rivers")
    s = Sampling(max_new_tokens=12)
    plain = ar.generate(tiny_lm, ids, s).output_ids
    kw = hybrid.tiny_resources(tiny_lm)
    cfg, head = kw["config"], kw["head"]

    def second_tree(first_with_head: bool) -> DraftTree:
        trees: list[DraftTree] = []

        def step(run: Run, root: int) -> Outcome:
            f_t = drafting.root_feature(run)
            if trees:  # an EAGLE-2 step: the head's tree alone
                tree = drafting.draft(f_t, root)
            else:  # the first step: plain decoding's next 5 tokens grafted on (all accepted), head or not
                tree = drafting.draft(f_t, root) if first_with_head else drafting.skip(f_t, root)
                graft(tree, [plain[1:6]], 99, [HEAD] * len(tree.tokens))
            draft = EagleDraft.of(tree, f_t)
            v = verifier.verify(run, draft.tokens, draft.spec)
            w = verifier.accept(run, v)
            verifier.commit(run, v, w)
            drafting.commit(v, w.path)
            trees.append(tree)
            return path_outcome(v, w, lambda: None)

        run = Run(tiny_lm, ids, s, hybrid.CARD.name, cfg)
        tables = head.config.calibration, head.config.confidence
        drafting, verifier = EagleProposer(drafter(tiny_lm, head, cfg.head_dtype), cfg, *tables), TreeVerifier()
        drafting.start(run, run.prefill())  # as Speculator.start does
        assert run.decode(step).output_ids == plain
        return trees[1]

    drafted, skipped = second_tree(True), second_tree(False)
    assert skipped.tokens == drafted.tokens and skipped.parents == drafted.parents
    assert skipped.score == pytest.approx(drafted.score, abs=1e-9)


@pytest.mark.soak  # the fast tier: tests/methods/test_generate_lossless.py
def test_sampling_through_generate_keeps_the_target_distribution(peaked):
    """T = 0.8: the token after the first, drawn through the tree (head, pool or residual), is distributed as p."""
    kw = hybrid.tiny_resources(peaked)
    second_token_follows_p(peaked, lambda ids, s: hybrid.generate(peaked, ids, s, **kw))


@pytest.mark.full
def test_copy_steps_keep_the_target_distribution(peaked, monkeypatch):
    """T = 0.8 with the first step a copy step (the pool's chain alone, no head): the token it verifies, drawn
    by the tree rule over a point mass, is still distributed as p. The pool proposes the target's argmax, so
    both acceptance and the residual draw happen often."""
    kw = hybrid.tiny_resources(peaked)
    init = hybrid.PoolProposer.__init__

    def copying(self, head, cfg) -> None:
        init(self, head, cfg)
        self.pool_run = cfg.copy_after  # as if the step before had accepted a copy

    argmax: dict[tuple[int, ...], int] = {}  # the runs share a prompt: a context's argmax is computed once

    def greedy_pool(seq, max_ngram, min_ngram, length, count):
        if tuple(seq) not in argmax:
            with torch.no_grad():
                argmax[tuple(seq)] = int(peaked.hf(torch.tensor([seq], device=peaked.device)).logits[0, -1].argmax())
        return [[argmax[tuple(seq)]]]

    monkeypatch.setattr(hybrid.PoolProposer, "__init__", copying)
    monkeypatch.setattr(hybrid, "lookup_tails", greedy_pool)
    copied: list[bool] = []

    def run(ids, s):
        trace = hybrid.generate(peaked, ids, s, **kw)
        copied.append(trace.steps[0].detail_as(HybridDetail).copy)
        return trace

    second_token_follows_p(peaked, run)
    assert all(copied)


def test_a_chain_alternates_its_labels_and_a_branching_tree_does_not():
    """A copy step's verified tree is one long row: its labels alternate above and below it."""
    from specviz.output.viz.tree import label_positions

    chain = label_positions([-1, 0, 1, 2, 3])
    assert chain == ["middle left", "bottom center", "top center", "bottom center", "middle right"]
    assert label_positions([-1, 0, 0, 1]) == ["middle left", "top center", "middle right", "middle right"]
