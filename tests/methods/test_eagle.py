"""EAGLE: head shapes and files, draft-tree growth rules, greedy identity, and statistical losslessness."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from scipy.stats import chisquare

from specviz.core.acceptance import drop, residual
from specviz.core.details import EagleDetail
from specviz.core.sampling import ConfigError, Sampling, target_probs
from specviz.core.trace import Trace
from specviz.heads.eagle import HeadError, load_head, new_head, save_head
from specviz.heads.eagle_drafter import Drafter
from specviz.methods import ar, eagle
from specviz.trees.draft_tree import DraftTree, grow_dynamic, grow_static, static_paths
from specviz.trees.tree import TreeSpec, verify_tree
from specviz.trees.walk import sample_path


@pytest.fixture(scope="module")
def tiny_head(tiny_lm):
    return new_head(tiny_lm.hf.config, "tiny", seed=1).to(torch.float64).eval().requires_grad_(False)


def drafted(lm, head, prompt: str, cfg: eagle.Config) -> tuple[DraftTree, Drafter, list[int]]:
    """Prefill target and head on a prompt, then grow one tree from the target's own next token."""
    ids = lm.encode_prompt(prompt)
    logits, hidden = lm.forward(ids, lm.new_cache())
    dr = Drafter(head, lm)
    dr.reset(ids, hidden)
    root = int(logits[-1].argmax())
    tree = DraftTree(tokens=[root])
    tree.feats[0], tree.logps[0] = dr.catch_up(hidden[-1], root)
    if cfg.tree == "static":
        grow_static(dr, tree, static_paths(head.config.calibration, cfg))
    else:
        grow_dynamic(dr, tree, cfg)
    return tree, dr, ids


def test_head_shapes_and_round_trip(tiny_lm, tmp_path):
    head = new_head(tiny_lm.hf.config, "tiny", draft_ids=torch.arange(0, 2000, 2))
    x = torch.randn(2, 5, 64)
    out = head(x, torch.randn(2, 5, 64), torch.arange(5).expand(2, -1))
    assert out.shape == (2, 5, 64)
    assert head.fc.in_features == 128 and isinstance(head.layer.input_layernorm, torch.nn.Identity)
    save_head(head, tmp_path, dtype=torch.float32)
    back = load_head(tmp_path, tiny_lm.hf.config)
    assert torch.equal(back.draft_ids, head.draft_ids)
    pos = torch.arange(5).expand(2, -1)
    assert torch.allclose(back(x, x, pos), head(x, x, pos))


def test_missing_corrupt_and_foreign_heads_are_refused(tiny_lm, real_lm_config, tmp_path):
    with pytest.raises(HeadError, match="train one"):
        load_head(tmp_path / "nowhere")
    save_head(new_head(tiny_lm.hf.config), tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(HeadError, match="Cannot read"):
        load_head(tmp_path)
    with pytest.raises(HeadError, match="another model"):
        load_head(tmp_path, real_lm_config)
    (tmp_path / "config.json").write_text("{broken")
    with pytest.raises(HeadError, match="corrupt"):
        load_head(tmp_path)
    with pytest.raises(ConfigError, match="No EAGLE head"):
        eagle.generate(tiny_lm, [1, 2, 3], Sampling(max_new_tokens=2), eagle.Config(head=str(tmp_path / "x")))


@pytest.fixture(scope="module")
def real_lm_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=576, vocab_size=49152, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3
    )


