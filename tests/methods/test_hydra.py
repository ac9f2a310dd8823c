"""Hydra: heads that read their branch, the training data's alignment, what they learn that Medusa's cannot,
files and errors, and losslessness at T = 0.8 through the real generate."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specviz.core.details import HydraDetail
from specviz.core.sampling import ConfigError, Sampling
from specviz.corpus.data import in_memory
from specviz.corpus.shards import Sequence
from specviz.heads.hydra import HydraConfig, load_calibration, load_heads, new_heads, save_heads
from specviz.heads.medusa import HeadsError
from specviz.methods import ar, hydra
from specviz.training.hydra_train import HydraTrainer, positions
from specviz.training.loop import fit
from specviz.training.medusa_train import IGNORE, OOV, MedusaTrainer, draft_map
from specviz.training.trainer import rank_accuracy as accuracy
from specviz.trees.tree import TreeSpec
from tests.sampling_check import second_token_follows_p


def test_positions_give_each_head_its_branch_and_target() -> None:
    ids = torch.tensor([7, 8, 20, 21, 22])  # two prompt tokens, three continuation tokens
    hidden = torch.arange(5, dtype=torch.float16)[:, None].expand(5, 3)
    seq = Sequence(ids=ids, hidden=hidden, mask=torch.tensor([0, 0, 1, 1, 1], dtype=torch.bool))
    h, branch, y = positions([seq], 2, draft_map(torch.tensor([20, 21, 7]), 30))  # 22 is out of vocabulary
    assert h[:, 0].tolist() == [1, 2, 3]  # h_t for roots 20, 21, 22
    assert branch.tolist() == [[20, 21], [21, 22], [22, 0]]  # x_{t+1..t+k}; 0 past the end
    assert y.tolist() == [[1, OOV], [OOV, IGNORE], [IGNORE, IGNORE]]  # token t+1+k


def test_fresh_heads_start_as_the_models_next_token_predictor(tiny_lm) -> None:
    vocab = torch.arange(tiny_lm.hf.config.vocab_size)
    heads = new_heads(tiny_lm, HydraConfig(num_heads=2, hidden_size=64, draft_vocab=len(vocab), model="t"), vocab)
    h = torch.randn(3, 64, dtype=tiny_lm.dtype)
    want = tiny_lm.lm_head(h).argmax(-1)
    for k in (1, 2):
        assert torch.equal(heads.head_logits(k, h, torch.randint(0, 100, (3, k))).argmax(-1), want)


def test_propose_fills_each_node_from_its_own_branch(tiny_lm) -> None:
    kw = hydra.tiny_resources(tiny_lm)
    heads = kw["heads"]
    spec = TreeSpec.from_paths([(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)])
    h = torch.randn(64, generator=torch.Generator().manual_seed(0))  # not the global RNG: other tests move it
    tokens, head_p, reads = hydra.propose(heads, h, spec, root=42)
    for j in range(1, len(spec)):
        branch = [tokens[a] for a in spec.path_to(spec.parents[j])]
        assert reads[j - 1] == branch and branch[0] == 42
        probs = torch.softmax(heads.head_logits(len(branch), h[None], torch.tensor([branch])).float(), -1)[0]
        rank = spec.ranks[j][-1]
        assert tokens[j] == int(heads.vocab[probs.argsort(descending=True)[rank]])
        assert head_p[j - 1] == pytest.approx(float(probs.sort(descending=True).values[rank]), abs=1e-5)
    # the same rank under two different parents reads two branches, so (unlike Medusa) it may differ
    other, _, _ = hydra.propose(heads, h, spec, root=43)
    assert other[1:] != tokens[1:]


def _chain_data(n: int = 8, length: int = 24) -> list[Sequence]:
    """Sequences where each token fixes the next (a 5-cycle from a random start), and h_t carries nothing."""
    gen = torch.Generator().manual_seed(0)
    seqs = []
    for _ in range(n):
        start = int(torch.randint(0, 5, (1,), generator=gen))
        ids = torch.tensor([300 + (start + t) % 5 for t in range(length)])
        seqs.append(
            Sequence(ids=ids, hidden=torch.ones(length, 64, dtype=torch.float16), mask=torch.arange(length) >= 2)
        )
    return seqs


def train_heads(lm, seqs, trainer, tc, ckpt):
    """The loop on these sequences, resuming what ckpt holds."""
    return fit(lm, trainer, in_memory(seqs), tc, ckpt, resume=True).head


def rank_accuracy(lm, trainer, heads, seqs, ranks):
    """The held-out table of the heads on seqs."""
    return accuracy(trainer.ranks(lm, heads, seqs), ranks)


def test_hydra_learns_what_independent_heads_cannot_and_resumes(tiny_lm, tmp_path) -> None:
    """h_t is the same everywhere, so only the branch says what comes next: Hydra reaches ~1, Medusa ~1/5."""
    seqs = _chain_data()
    cfg = HydraTrainer(heads=2, layers=1, draft_vocab=16, batch=32)
    tc = replace(HydraTrainer.recipe, epochs=20, lr=1e-2, bf16=False)
    heads = train_heads(tiny_lm, seqs, cfg, tc, tmp_path / "ckpt")
    assert all(row[0] > 0.95 for row in rank_accuracy(tiny_lm, cfg, heads, seqs, ranks=3)[0])
    assert set(range(300, 305)) <= set(heads.vocab.tolist())
    mcfg = MedusaTrainer(heads=2, layers=1, draft_vocab=16, batch=32)
    medusa = train_heads(tiny_lm, seqs, mcfg, replace(MedusaTrainer.recipe, epochs=20, lr=1e-2), tmp_path / "m")
    assert all(row[0] < 0.4 for row in rank_accuracy(tiny_lm, mcfg, medusa, seqs, ranks=3)[0])
    again = train_heads(tiny_lm, seqs, cfg, tc, tmp_path / "ckpt")  # finished: resumes at the last step
    h, b = torch.randn(3, 64), torch.randint(300, 305, (3, 2))
    torch.testing.assert_close(again(h, b), heads(h, b))


def test_save_load_and_clear_errors(tiny_lm, tmp_path) -> None:
    heads = hydra.tiny_resources(tiny_lm)["heads"]
    save_heads(heads, tmp_path / "h")
    back = load_heads(tiny_lm, tmp_path / "h")
    h, b = torch.randn(2, 64), torch.randint(0, 100, (2, 3))
    torch.testing.assert_close(back(h, b), heads(h, b))
    assert len(load_heads(tiny_lm, tmp_path / "h", num_heads=2).heads) == 2
    with pytest.raises(HeadsError, match=r"config\.json missing"):
        load_heads(tiny_lm, tmp_path / "none")
    (tmp_path / "h" / "heads.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(HeadsError, match="Cannot read"):
        load_heads(tiny_lm, tmp_path / "h")
    with pytest.raises(HeadsError, match="calibrate hydra"):
        load_calibration(tmp_path / "h")
    with pytest.raises(ConfigError):
        hydra.Config(total_tokens=-1)  # 0 is "fitted to the device"


def test_trace_records_what_each_head_read(tiny_lm) -> None:
    ids = tiny_lm.encode_prompt("Tell me a story")
    trace = hydra.generate(tiny_lm, ids, Sampling(max_new_tokens=12), **hydra.tiny_resources(tiny_lm))
    assert trace.output_ids == ar.generate(tiny_lm, ids, Sampling(max_new_tokens=12)).output_ids
    step, detail = trace.detailed(HydraDetail)[0]
    root = detail.nodes[0]["text"]
    for j, node in enumerate(detail.nodes[1:], start=1):
        assert len(node["reads"]) == node["head"] and node["reads"][0] == root
        parent = detail.parents[j]
        assert parent == 0 or node["reads"][-1] == detail.nodes[parent]["text"]
    assert detail.measured == step.accepted


@pytest.mark.soak  # the fast tier: tests/methods/test_generate_lossless.py
def test_sampling_through_generate_keeps_the_target_distribution(peaked):
    kw = hydra.tiny_resources(peaked)
    second_token_follows_p(peaked, lambda ids, s: hydra.generate(peaked, ids, s, **kw))


def test_depth_views_come_from_the_traces(tiny_lm) -> None:
    from specviz.output.viz.depth import acceptance_by_depth, depth_figure, starts, step_at

    ids = tiny_lm.encode_prompt("Tell me a story")
    trace = hydra.generate(tiny_lm, ids, Sampling(max_new_tokens=12), **hydra.tiny_resources(tiny_lm))
    steps = [st for st, _ in trace.detailed(HydraDetail)]
    rates = acceptance_by_depth(trace, 3)
    assert rates[0] == pytest.approx(sum(st.drafts_accepted >= 1 for st in steps) / len(steps), abs=1e-4)
    assert rates == sorted(rates, reverse=True)
    offsets = starts(trace)
    assert offsets[0] == 0 and step_at(trace, offsets[-1]) is steps[-1] and step_at(trace, 10**6) is None
    fig = depth_figure({"medusa": [0.5, 0.2], "hydra": [0.6, 0.45]}, "t", "top-1")
    assert [b.name for b in fig.data] == ["Medusa", "Hydra"] and list(fig.data[1].y) == [0.6, 0.45]
