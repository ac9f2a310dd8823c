"""Medusa heads and the medusa method: head init, save/load, greedy identity, typical acceptance."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest
import torch

from specviz.core.sampling import ConfigError, Sampling
from specviz.heads.medusa import (
    HeadsConfig,
    HeadsError,
    load_calibration,
    load_heads,
    new_heads,
    save_heads,
)
from specviz.methods import ar, medusa
from specviz.trees.head_tree import build_tree
from tests.conftest import PROMPTS

ACC = [[0.6, 0.2, 0.1], [0.4, 0.15, 0.1], [0.3, 0.1, 0.05]]


def tiny_heads(lm, seed: int = 0, random: bool = True, num_heads: int = 3):
    """Heads over the tiny model's full vocabulary; random W1 (or the zero init)."""
    heads = new_heads(
        lm,
        HeadsConfig(num_heads=num_heads, hidden_size=64, draft_vocab=len(lm.tokenizer), model="tiny"),
        torch.arange(len(lm.tokenizer)),
    )
    if random:
        torch.manual_seed(seed)
        for blk in heads.blocks:
            torch.nn.init.normal_(blk[0].linear.weight, std=0.3)
    return heads.eval().requires_grad_(False)


def test_zero_init_heads_predict_the_next_token(tiny_lm) -> None:
    vocab = torch.tensor([5, 17, 200, 4000, 49151])
    heads = new_heads(tiny_lm, HeadsConfig(num_heads=3, hidden_size=64, draft_vocab=5), vocab)
    h = torch.randn(7, 64, dtype=torch.float64)
    out = heads(h)  # [7, 3, 5]
    want = tiny_lm.lm_head(h).float()[:, vocab]
    for k in range(3):
        torch.testing.assert_close(out[:, k], want, atol=1e-4, rtol=1e-4)


def test_save_load_and_clear_errors(tiny_lm, tmp_path) -> None:
    heads = tiny_heads(tiny_lm)
    save_heads(heads, tmp_path)
    back = load_heads(tiny_lm, tmp_path)
    h = torch.randn(2, 64)
    torch.testing.assert_close(back(h), heads(h))
    assert len(load_heads(tiny_lm, tmp_path, num_heads=2).blocks) == 2
    save_heads(heads, tmp_path / "bf16", dtype=torch.bfloat16)  # how the committed heads are stored
    small = load_heads(tiny_lm, tmp_path / "bf16")
    for got, had in zip(small.blocks.parameters(), heads.blocks.parameters(), strict=True):
        assert got.dtype == torch.float32 and torch.equal(got, had.to(torch.bfloat16).float())
    with pytest.raises(HeadsError, match="between 1 and 3"):
        load_heads(tiny_lm, tmp_path, num_heads=4)
    with pytest.raises(HeadsError, match="train"):
        load_heads(tiny_lm, tmp_path / "nowhere")
    (tmp_path / "heads.safetensors").write_bytes(b"garbage")
    with pytest.raises(HeadsError, match="Cannot read"):
        load_heads(tiny_lm, tmp_path)
    with pytest.raises(HeadsError, match="calibrate"):
        load_calibration(tmp_path)


def test_config_validation() -> None:
    with pytest.raises(ConfigError):
        medusa.Config(total_tokens=-1)  # 0 is "fitted to the device"
    with pytest.raises(ConfigError):
        medusa.Config(rule="maybe")
    with pytest.raises(ConfigError):
        medusa.Config(eps=0)


@pytest.mark.full  # random heads on the 49k-vocabulary model; the fast identity is the contract's matrix
@pytest.mark.parametrize("total", [1, 5, 13])
def test_greedy_identity_tiny(tiny_lm, total: int) -> None:
    s = Sampling(max_new_tokens=16)  # as many accepted drafts as 32 tokens gave (one, for trees of 5 and 13)
    cfg = medusa.Config(heads=3, total_tokens=total)
    longer = 0
    for i, prompt in enumerate(PROMPTS[:2]):
        ids = tiny_lm.encode_prompt(prompt)
        ref = ar.generate(tiny_lm, ids, s)
        for random in (True, False):
            heads = tiny_heads(tiny_lm, seed=i, random=random)
            tr = medusa.generate(tiny_lm, ids, s, cfg, heads=heads, calibration=ACC)
            assert tr.output_ids == ref.output_ids
            assert sum(st.forward_tokens for st in tr.steps if st.forward_tokens) <= len(tr.steps) * total
            longer += sum(st.accepted > 1 for st in tr.steps)
            for st in tr.steps:
                if st.detail:
                    assert st.detail.measured == st.accepted or tr.steps[-1] is st
    if total > 1:
        assert longer > 0  # drafts were really accepted, so identity is not trivial