def test_dynamic_tree_growth_rules(tiny_lm, tiny_head):
    cfg = eagle.Config(depth=4, top_k=3, total_tokens=10, head_dtype="model")
    tree, _, _ = drafted(tiny_lm, tiny_head, "Hello there", cfg)
    n = len(tree.tokens)
    assert n == 1 + cfg.top_k + (cfg.depth - 1) * cfg.top_k**2
    for rnd in range(2, cfg.depth + 1):
        fed = [i for i in range(n) if tree.expanded[i] == rnd]
        layer = [i for i in range(n) if tree.depth[i] == rnd - 1]
        best = sorted(layer, key=lambda i: (-tree.score[i], i))[: cfg.top_k]
        assert sorted(fed) == sorted(best)  # each round expands the top_k of the newest layer
    for i in range(1, n):
        assert tree.score[i] <= tree.score[tree.parents[i]] + 1e-12
        assert math.isclose(tree.conf[i], math.exp(tree.score[i] - tree.score[tree.parents[i]]), rel_tol=1e-6)
    kept = [i for i in range(n) if tree.kept[i]]
    assert len(kept) == cfg.total_tokens and kept[0] == 0
    assert all(tree.parents[i] in kept for i in kept[1:])  # the rerank leaves a tree
    worst_kept = min(tree.score[i] for i in kept)
    assert all(tree.score[i] <= worst_kept for i in range(n) if not tree.kept[i])
    nodes, spec = tree.verified()
    assert nodes == kept and len(spec) == cfg.total_tokens


def test_static_tree_follows_the_sparse_tree(tiny_lm, tiny_head):
    cfg = eagle.Config(depth=3, top_k=4, total_tokens=9, tree="static", head_dtype="model")
    tree, _, _ = drafted(tiny_lm, tiny_head, "Hello there", cfg)
    paths = static_paths(tiny_head.config.calibration, cfg)
    assert len(tree.tokens) == len(paths) + 1 == cfg.total_tokens and all(tree.kept)
    assert TreeSpec(parents=tree.parents).parents == TreeSpec.from_paths(paths).parents


def test_tree_drafting_matches_sequential_drafting(tiny_lm, tiny_head):
    """Tree-masked drafting gives each node the feature a plain causal chain of its ancestors gives."""
    cfg = eagle.Config(depth=3, top_k=2, total_tokens=6, head_dtype="model")
    tree, _, ids = drafted(tiny_lm, tiny_head, "Count to ten", cfg)
    leaf = max((i for i in range(len(tree.tokens)) if tree.expanded[i] == 3), key=lambda i: tree.score[i])
    path = TreeSpec(parents=tree.parents).path_to(leaf)
    _, hidden = tiny_lm.forward(ids, tiny_lm.new_cache())
    chain = Drafter(tiny_head, tiny_lm)
    chain.reset(ids, hidden)
    feat, _ = chain.catch_up(hidden[-1], tree.tokens[0])
    for node in path[1:]:
        chain.push(feat[None], [tree.tokens[node]])
        feat, _ = chain.flush()
    assert torch.allclose(feat, tree.feats[leaf], atol=1e-9)


def test_trace_detail_is_plain_data(tiny_lm, tiny_head):
    s = Sampling(max_new_tokens=8, temperature=0.9, seed=3)
    cfg = eagle.Config(head_dtype="model")
    t = eagle.generate(tiny_lm, tiny_lm.encode_prompt("Hi"), s, cfg, head=tiny_head)
    assert Trace.from_json(t.to_json()) == t
    d = t.steps[0].detail
    assert isinstance(d, EagleDetail) and d.decisions is not None  # T > 0: the sampling decisions are kept
    assert d.path[0] == 0 and all(d.tree["kept"][i] for i in d.path)
    assert len(d.verify_parents) == t.steps[0].forward_tokens
    assert -1 <= d.features["cos_pred_true"] <= 1


@pytest.mark.parametrize(
    "bad", [{"depth": -1}, {"top_k": 33}, {"total_tokens": 1}, {"tree": "bushy"}, {"head_dtype": "int8"}]
)
def test_bad_config_is_refused(bad):
    with pytest.raises(ConfigError):
        eagle.Config(**bad)


