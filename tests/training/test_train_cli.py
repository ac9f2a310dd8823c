"""`python -m specviz train KIND`: every head kind trains a few steps end to end on tiny data (self-distilled shards,
and a streamed feature folder), leaves a head that loads, its manifest with a learning curve, and resumes; the
committed heads under models/ load through the store and save back to the same tensors."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file, save_file

from specviz.core.model import fused_layers
from specviz.corpus import distill
from specviz.corpus.data import in_memory
from specviz.corpus.shards import Sequence, pack, shard_file, write_shard
from specviz.heads import eagle, eagle3, hydra, medusa, store
from specviz.training import cli
from specviz.training.kinds import TRAINERS
from tests.conftest import make_tiny


@pytest.fixture(scope="module")
def tiny(tokenizer):
    """A fp32 tiny model and its greedy continuations of six prompts, with the fused layers' inputs."""
    lm = make_tiny(tokenizer, seed=3)
    lm.hf.float()
    lm.dtype = torch.float32
    prompts = ["Hello there", "What is a cat?", "Tell me a joke", "Write some code", "Name a colour", "Count"]
    seqs = distill.distill_batch(lm, prompts, 16)
    for s in seqs:
        s.layers = lm.forward_layers(s.ids.tolist(), lm.new_cache(), fused_layers(2))[2].half()
    return lm, seqs


@pytest.fixture(scope="module")
def distilled(tiny, tmp_path_factory):
    """A self-distilled folder: shard 0 for training, shard 9 held out (every tenth is)."""
    _, seqs = tiny
    folder = tmp_path_factory.mktemp("distilled")
    save_file(pack(seqs[:4]), str(folder / "shard_00000.safetensors"))
    save_file(pack(seqs[4:]), str(folder / "shard_00009.safetensors"))
    return folder


@pytest.fixture(scope="module")
def features(tiny, tmp_path_factory):
    """A feature folder of two shards (the target's argmax as labels), streamed shard by shard."""
    lm, seqs = tiny
    folder = tmp_path_factory.mktemp("features")
    labelled = []
    for s in seqs:
        with torch.no_grad():
            label = lm.hf(s.ids[None]).logits[0].argmax(-1).to(torch.int32)
        labelled.append(Sequence(s.ids, s.hidden, s.mask, label=label))
    write_shard(shard_file(folder, 0), labelled[:3])
    write_shard(shard_file(folder, 1), labelled[3:])
    return folder


def train(lm, kind, data, held, out, *more) -> int:
    opts = ["--data", str(data), "--heldout", str(held), "--out", str(out / "head"), "--checkpoint", str(out / "ck")]
    return cli.train(kind, [*opts, "--draft-vocab", "512", "--epochs", "3", "--threads", "1", *more], lm=lm)


RUNS = [("medusa", "distilled"), ("hydra", "distilled"), ("eagle", "distilled"), ("eagle3", "distilled")]


# one kind end to end in the fast tier (Medusa from self-distilled data); the others in the full tier
KINDS = [
    RUNS[0],
    *(pytest.param(*r, marks=pytest.mark.full) for r in [*RUNS[1:], ("eagle", "features"), ("medusa", "features")]),
]


@pytest.mark.parametrize("kind, source", KINDS)
def test_every_kind_trains_end_to_end_through_the_cli(kind, source, tiny, distilled, features, tmp_path, capsys):
    lm = tiny[0]
    data = distilled if source == "distilled" else features  # a feature folder's shards are all held out
    assert train(lm, kind, data, data, tmp_path, "--eval-every", "40") == 0, capsys.readouterr().err
    manifest = json.loads((tmp_path / "head" / store.MANIFEST).read_text())
    curve = manifest["curve"]
    assert manifest["trainer"]["kind"] == kind and manifest["data"]["kind"] in ("self-distilled", "features")
    assert len(curve) >= 2 and curve[-1]["positions"] == manifest["positions"] > curve[0]["positions"]
    assert len(curve[-1]["top1"]) == len(manifest["heldout_top1_by_depth"]) > 1
    assert manifest["history"][0]["loss"] > manifest["history"][-1]["loss"]
    head = TRAINERS[kind]().load(lm, tmp_path / "head")
    assert head is not None and "passes over the data done" in manifest["stopped"]["reason"]
    if kind in ("medusa", "hydra"):
        table = json.loads((tmp_path / "head" / store.CALIBRATION).read_text())
        assert table["top1"] == manifest["heldout_top1_by_depth"]
    steps = manifest["steps"]
    assert train(lm, kind, data, data, tmp_path, "--eval-every", "40", "--resume") == 0  # finished: no step
    assert json.loads((tmp_path / "head" / store.MANIFEST).read_text())["steps"] == steps


