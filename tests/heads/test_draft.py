"""The speculative-sampling draft model: built from the target's layers, its reduced head mapped back to token
ids, teacher-forced logits equal to its cached decoding, its folder checked, and sps through it lossless."""

from __future__ import annotations

import json

import pytest
import torch

from specviz.core.drafting import LayerDraft, as_full
from specviz.core.sampling import ConfigError, Sampling
from specviz.heads import draft as draft_head
from specviz.methods import ar, sps
from tests.conftest import make_tiny
from tests.sampling_check import second_token_follows_p


@pytest.fixture(scope="module")
def tiny4(tokenizer):
    return make_tiny(tokenizer, seed=1, layers=4)


def _ids(lm, n: int = 512, seed: int = 0) -> torch.Tensor:
    return torch.randperm(lm.hf.config.vocab_size, generator=torch.Generator().manual_seed(seed))[:n]


def test_a_copy_of_the_prefix_drafts_as_the_prefix_does(tiny4) -> None:
    full = torch.arange(tiny4.hf.config.vocab_size)
    model = draft_head.from_target(tiny4, [0, 1], full).to(tiny4.dtype)
    ids = tiny4.encode_prompt("The draft copies the target's first layers")
    mine = LayerDraft(tiny4, [], 0, draft_head.parts(model)).forward(ids)
    prefix = LayerDraft(tiny4, [0, 1], 0).forward(ids)
    assert torch.allclose(mine, prefix, atol=1e-9)


def test_reduced_head_rows_map_to_their_token_ids(tiny4) -> None:
    rows = _ids(tiny4)
    model = draft_head.from_target(tiny4, [0, 1], rows).to(tiny4.dtype)
    ids = tiny4.encode_prompt("Rows of the reduced head")
    sub = LayerDraft(tiny4, [], 0, draft_head.parts(model)).forward(ids)
    whole = LayerDraft(tiny4, [0, 1], 0).forward(ids)
    assert torch.allclose(sub, whole[rows], atol=1e-9)
    q = as_full(torch.softmax(sub, -1), tiny4.hf.config.vocab_size, rows)
    assert q[rows].sum().item() == pytest.approx(1.0) and q.sum().item() == pytest.approx(1.0)


def test_teacher_forced_logits_equal_cached_decoding(tiny4) -> None:
    model = draft_head.from_target(tiny4, [0, 3], _ids(tiny4)).to(tiny4.dtype)
    ids = tiny4.encode_prompt("Teacher forcing and the KV cache agree")
    x = tiny4.hf.model.embed_tokens(torch.tensor([ids]))
    rope = tiny4.hf.model.rotary_emb(x, position_ids=torch.arange(len(ids)).view(1, -1))
    with torch.no_grad():
        forced = model(x, rope)[0]  # [T, Vd]
    runner = LayerDraft(tiny4, [], 0, draft_head.parts(model))
    first = runner.forward(ids[:5])  # the logits after ids[:5], then one token at a time
    stepped = torch.stack([first] + [runner.forward([t]) for t in ids[5:]])
    assert torch.allclose(forced[4:].float(), stepped, atol=1e-6)


def test_folder_round_trip_and_bad_folders(tiny4, tmp_path) -> None:
    model = draft_head.from_target(tiny4, [0, 1], _ids(tiny4))
    folder = draft_head.save_draft(model, tmp_path / "d", torch.bfloat16, {"curve": []}, {"positions": 10})
    back = draft_head.load_draft(tiny4, folder)
    assert back.config.train == {"positions": 10} and back.draft_ids.tolist() == model.draft_ids.tolist()
    assert torch.allclose(back.head.weight.float(), model.head.weight.float(), atol=1e-2)
    with pytest.raises(draft_head.DraftError, match="No draft model"):
        draft_head.load_draft(tiny4, tmp_path / "none")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(cfg | {"format": "other"}))
    with pytest.raises(draft_head.DraftError, match="not a draft model"):
        draft_head.load_draft(tiny4, folder)
    (folder / "config.json").write_text(json.dumps(cfg | {"draft_vocab": 7}))
    with pytest.raises(draft_head.DraftError):
        draft_head.load_draft(tiny4, folder)
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(draft_head.DraftError):
        draft_head.load_draft(tiny4, folder)


@pytest.fixture
def trained_sps(tiny4, monkeypatch):
    """sps with draft="trained" running a given DraftModel (the one `models/draft` would hold)."""

    def use(model):
        monkeypatch.setattr(sps, "cached_draft", lambda _lm: model.to(tiny4.dtype))

    return use


def test_sps_with_the_trained_draft_is_greedy_identical(tiny4, trained_sps) -> None:
    ids = tiny4.encode_prompt("Hello there")
    s = Sampling(max_new_tokens=21)
    trained_sps(draft_head.from_target(tiny4, [0, 1, 2, 3], torch.arange(tiny4.hf.config.vocab_size)))
    whole = sps.generate(tiny4, ids, s, sps.Config(gamma=4, draft="trained"))
    assert whole.output_ids == ar.generate(tiny4, ids, s).output_ids
    assert whole.mean_accepted == pytest.approx(5.0)  # a copy of the whole target accepts every draft
    trained_sps(draft_head.from_target(tiny4, [0, 2], _ids(tiny4, 8192)))
    part = sps.generate(tiny4, ids, Sampling(max_new_tokens=30), sps.Config(gamma=3, draft="trained"))
    assert part.output_ids == ar.generate(tiny4, ids, Sampling(max_new_tokens=30)).output_ids


def test_sps_says_when_its_trained_draft_cannot_be_used(tiny4, monkeypatch) -> None:
    """A missing or foreign models/draft is a setting to change (ConfigError: a message in the app, one line in the
    CLI), not a crash."""

    def foreign(_lm):
        raise draft_head.DraftError("The draft model in models/draft was made for another model (hidden 576).")

    monkeypatch.setattr(sps, "cached_draft", foreign)
    with pytest.raises(ConfigError, match="another model"):
        sps.generate(tiny4, tiny4.encode_prompt("Hi"), Sampling(max_new_tokens=4), sps.Config(draft="trained"))


@pytest.mark.full  # 1,500 runs on the 49k-vocabulary model: ~20 s
def test_sps_with_the_trained_draft_samples_p(peaked, monkeypatch) -> None:
    """Through the real generate at T = 0.8, with a reduced head over half the vocabulary (q is zero elsewhere),
    on the peaked tiny model (a chi-square with power); its drafts are accepted at some steps, not all."""
    model = draft_head.from_target(peaked, [0], _ids(peaked, peaked.hf.config.vocab_size // 2, seed=3))
    monkeypatch.setattr(sps, "cached_draft", lambda _lm: model.to(peaked.dtype))
    cfg = sps.Config(gamma=2, draft="trained")
    traces = []

    def run(ids, s):
        traces.append(sps.generate(peaked, ids, s, cfg))
        return traces[-1]

    second_token_follows_p(peaked, run)
    accepted = [st.detail.n_accepted for tr in traces for st in tr.steps if hasattr(st.detail, "n_accepted")]
    assert 0 < sum(accepted) < 2 * len(accepted)