def fixed_tree_case(lm, head):
    """A fixed context and a drafted tree whose tokens are re-pointed at likely and unlikely target tokens."""
    cfg = eagle.Config(depth=2, top_k=3, total_tokens=7, head_dtype="model")
    tree, _, ids = drafted(lm, head, "Tell me a story", cfg)
    nodes, spec = tree.verified()
    tokens = [tree.tokens[n] for n in nodes]
    s = Sampling(max_new_tokens=8, temperature=0.4)  # the random model's p: top-1 about 0.4, a long tail

    def scored() -> torch.Tensor:
        cache = lm.new_cache()
        lm.forward(ids, cache)
        return target_probs(verify_tree(lm, cache, tokens, spec)[0], s)

    kid = max(spec.children(0), key=lambda c: len(spec.children(c)))
    for node in (0, kid):  # a node's p depends on its ancestors only, so re-score after each level
        top = scored()[node].topk(6).indices.tolist()
        kids = [c for c in spec.children(node) if c != kid] + ([kid] if node == 0 else [])
        for child, tok in zip(reversed(kids), (top[0], top[4], top[1]), strict=False):
            tokens[child] = tok  # `kid` gets the likeliest token, so its own children are reached often
    return tokens, spec, scored(), kid


def test_drop_is_the_residual_against_a_point_mass():
    p = torch.softmax(torch.randn(50, dtype=torch.float64), 0)
    assert torch.allclose(drop(p, 7), residual(p, torch.nn.functional.one_hot(torch.tensor(7), 50).double()))


def chi2_pvalue(samples: list[int], p: torch.Tensor, bins: int = 10) -> float:
    top = p.topk(bins).indices.tolist()
    counts = [sum(1 for x in samples if x == t) for t in top]
    counts.append(len(samples) - sum(counts))
    expected = [float(p[t]) * len(samples) for t in top]
    expected.append(len(samples) - sum(expected))
    return float(chisquare(counts, expected).pvalue)


def on_support(tokens: list[int], probs: torch.Tensor, k: int) -> tuple[list[int], torch.Tensor]:
    """The same tree over a smaller vocabulary: the tree's tokens and each node's top k, p renormalised there
    (the sampler only ever sees a token list and [n, V] distributions, so V changes nothing but the cost)."""
    support = sorted(set(tokens) | set(probs.topk(k, dim=-1).indices.flatten().tolist()))
    index = {t: i for i, t in enumerate(support)}
    sub = probs[:, support]
    return [index[t] for t in tokens], sub / sub.sum(-1, keepdim=True)


@pytest.mark.parametrize(
    "vocab",
    [  # each draw copies and renormalises a [V] distribution: 5000 of them over 49k tokens take ~10 s
        pytest.param(256, id="top256"),
        pytest.param(None, id="full-vocab", marks=pytest.mark.soak),
    ],
)
def test_tree_sampling_keeps_the_target_distribution(tiny_lm, tiny_head, vocab):
    """Chi-square: the first token after the root, and the next one, are distributed as the target's p.

    The fast tier samples the same tree with p restricted to the tree's tokens and each node's top 256 (same
    sample size and thresholds); the whole 49k vocabulary runs in the soak command."""
    tokens, spec, probs, kid = fixed_tree_case(tiny_lm, tiny_head)
    if vocab is not None:
        tokens, probs = on_support(tokens, probs, vocab)
    gen = torch.Generator().manual_seed(1234)
    first, second = [], []
    for _ in range(5000):
        path, nxt, _ = sample_path(tokens, spec, probs, gen)
        first.append(tokens[path[1]] if len(path) > 1 else nxt)
        if len(path) > 1 and path[1] == kid and spec.children(kid):
            second.append(tokens[path[2]] if len(path) > 2 else nxt)
    assert 0.2 < sum(1 for x in first if x in [tokens[k] for k in spec.children(0)]) / len(first) < 1
    assert chi2_pvalue(first, probs[0]) > 1e-3
    assert len(second) > 300 and chi2_pvalue(second, probs[kid]) > 1e-3
    biased = [tokens[kid]] * 500 + first[:4500]  # the same test rejects a sampler that favours the draft
    assert chi2_pvalue(biased, probs[0]) < 1e-6