def test_bad_settings_and_missing_data_are_one_line(tiny, distilled, tmp_path, capsys):
    lm = tiny[0]
    assert cli.train("nope", []) == 2 and "Unknown head 'nope'" in capsys.readouterr().err
    assert train(lm, "medusa", tmp_path / "none", distilled, tmp_path) == 2
    assert "No train shards" in capsys.readouterr().err
    assert train(lm, "eagle", distilled, distilled, tmp_path, "--unroll", "9") == 2
    assert "--unroll must be 1-8" in capsys.readouterr().err
    assert train(lm, "medusa", distilled, distilled, tmp_path, "--warmup", "1.5") == 2
    assert "--warmup must be in [0, 1)" in capsys.readouterr().err
    assert train(lm, "medusa", distilled, distilled, tmp_path, "--minutes", "1e-9") == 0
    assert train(lm, "medusa", distilled, distilled, tmp_path, "--resume", "--lr", "0.5") == 2
    assert "other config settings" in capsys.readouterr().err


def test_a_feature_folder_that_grows_still_resumes(tiny, features, distilled, tmp_path):
    """Features are made while a head trains on the first shards: a resumed run reads the new ones too."""
    lm = tiny[0]
    growing = tmp_path / "features"
    growing.mkdir()
    for name in ("shard_00000.safetensors", "shard_00001.safetensors"):
        (growing / name).write_bytes((features / name).read_bytes())
    assert train(lm, "eagle", growing, distilled, tmp_path, "--minutes", "1e-9") == 0
    first = json.loads((tmp_path / "head" / store.MANIFEST).read_text())
    (growing / "shard_00002.safetensors").write_bytes((features / "shard_00000.safetensors").read_bytes())
    assert train(lm, "eagle", growing, distilled, tmp_path, "--resume") == 0
    again = json.loads((tmp_path / "head" / store.MANIFEST).read_text())
    assert first["steps"] == 1 < again["steps"] and again["data"]["shards"] == 3 > first["data"]["shards"]


@pytest.mark.full  # makes features from a corpus and trains three times: ~15 s
def test_data_corpus_makes_its_features_then_trains(tiny, distilled, tmp_path, monkeypatch, capsys):
    """`--data corpus`: the committed corpus's features are made under the cache (its shards up to the first gap
    only), the head trains on them, and a second run extends the features to a shard committed since."""
    from specviz.corpus import store as corpus_files

    lm, seqs = tiny
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    monkeypatch.setattr(corpus_files, "CORPUS_DIR", corpus)
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))

    def shard(k: int, rows: list) -> None:
        ids = [s.ids.tolist() for s in rows]
        roles = [[int(m) for m in s.mask.tolist()] for s in rows]
        path = corpus_files.shard_path(corpus, k)
        path.write_bytes(corpus_files.pack_shard(ids, roles, list(range(len(rows))), [1] * len(rows)))

    shard(0, seqs[:3])
    shard(2, seqs[3:])  # after a gap: not read until shard 1 lands
    monkeypatch.setattr("specviz.corpus.features.SHARD_WINDOWS", 1)
    assert train(lm, "medusa", "corpus", distilled, tmp_path, "--epochs", "1") == 0, capsys.readouterr().err
    feats = tmp_path / "cache" / "features" / "train-fp32-corpus"
    first = json.loads((feats / "manifest.json").read_text())
    assert first["split"] == "train-corpus" and first["shards"] == 3  # shard 0's three windows, not shard 2's
    manifest = json.loads((tmp_path / "head" / store.MANIFEST).read_text())
    assert manifest["data"]["folder"] == str(feats) and "--data corpus" in manifest["command"]
    shard(1, seqs[:2])
    assert train(lm, "medusa", "corpus", distilled, tmp_path, "--epochs", "1") == 0
    assert json.loads((feats / "manifest.json").read_text())["shards"] > first["shards"]
    assert train(lm, "eagle3", "corpus", distilled, tmp_path) == 2
    assert "corpus features do not hold" in capsys.readouterr().err


COMMITTED = {  # kind: (its files' kind, load, save in the stored precision, weights file)
    "eagle": (eagle.KIND, lambda lm, f: eagle.load_head(f, lm.hf.config), eagle.save_head, eagle.WEIGHTS),
    "eagle3": (eagle3.KIND, lambda lm, f: eagle3.load_head(f), eagle3.save_head, eagle3.WEIGHTS),
    "medusa": (
        medusa.KIND,
        medusa.load_heads,
        lambda h, f: medusa.save_heads(h, f, torch.bfloat16),
        medusa.WEIGHTS_FILE,
    ),
    "hydra": (hydra.KIND, hydra.load_heads, lambda h, f: hydra.save_heads(h, f, torch.bfloat16), hydra.WEIGHTS_FILE),
}