def test_trace_detail_is_consistent(tiny_lm) -> None:
    ids = tiny_lm.encode_prompt(PROMPTS[0])
    tr = medusa.generate(
        tiny_lm,
        ids,
        Sampling(max_new_tokens=16),
        medusa.Config(heads=3, total_tokens=7),
        heads=tiny_heads(tiny_lm, random=False),
        calibration=ACC,
    )
    json.dumps(asdict(tr.steps[0].detail))  # plain data
    st = tr.steps[0]
    nodes, parents, path = st.detail.nodes, st.detail.parents, st.detail.path
    assert len(nodes) == len(parents) == 7 and parents[0] == -1
    assert [nodes[j]["token"] for j in path] == st.committed
    assert st.detail.predicted == pytest.approx(1 + 0.6 + 0.24 + 0.2 + 0.1 + 0.09 + 0.08, abs=1e-4)
    for j, node in enumerate(nodes):
        assert node["status"] in ("accepted", "rejected", "passed", "unreached")
        if j and node["status"] == "rejected":
            assert "target chose" in node["reason"]


def test_typical_acceptance(tiny_lm) -> None:
    ids = tiny_lm.encode_prompt(PROMPTS[1])
    heads = tiny_heads(tiny_lm)
    hot = Sampling(max_new_tokens=24, temperature=1.0, seed=3)
    # at T = 0 the target distribution is a point mass, so typical acceptance is greedy matching
    cold = medusa.generate(
        tiny_lm,
        ids,
        Sampling(max_new_tokens=24),
        medusa.Config(heads=3, total_tokens=9, rule="typical"),
        heads=heads,
        calibration=ACC,
    )
    assert cold.output_ids == ar.generate(tiny_lm, ids, Sampling(max_new_tokens=24)).output_ids
    # a vanishing threshold accepts every node, so each step commits the tree's full depth + 1
    loose = medusa.generate(
        tiny_lm,
        ids,
        hot,
        medusa.Config(heads=3, total_tokens=9, rule="typical", eps=1e-12, delta=1e-12),
        heads=heads,
        calibration=ACC,
    )
    assert all(st.accepted == 4 for st in loose.steps[:-1])
    # the default threshold rejects low-probability drafts and says why
    strict = medusa.generate(
        tiny_lm, ids, hot, medusa.Config(heads=3, total_tokens=9, rule="typical"), heads=heads, calibration=ACC
    )
    reasons = [n["reason"] for st in strict.steps if st.detail for n in st.detail.nodes if n["status"] == "rejected"]
    assert reasons and all("threshold" in r for r in reasons)
    assert strict.mean_accepted < loose.mean_accepted
    # lossless acceptance at T > 0 is reproducible under a seed
    a = medusa.generate(tiny_lm, ids, hot, medusa.Config(heads=3, total_tokens=9), heads=heads, calibration=ACC)
    b = medusa.generate(tiny_lm, ids, hot, medusa.Config(heads=3, total_tokens=9), heads=heads, calibration=ACC)
    assert a.output_ids == b.output_ids


def test_positions_align_heads_with_future_tokens() -> None:
    from specviz.corpus.distill import Sequence
    from specviz.training.medusa_train import IGNORE, OOV, draft_map, positions

    ids = torch.tensor([7, 8, 20, 21, 22])  # two prompt tokens, three continuation tokens
    hidden = torch.arange(5, dtype=torch.float16)[:, None].expand(5, 3)
    seq = Sequence(ids=ids, hidden=hidden, mask=torch.tensor([0, 0, 1, 1, 1], dtype=torch.bool))
    to_draft = draft_map(torch.tensor([20, 21, 7]), 30)  # token 22 is outside the draft vocabulary
    h, y = positions([seq], 2, to_draft)
    assert h[:, 0].tolist() == [1, 2, 3]  # from the last prompt token (it produced the first root)
    assert y.tolist() == [[1, OOV], [OOV, IGNORE], [IGNORE, IGNORE]]


def _cycle_data(lm, n: int = 6):
    """Sequences cycling through 4 tokens, each token's hidden state a fixed random vector."""
    from specviz.corpus.distill import Sequence

    gen = torch.Generator().manual_seed(0)
    table = torch.randn(4, 64, generator=gen)
    seqs = []
    for i in range(n):
        cyc = torch.tensor([(i + t) % 4 for t in range(24)])
        seqs.append(Sequence(ids=cyc + 300, hidden=table[cyc].half(), mask=torch.arange(24) >= 2))
    return seqs