@pytest.fixture(scope="module")
def tiny_data(tokenizer):
    """A fp32 tiny model and its own greedy continuations of four prompts, with hidden states."""
    from specviz.corpus import distill
    from tests.conftest import make_tiny

    lm = make_tiny(tokenizer, seed=3)
    lm.hf.float()
    lm.dtype = torch.float32
    prompts = ["Hello there", "What is a cat?", "Tell me a joke", "Write some code"]
    return lm, prompts, distill.distill_batch(lm, prompts, 20)


@pytest.mark.full  # trains twice (whole, then cut and resumed)
def test_training_learns_and_resumes_exactly(tiny_data, tmp_path):
    from specviz.training import eagle_train as et
    from specviz.training.loop import finish
    from specviz.training.trainer import rank_accuracy
    from specviz.tuning import eagle_replay
    from tests.train_check import whole_cut_resumed

    lm, prompts, seqs = tiny_data
    trainer = et.EagleTrainer(batch_tokens=256, draft_vocab=512, noise=0.0, unroll=1)
    cfg = replace(et.EagleTrainer.recipe, epochs=30, warmup=0.1, lr=3e-3)
    run, cut, resumed = whole_cut_resumed(lm, trainer, cfg, seqs, tmp_path)
    full, stats = run.head, run.record
    assert cut["steps"] == 1 < cut["planned_steps"] == stats["steps"]
    for (name, a), (_, b) in zip(full.named_parameters(), resumed.named_parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), name
    acc, _ = rank_accuracy(trainer.ranks(lm, full, seqs), trainer.n_ranks)
    assert acc[0][0] > 0.6 and acc[1][0] > 0.3  # it memorised its data, also drafting from its own features
    final = finish(lm, trainer, run, seqs, tmp_path / "head")
    head = load_head(tmp_path / "head", lm.hf.config)
    assert head.config.calibration[0][0] == final["heldout_top1_by_depth"][0]
    s = Sampling(max_new_tokens=16)
    for p in prompts[:2]:
        t = eagle.generate(lm, lm.encode_prompt(p), s, eagle.Config(head=str(tmp_path / "head")))
        assert t.output_ids == ar.generate(lm, lm.encode_prompt(p), s).output_ids
        assert t.mean_accepted > 1.5
    replay = eagle_replay.replay_accepted(head, lm, seqs[:2], [eagle.Config(depth=3, top_k=3, total_tokens=6)])
    assert replay["dynamic/3/3/6"]["A"] > 1.5


def test_unrolled_depths_see_only_what_inference_sees(tiny_data):
    """Row i at depth d depends on true features at rows <= i-(d-1), and not on any later one."""
    from specviz.training import eagle_train as et
    from specviz.training.eagle_loss import collate, unrolled

    lm, _, seqs = tiny_data
    head = et.new_head(lm.hf.config, lm.name, None, seed=1).eval()
    b = collate(seqs, [0], 512)
    emb = lm.hf.get_input_embeddings()(b["tokens"]).float()
    feats = b["feats"]
    base = unrolled(head, feats, emb, 3)
    i = 9
    later = feats.clone()
    later[:, i - 1 :] += 1.0  # rows >= i-1 (depth 3 sees rows <= i-2)
    moved = unrolled(head, later, emb, 3)
    torch.testing.assert_close(moved[2][:, i], base[2][:, i], atol=1e-6, rtol=0)
    assert not torch.allclose(moved[1][:, i], base[1][:, i])  # depth 2 sees row i-1
    with torch.enable_grad():
        cfg = et.EagleTrainer(unroll=3, noise=0.0, draft_vocab=0)
        shared = {"weight": lm.lm_head.weight.detach().float(), "feat_std": 1.0, "seed": 0}
        loss, logs = cfg.loss(lm, head, b | shared)
        loss.backward()
    assert {"acc", "acc2", "acc3"} <= set(logs)