@pytest.mark.parametrize("kind", sorted(COMMITTED))
def test_committed_heads_load_through_the_store_and_keep_their_record(kind, app_lm, tmp_path):
    files, load, save, weights = COMMITTED[kind]
    folder = TRAINERS[kind].models  # type: ignore[attr-defined]
    manifest = store.read_manifest(folder, files)
    if manifest["curve"]:  # trained by the one fit loop: its learning curve and logged losses (EAGLE-3's, 12-04)
        assert manifest["history"] and manifest["steps"] == manifest["planned_steps"] > 0
    else:  # migrated once from a head saved before curves were kept: its training summary
        assert manifest["train"]
    assert len(manifest["heldout_top1_by_depth"]) in (4, 6)
    # the exact figures: tests/project/test_committed_data.py
    assert manifest["positions"] is None or manifest["positions"] > 0
    save(load(app_lm, folder), tmp_path)
    before, after = load_file(str(folder / weights)), load_file(str(tmp_path / weights))
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def test_eagle3_measures_held_out_sequences_without_layer_inputs(tiny):
    """The shared held-out set has no layer inputs: EAGLE-3's trainer teacher-forces them once, to the same ranks."""
    lm, seqs = tiny
    trainer = TRAINERS["eagle3"](draft_vocab=512, depths=2)  # type: ignore[call-arg]
    head = trainer.new_head(lm, in_memory(seqs[:4]), 0)
    bare = [replace(s, layers=None) for s in seqs[4:]]
    for a, b in zip(trainer.ranks(lm, head, seqs[4:]), trainer.ranks(lm, head, bare), strict=True):
        assert torch.equal(a, b) and len(a) > 10
    assert all(s.layers is not None for s in bare)


@pytest.mark.parametrize("source", ["distilled", pytest.param("features", marks=pytest.mark.full)])
def test_the_draft_trains_end_to_end_and_drafts_for_sps(source, tiny, distilled, features, tmp_path, monkeypatch):
    """train draft: its loss falls, its curve (top-1 agreement with the target) lands in the manifest, and sps
    with draft="trained" decodes through the saved folder token-identical to plain decoding."""
    from specviz.core.sampling import Sampling
    from specviz.heads import draft
    from specviz.methods import ar, sps

    lm = tiny[0]
    data = distilled if source == "distilled" else features
    assert train(lm, "draft", data, data, tmp_path, "--eval-every", "40", "--init-layers", "0") == 0
    manifest = json.loads((tmp_path / "head" / store.MANIFEST).read_text())
    assert manifest["trainer"]["kind"] == "draft" and len(manifest["curve"]) >= 2
    assert len(manifest["heldout_top1_by_depth"]) == 1 and 0 <= manifest["heldout_top1_by_depth"][0] <= 1
    assert manifest["history"][0]["loss"] > manifest["history"][-1]["loss"]
    saved = draft.load_draft(lm, tmp_path / "head")
    assert saved.config.init_layers == [0] and len(saved.draft_ids) == 512
    monkeypatch.setattr(sps, "cached_draft", lambda _lm: saved)
    ids, s = lm.encode_prompt("Hello there"), Sampling(max_new_tokens=24)
    assert sps.generate(lm, ids, s, sps.Config(draft="trained")).output_ids == ar.generate(lm, ids, s).output_ids


@pytest.mark.full
def test_a_trained_draft_continues_from_its_folder(tiny, features, tmp_path):
    """train draft --init DIR: the run starts from the saved draft (its held-out start is where that draft ended,
    its layers and rows kept), not from the target's layers."""
    from specviz.heads import draft

    lm = tiny[0]
    first, second = tmp_path / "a", tmp_path / "b"
    assert train(lm, "draft", features, features, first, "--eval-every", "40", "--init-layers", "0") == 0
    ended = json.loads((first / "head" / store.MANIFEST).read_text())["heldout_top1_by_depth"]
    more = ["--eval-every", "40", "--init", str(first / "head"), "--init-layers", "0,1"]  # --init wins
    assert train(lm, "draft", features, features, second, *more) == 0
    manifest = json.loads((second / "head" / store.MANIFEST).read_text())
    assert manifest["curve_start"]["top1"] == pytest.approx(ended, abs=0.02)  # bf16 on disk, fp32 in training
    assert manifest["trainer"]["init"] == str(first / "head")
    assert draft.load_draft(lm, second / "head").config.init_layers == [0]


def test_several_feature_folders_are_one_stream_taken_in_turn(features, distilled, tmp_path):
    """`--data A B`: the shards of A and B alternate (A0, B0, A1, B1), the manifest names both; a self-distilled
    folder cannot be mixed in."""
    from specviz.corpus.data import open_folders
    from specviz.corpus.shards import DataError

    other = tmp_path / "other"
    other.mkdir()
    (other / "shard_00000.safetensors").write_bytes((features / "shard_00001.safetensors").read_bytes())
    both = open_folders([features, other])
    a0, a1, b0 = (open_folders([f]).read(i) for f, i in ((features, 0), (features, 1), (other, 0)))
    assert [len(both.read(i)) for i in range(3)] == [len(a0), len(b0), len(a1)] and len(both.chunks) == 3
    assert torch.equal(both.read(1)[0].ids, b0[0].ids) and torch.equal(both.read(2)[0].ids, a1[0].ids)
    assert both.source["shards"] == 3 and str(other) in both.source["folder"] and both.key()["kind"] == "features"
    with pytest.raises(DataError, match="feature folders"):
        open_folders([features, distilled])
