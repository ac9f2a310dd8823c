"""DFlash: the block drafter drafts a whole block in one pass, its training sees what inference sees, its files fail
in one sentence, and the fit prices its block on the device's curve."""

from __future__ import annotations

import json

import pytest
import torch

from specviz import methods
from specviz.core.sampling import ConfigError, Sampling
from specviz.corpus.shards import Sequence
from specviz.heads.dflash import DFlashHead, load_head, new_head, save_head
from specviz.heads.eagle import HeadError
from specviz.training import dflash_train
from specviz.tuning import fit
from tests.conftest import method_kwargs


def test_a_block_sees_the_context_before_its_anchor_and_its_own_block_only():
    see = dflash_train.block_mask(torch.tensor([[3, 5, -1]]), T=8, block=2)[0, 0]  # [3·2, 8 + 3·2]
    assert see.shape == (6, 14)
    assert see[0, :8].tolist() == [True] * 3 + [False] * 5 and see[1, :8].tolist() == see[0, :8].tolist()
    assert see[2, :8].tolist() == [True] * 5 + [False] * 3
    assert not see[4:, :8].any(), "a padding anchor sees no context"
    own = see[:, 8:].int().tolist()
    assert own == [[1, 1, 0, 0, 0, 0]] * 2 + [[0, 0, 1, 1, 0, 0]] * 2 + [[0, 0, 0, 0, 1, 1]] * 2


def test_anchors_are_answer_positions_with_an_answer_token_after_them():
    mask = torch.tensor([False, False, False, True, True, True, True, True, False, False])
    got = dflash_train.anchors(mask, 8, 2, torch.Generator().manual_seed(0))
    assert len(got) == 3 and all(1 <= s <= 6 and mask[s + 1] for s in got.tolist())
    assert got.tolist() == sorted(got.tolist())


@pytest.fixture(scope="module")
def trainer_and_data(tiny_lm):
    gen = torch.Generator().manual_seed(3)
    seqs = []
    for _ in range(6):
        ids = torch.randint(3, 512, (40,), generator=gen)
        mask = torch.zeros(40, dtype=torch.bool)
        mask[10:] = True
        seqs.append(Sequence(ids, torch.empty(40, 0), mask))
    return dflash_train.DFlashTrainer(batch_tokens=128, max_len=40, draft_vocab=0, block=4, depth=1), seqs


def test_training_lowers_the_block_loss(tiny_lm, trainer_and_data):
    trainer, seqs = trainer_and_data
    from specviz.corpus.data import in_memory

    head = trainer.new_head(tiny_lm, in_memory(seqs), 0)
    batch = trainer.batches(tiny_lm, head, seqs, 0)[0].make()
    opt = torch.optim.AdamW(head.parameters(), lr=3e-3)
    first = None
    for _ in range(30):
        loss, logs = trainer.loss(tiny_lm, head, batch)
        first = first if first is not None else float(loss.detach())
        loss.backward()
        opt.step()
        opt.zero_grad()
    # the tiny target's labels are near-uniform over 49,152 tokens (their entropy is most of the loss), yet fitting
    # them moves the loss by several nats a block
    assert float(loss.detach()) < first - 3.0 and "acc1" in logs


def test_held_out_ranks_cover_every_block_position(tiny_lm, trainer_and_data):
    trainer, seqs = trainer_and_data
    head = new_head(tiny_lm.hf.config, tiny_lm.name, seed=0, block=4).eval()
    ranks = trainer.ranks(tiny_lm, head, [Sequence(s.ids, s.hidden, s.mask) for s in seqs[:2]])
    assert len(ranks) == 3 and all(len(r) > 0 for r in ranks)
    assert len(ranks[0]) >= len(ranks[2]), "a later position has fewer anchors whose token exists"


def test_the_drafter_runs_once_per_step_whatever_its_block(sticky, sticky_prompt, monkeypatch):
    calls = []
    real = DFlashHead.forward
    monkeypatch.setattr(DFlashHead, "forward", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    kw = method_kwargs("dflash", sticky)
    trace = methods.get("dflash").generate(sticky, sticky_prompt[:30], Sampling(max_new_tokens=20), **kw)
    drafting = [s for s in trace.steps if s.proposed]
    assert drafting and len(calls) == len(drafting), "one drafter pass a step, not one per drafted token"
    assert max(s.proposed for s in drafting) == 3, "the tiny_lm drafter's block of 4: the root and 3 drafts"


def test_a_saved_drafter_loads_and_a_damaged_one_fails_in_one_sentence(tiny_lm, tmp_path):
    head = new_head(tiny_lm.hf.config, tiny_lm.name, torch.arange(0, 512, 2), seed=1, block=4, depth=2)
    save_head(head, tmp_path, dtype=torch.float32)
    back = load_head(tmp_path, tiny_lm.hf.config)
    assert back.config.block == 4 and len(back.blocks) == 2 and torch.equal(back.draft_ids, head.draft_ids)
    assert torch.equal(back.fuse.weight, head.fuse.weight)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(HeadError) as err:
        load_head(tmp_path, tiny_lm.hf.config)
    assert "\n" not in str(err.value)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "block": 99}))
    with pytest.raises(HeadError):
        load_head(tmp_path, tiny_lm.hf.config)


def test_a_block_outside_the_drafters_range_is_refused():
    with pytest.raises(ConfigError):
        methods.get("dflash").Config(block=1)
    with pytest.raises(ConfigError):
        methods.get("dflash").Config(block=17)


def _cost(ratio_at_16: float) -> fit.DeviceCost:
    ks = [1, 2, 4, 8, 16]
    ms = [10 * (1 + (ratio_at_16 - 1) * (k - 1) / 15) for k in ks]
    sample = fit.StepSample({"block": 8}, 8, 1.0, 10.0, 0.5)
    return fit.DeviceCost("test", ks, ms, 10.0, {"dflash": [sample]})


def test_the_fit_drafts_a_long_block_on_a_flat_curve_and_a_short_one_on_a_steep_one(monkeypatch):
    table = ((0.8, 0.1),) * 7  # every position as likely as the last: a long block pays where verifying is free
    monkeypatch.setattr(fit, "acceptance", lambda method: table)
    flat, steep = fit._search("dflash", _cost(1.02)), fit._search("dflash", _cost(3.0))
    assert flat.best.fields == {"block": 8}, "capped by the block the drafter was trained on"
    assert steep.best.fields["block"] < 8 and steep.best.speedup > 1
    assert "a block of" in flat.describe()


def test_the_block_figure_lists_its_steps_in_decoding_order(sticky, sticky_prompt):
    """Its rows are categories: drawn verdict by verdict, a step whose first draft was kept came before earlier steps
    whose first draft missed, unless the axis names the order."""
    from specviz.output.viz.dflash import block_figure

    kw = method_kwargs("dflash", sticky)
    trace = methods.get("dflash").generate(sticky, sticky_prompt[:30], Sampling(max_new_tokens=24), **kw)
    rows = [f"step {s.index}" for s in trace.steps if s.proposed][-10:]
    assert list(block_figure(trace).layout.yaxis.categoryarray) == rows