def test_training_learns_and_resumes(tiny_lm, tmp_path) -> None:
    from specviz.corpus.data import in_memory
    from specviz.training.loop import fit
    from specviz.training.medusa_train import MedusaTrainer
    from specviz.training.trainer import rank_accuracy

    seqs = _cycle_data(tiny_lm)
    cfg = HeadsConfig(num_heads=2, hidden_size=64, draft_vocab=16, model="tiny")
    trainer = MedusaTrainer(heads=2, layers=1, draft_vocab=16, batch=32)
    tc = replace(MedusaTrainer.recipe, epochs=12, lr=1e-2)
    fresh = new_heads(tiny_lm, cfg, torch.arange(300, 316))
    before, _ = rank_accuracy(trainer.ranks(tiny_lm, fresh, seqs), 3)
    heads = fit(tiny_lm, trainer, in_memory(seqs), tc, tmp_path / "ckpt").head
    after, n = rank_accuracy(trainer.ranks(tiny_lm, heads, seqs), 3)
    assert n == 6 * 22 and all(row[0] > 0.95 for row in after)
    assert all(b[0] < 0.5 for b in before)
    again = fit(tiny_lm, trainer, in_memory(seqs), tc, tmp_path / "ckpt", resume=True).head  # finished: no step
    h = torch.randn(3, 64)
    torch.testing.assert_close(again(h), heads(h))


def test_teacher_distribution_is_the_models_own_next_token(tiny_lm) -> None:
    """Soft targets: head k's teacher at h_t is the model's distribution from h_{t+k}, whose argmax is
    the distilled (greedy) token t+1+k, the hard target."""
    from specviz.corpus.distill import distill_batch
    from specviz.training.medusa_train import IGNORE, draft_map, positions, teacher_probs

    seqs = distill_batch(tiny_lm, ["Count from one to ten.", "Name three colours."], 12)
    vocab = torch.arange(tiny_lm.hf.config.vocab_size)
    heads = new_heads(tiny_lm, HeadsConfig(num_heads=3, hidden_size=64, draft_vocab=len(vocab), model="tiny"), vocab)
    hidden, targets = positions(seqs, 3, draft_map(vocab, len(vocab)))
    idx = torch.arange(len(hidden))
    teacher = teacher_probs(heads, hidden, targets, idx)
    valid = targets != IGNORE
    assert valid.sum() > 20 and torch.equal(teacher.argmax(-1)[valid], targets[valid])
    torch.testing.assert_close(teacher.sum(-1)[valid], torch.ones(int(valid.sum())))
    assert float(teacher[~valid].abs().sum()) == 0.0


def test_soft_loss_with_one_hot_teacher_is_the_hard_loss() -> None:
    from specviz.training.medusa_train import IGNORE, head_loss

    torch.manual_seed(0)
    logits = torch.randn(5, 2, 7)
    targets = torch.tensor([[1, 2], [3, IGNORE], [0, 6], [4, 4], [IGNORE, IGNORE]])
    one_hot = torch.nn.functional.one_hot(targets.clamp_min(0), 7).float() * (targets != IGNORE)[..., None]
    hard, _ = head_loss(logits, targets)
    for soft in (0.5, 1.0):
        mixed, _ = head_loss(logits, targets, one_hot, soft)
        torch.testing.assert_close(mixed, hard)
    flat = torch.full((5, 2, 7), 1 / 7)
    assert float(head_loss(logits, targets, flat, 1.0)[0]) != float(hard)


@pytest.mark.parametrize("method", ["medusa", "hydra"])
@pytest.mark.parametrize("old", ["budget", "acceptance"])
def test_the_old_option_names_are_refused_in_one_sentence(method, old) -> None:
    """`total_tokens` (root included) was `budget` (drafted nodes) and `rule` was `acceptance`; the stored files were
    migrated once, so an old name is refused, naming today's options, not taken through a rename."""
    from specviz import methods

    with pytest.raises(ConfigError, match=f"has no option '{old}' .options: heads, total_tokens, rule"):
        methods.make_config(method, {old: "4"})
    with pytest.raises(TypeError):
        methods.get(method).Config(**{old: 4})


def test_the_tree_size_counts_the_root() -> None:
    """total_tokens (root included) was `budget` (drafted nodes, root not counted): budget B is total_tokens B + 1."""
    from specviz import methods
    from specviz.methods.base import settled
    from specviz.tuning import presets

    assert medusa.Config().total_tokens == 0 and settled(medusa.Config()).total_tokens == 5  # fitted, else 5
    assert methods.make_config("medusa", {"total_tokens": "17"}) == medusa.Config(total_tokens=17)
    assert presets.verified_tokens(medusa.Config(total_tokens=64)) == 64
    from specviz.tuning.calibrate import _sweep_medusa_args, sweep_sizes

    with pytest.raises(ValueError):  # the old option is gone: one name, total_tokens (root included)
        _sweep_medusa_args(["--sweep", "--budgets", "0,4"])
    assert sweep_sizes(_sweep_medusa_args(["--total-tokens", "1,5"])) == [1, 5]
    for b in (0, 4, 12):  # budget B built B drafted nodes under the root: so does the tree it names now
        assert len(build_tree(ACC, 3, medusa.Config(total_tokens=b + 1).total_tokens)[0]) == b + 1
