"""EAGLE-3's objective as options of the one trainer (issue 42): the feature term's weight, the depths' weights
0.8^(d-1), GRIFFIN's token-alignment mask, noise on depth 1 only, keeping the best evaluated head by the mean
top-1 of depths 1-3, and the CLI's flags, checks and manifest note for them."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from specviz.core.model import fused_layers
from specviz.corpus import distill
from specviz.corpus.data import in_memory
from specviz.heads import eagle as eagle_head
from specviz.heads import store
from specviz.heads.eagle3 import new_head as new_eagle3_head
from specviz.training import checkpoint, cli
from specviz.training.eagle3_train import Eagle3Trainer, collate3
from specviz.training.eagle_loss import aligned, collate, draft_index, noised, top_hits
from specviz.training.eagle_train import EagleTrainer
from specviz.training.loop import fit
from specviz.training.trainer import TrainConfig, best_score
from tests.training.test_train_loop import Toy, toy_rows


@pytest.fixture(scope="module")
def tiny(tokenizer):
    """A fp32 tiny model, its greedy continuations of two prompts with their layer inputs, and one batch of them."""
    from tests.conftest import make_tiny

    lm = make_tiny(tokenizer, seed=3)
    lm.hf.float()
    lm.dtype = torch.float32
    seqs = distill.distill_batch(lm, ["Hello there", "What is a cat?"], 12)
    for s in seqs:
        s.layers = lm.forward_layers(s.ids.tolist(), lm.new_cache(), fused_layers(2))[2].half()
    ids = torch.unique(torch.cat([s.ids for s in seqs]))  # a draft vocabulary of their tokens: top-64 holds it all
    assert len(ids) <= 64
    weight = lm.lm_head.weight.detach().float()[ids]
    return lm, seqs, ids, collate(seqs, [0, 1], 512) | {"weight": weight, "feat_std": 1.0, "seed": 0}


def eagle2_loss(tiny, **settings) -> tuple[float, dict]:
    lm, _, _, b = tiny
    head = eagle_head.new_head(lm.hf.config, lm.name, None, seed=1).eval()
    loss, logs = EagleTrainer(**{"noise": 0.0, "draft_vocab": 0} | settings).loss(lm, head, b)
    return float(loss.detach()), logs


def test_depth_weights_follow_the_setting_and_weigh_the_loss(tiny):
    assert EagleTrainer().depth_weights() == [1.0, 0.5]  # today's EAGLE-2: a flat weight past depth 1
    assert Eagle3Trainer().depth_weights() == pytest.approx([1.0, 0.8, 0.64])
    four = EagleTrainer(unroll=4, unroll_weight=0.8, unroll_geometric=True).depth_weights()
    assert four == pytest.approx([0.8 ** (d - 1) for d in range(1, 5)])
    two = eagle2_loss(tiny, unroll=2)[0]
    flat3, geo3 = eagle2_loss(tiny, unroll=3)[0], eagle2_loss(tiny, unroll=3, unroll_geometric=True)[0]
    assert flat3 - two == pytest.approx(2 * (flat3 - geo3), rel=1e-4)  # depth 3 weighs 0.5 flat, 0.25 geometric


def test_feature_weight_zero_drops_the_feature_term(tiny):
    loss, logs = eagle2_loss(tiny, unroll=1, ce_weight=1.0, feature_weight=0.0)
    assert loss == pytest.approx(logs["ce"], rel=1e-6) and logs["l1"] > 0  # measured, not trained
    assert eagle2_loss(tiny, unroll=1)[0] == pytest.approx(logs["l1"] + 0.1 * logs["ce"], rel=1e-6)
    assert eagle2_loss(tiny, unroll=1, feature_weight=2.0)[0] == pytest.approx(2 * logs["l1"] + 0.1 * logs["ce"])
    with pytest.raises(ValueError, match="both be 0"):
        EagleTrainer(ce_weight=0.0, feature_weight=0.0)


def test_griffin_mask_drops_exactly_the_rows_after_a_miss():
    alive = torch.ones(2, 8, dtype=torch.bool)
    hit1, hit2 = torch.ones(2, 8, dtype=torch.bool), torch.ones(2, 8, dtype=torch.bool)
    hit1[0, 2] = False  # depth 1, row 2: the true token fell outside the top-k
    hit2[0, 5] = False  # depth 2, row 5
    d2 = aligned(alive, hit1)
    d3 = aligned(d2, hit2)
    d4 = aligned(d3, torch.ones_like(alive))
    dropped = [{(int(b), int(i)) for b, i in (~d).nonzero() if i >= k} for k, d in ((1, d2), (2, d3), (3, d4))]
    assert dropped == [{(0, 3)}, {(0, 4), (0, 6)}, {(0, 5), (0, 7)}]  # each miss's descendants, nothing else
    assert not d4[:, :3].any()  # depth 4 has no drafted input before row 3
    logq = torch.log_softmax(torch.tensor([[4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]]), -1)
    p = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0]])  # the target's token 2: rank 3, then rank 2
    assert top_hits(logq, p, 3).tolist() == [True, True] and top_hits(logq, p, 2).tolist() == [False, True]


def test_griffin_mask_in_both_losses(tiny):
    """Top-k of the whole draft vocabulary keeps every row (the unmasked loss); top-1 of a random head drops rows."""
    lm, seqs, ids, b = tiny
    plain, _ = eagle2_loss(tiny, unroll=3)
    assert eagle2_loss(tiny, unroll=3, align_top=64)[0] == pytest.approx(plain, rel=1e-6)
    masked, logs = eagle2_loss(tiny, unroll=3, align_top=1)
    assert masked != pytest.approx(plain) and logs["kept3"] <= logs["kept2"] < 1
    head = new_eagle3_head(lm.hf.config, lm.name, ids, fused_layers(2), seed=1).eval()
    b3 = collate3(seqs, [0, 1], 512, draft_index(head, lm.hf.config.vocab_size)) | {"weight": b["weight"]}
    losses = {k: Eagle3Trainer(unroll=3, align_top=k).loss(lm, head, b3)[1] for k in (0, 1, 64)}
    assert losses[64]["loss"] == pytest.approx(losses[0]["loss"], rel=1e-6)
    assert losses[1]["loss"] != pytest.approx(losses[0]["loss"]) and losses[1]["kept3"] < 1
    ce = losses[0]
    assert ce["loss"] == pytest.approx(ce["ce1"] + 0.8 * ce["ce2"] + 0.64 * ce["ce3"], rel=1e-5)


def test_noise_is_bounded_seeded_and_per_layer(tiny):
    x = torch.zeros(3, 5, 6)
    a, b = noised(x, 0.2, 2.0, seed=7), noised(x, 0.2, 2.0, seed=7)
    assert torch.equal(a, b) and a.abs().max() <= 0.2 and a.abs().max() > 0.1 and noised(x, 0.0, 2.0, 7) is x
    lm, seqs, _, _ = tiny
    head = new_eagle3_head(lm.hf.config, lm.name, None, fused_layers(2), seed=1)
    spread = Eagle3Trainer(noise=0.2).context(lm, head, seqs)["spread"]  # one std per fused layer
    h = lm.hf.config.hidden_size
    assert spread.shape == (3 * h,) and torch.equal(spread[:h], spread[:h].flip(0))
    with pytest.raises(ValueError, match="--noise"):
        Eagle3Trainer(noise=-0.1)


class Scripted(Toy):
    """The toy head, its held-out top-1 by depth read from a script, one entry per measurement; each
    measurement notes the weights it saw (neither is a setting: a resumed run reads a script of its own)."""

    script: tuple[tuple[float, ...], ...] = ()
    seen: list

    @classmethod
    def of(cls, *script: tuple[float, ...]) -> Scripted:
        toy = cls()
        object.__setattr__(toy, "script", script)
        object.__setattr__(toy, "seen", [])
        return toy

    def ranks(self, lm, head, held):
        top1 = self.script[min(len(self.seen), len(self.script) - 1)]
        self.seen.append(head.weight.detach().clone())
        return [torch.tensor([0] * round(100 * a) + [1] * (100 - round(100 * a))) for a in top1]


# start, then four evaluations: depth 1 alone picks A, the mean of all four depths picks C, depths 1-3 pick B
START, A, B, C, D = (0, 0, 0, 0), (1.0, 0, 0, 0), (0.5, 0.5, 0.5, 0), (0.4, 0.4, 0.4, 1.0), (0, 0, 0, 0)
KEEP = replace(Toy.recipe, epochs=1, eval_every=24, keep_best=True, checkpoint_minutes=0.0)


def test_keep_best_ends_with_the_best_mean_of_depths_1_to_3(tmp_path):
    assert best_score(B) > best_score(C) > best_score(A) and best_score((0.7,)) == 0.7
    rows, held = toy_rows(96, 0), toy_rows(8, 1)
    toy = Scripted.of(START, A, B, C, D)
    run = fit(None, toy, in_memory(rows), KEEP, tmp_path / "kept", held)
    assert run.record["best"]["step"] == 6 and run.record["best"]["top1"] == list(B)
    assert torch.equal(run.head.weight, toy.seen[2]) and not torch.equal(toy.seen[2], toy.seen[4])
    last = Scripted.of(START, A, B, C, D)
    run = fit(None, last, in_memory(rows), replace(KEEP, keep_best=False), tmp_path / "last", held)
    assert "best" not in run.record and torch.equal(run.head.weight, last.seen[4])  # today's default: the last

    def kill(state: dict, _logs: dict) -> None:
        if state["step"] == 8:  # after B, before C
            raise KeyboardInterrupt

    first = Scripted.of(START, A, B)
    with pytest.raises(KeyboardInterrupt):
        fit(None, first, in_memory(rows), KEEP, tmp_path / "cut", held, progress=kill)
    resumed = fit(None, Scripted.of(C, D), in_memory(rows), KEEP, tmp_path / "cut", held, resume=True)
    assert resumed.record["best"]["step"] == 6 and torch.equal(resumed.head.weight, first.seen[2])


def test_a_checkpoint_made_before_the_new_options_still_resumes(tmp_path):
    from safetensors import safe_open

    cfg = replace(Toy.recipe, epochs=1, checkpoint_minutes=0.0)
    fit(None, Toy(), in_memory(toy_rows(32, 0)), cfg, tmp_path)
    path = tmp_path / checkpoint.WEIGHTS
    with safe_open(str(path), "pt") as f:
        state, tensors = json.loads(f.metadata()["state"]), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    del state["settings"]["config"]["keep_best"], state["best"]  # as a run started before them saved it
    store.write_tensors(path, tensors, checkpoint.FORMAT, {"state": json.dumps(state)})
    assert fit(None, Toy(), in_memory(toy_rows(32, 0)), cfg, tmp_path, resume=True).record["steps"] == 4
    with pytest.raises(ValueError, match="other config settings"):
        fit(None, Toy(), in_memory(toy_rows(32, 0)), replace(cfg, keep_best=True), tmp_path, resume=True)


def test_the_options_are_flags_checked_before_any_work_and_noted(capsys):
    flags = ["--feature-weight", "0", "--unroll", "4", "--unroll-weight", "0.8", "--unroll-geometric"]
    a = cli.parser(EagleTrainer).parse_args([*flags, "--align-top", "3", "--keep-best", "--seed", "1"])
    assert (a.feature_weight, a.unroll_geometric, a.align_top, a.keep_best) == (0.0, True, 3, True)
    trainer = EagleTrainer(feature_weight=0.0, unroll=4, unroll_weight=0.8, unroll_geometric=True, align_top=3)
    note = cli.variant(EagleTrainer, trainer, TrainConfig(keep_best=True, seed=1))
    assert note == "feature_weight 0, unroll 4, unroll_weight 0.8, unroll_geometric, align_top 3, keep best, seed 1"
    assert cli.variant(Eagle3Trainer, Eagle3Trainer(), Eagle3Trainer.recipe) == ""  # defaults: no note
    for kind, bad, reason in [
        ("eagle", ["--feature-weight", "nan"], "--feature-weight must be a finite number"),
        ("eagle", ["--feature-weight", "-1"], "--feature-weight at most 100"),
        ("eagle", ["--align-top", "65"], "--align-top must be 0 (off) to 64"),
        ("eagle3", ["--align-top", "-1"], "--align-top must be 0 (off) to 64"),
        ("eagle3", ["--noise", "inf"], "--noise must be a finite number"),
        ("eagle", ["--variant", "x" * 61], "--variant must be one printable line"),
    ]:
        assert cli.train(kind, bad) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and reason in lines[0], (bad, lines)


def test_the_options_reach_the_manifest_through_train(tiny, tmp_path, capsys):
    from safetensors.torch import save_file

    from specviz.corpus.shards import pack

    lm, seqs, _, _ = tiny
    folder = tmp_path / "data"
    folder.mkdir()
    save_file(pack(seqs), str(folder / "shard_00000.safetensors"))
    save_file(pack(seqs), str(folder / "shard_00009.safetensors"))  # every tenth shard is held out
    opts = ["--data", str(folder), "--heldout", str(folder), "--heldout-sequences", "2", "--out", str(tmp_path / "h")]
    opts += ["--checkpoint", str(tmp_path / "ck"), "--draft-vocab", "512", "--epochs", "3", "--threads", "1"]
    opts += ["--feature-weight", "0", "--unroll", "3", "--unroll-weight", "0.8", "--unroll-geometric"]
    opts += ["--align-top", "3", "--keep-best", "--eval-every", "20", "--batch-tokens", "64", "--variant", "A/B x"]
    assert cli.train("eagle", opts, lm=lm) == 0, capsys.readouterr().err
    manifest = json.loads((tmp_path / "h" / store.MANIFEST).read_text())
    assert (
        manifest["trainer"] | {"feature_weight": 0.0, "align_top": 3, "unroll_geometric": True} == manifest["trainer"]
    )
    assert manifest["config"]["keep_best"] and manifest["variant"] == "A/B x"
    assert manifest["best"]["step"] in [p["step"] for p in manifest["curve"]]
