"""The losslessness lab on hand-made distributions: closed forms, sampling, chi-square, plain data."""

from __future__ import annotations

import json

import pytest
import torch

from specviz.heads import draft as draft_head
from specviz.tuning import lossless
from tests.devices import DEVICES, production

P = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
Q = torch.tensor([0.2, 0.5, 0.1, 0.2], dtype=torch.float64)


def test_perturbed_draft_is_a_distribution_near_p() -> None:
    q = lossless.perturbed(P, seed=3)
    assert float(q.sum()) == pytest.approx(1.0) and not torch.allclose(q, P)
    assert torch.equal(q, lossless.perturbed(P, seed=3))


def test_exact_outputs() -> None:
    assert torch.allclose(lossless.exact_output("speculative", P, Q, 0.09, 0.3), P)
    flawed = lossless.exact_output("flawed", P, Q, 0.09, 0.3)
    assert torch.allclose(flawed, torch.tensor([0.425, 0.435, 0.0975, 0.0425], dtype=torch.float64))
    typical = lossless.exact_output("typical", P, Q, 0.09, 0.3)  # token 3 (p = 0.05) is never kept
    kept = Q * torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    assert torch.allclose(typical, kept + 0.2 * P)
    for rule in ("speculative", "typical", "flawed"):
        assert float(lossless.exact_output(rule, P, Q, 0.09, 0.3).sum()) == pytest.approx(1.0)


def test_sampling_follows_the_closed_form() -> None:
    gen = torch.Generator().manual_seed(0)
    counts, accepted = lossless.sample_output("flawed", P, Q, 50000, gen, 0.09, 0.3)
    assert counts.sum() == 50000
    assert torch.allclose(counts / 50000, lossless.exact_output("flawed", P, Q, 0.09, 0.3), atol=0.01)
    assert accepted / 50000 == pytest.approx(0.55, abs=0.01)  # Σ q·p/max p


def test_chi_square_accepts_p_and_rejects_a_shifted_sample() -> None:
    good = lossless.run_rule("speculative", P, Q, 20000, seed=1)
    bad = lossless.run_rule("flawed", P, Q, 20000, seed=1)
    assert good["p_value"] > 0.01 and good["tv"] < 0.02
    assert bad["p_value"] < 1e-6 and bad["tv"] > 0.05
    _, _, pval = lossless.chi_square(torch.tensor([0.0, 0.0, 0.0, 10.0]), torch.tensor([1.0, 0, 0, 0]))
    assert pval == 0.0  # mass where p has none


def test_lab_is_plain_json() -> None:
    res = lossless.lab_from_dists(P, Q, 5000, top_k=3)
    json.dumps(res, allow_nan=False)
    assert [r["rule"] for r in res["rules"]] == ["speculative", "typical", "flawed"]
    assert res["tokens"][0] == 0 and len(res["p"]) == len(res["tokens"])


@pytest.fixture
def trained(tiny_lm, monkeypatch):
    """The lab's `trained` draft: a two-layer draft model cut from the tiny target, as models/draft would hold one;
    returns the models it built, so a test can see the lab ran it."""
    built = []

    def model(lm):
        ids = torch.arange(0, lm.hf.config.vocab_size, 2)  # a reduced head: q is zero on odd ids
        # cut from the plain tiny model: a production copy's packed layers keep no weight matrices to copy
        built.append(draft_head.from_target(tiny_lm, [0, 1], ids).to(device=lm.device, dtype=lm.dtype))
        return built[-1]

    monkeypatch.setattr(lossless, "cached_draft", model)
    return built


def test_the_trained_draft_is_the_labs_q(tiny_lm, trained) -> None:
    _p, q = lossless.context_dists(tiny_lm, tiny_lm.encode_prompt("Pick a word"), 1.0, draft="trained")
    assert len(trained) == 1 and float(q.sum()) == pytest.approx(1.0)
    assert float(q[1::2].abs().sum()) == 0.0 < float(q[0::2].min())  # its head's rows, and no others
    _p, prefix = lossless.context_dists(tiny_lm, tiny_lm.encode_prompt("Pick a word"), 1.0, "0", draft="layers")
    assert not torch.allclose(q, prefix)


def test_lab_on_a_model_context(tiny_lm, trained) -> None:
    for draft in lossless.DRAFTS:
        cfg = lossless.LabConfig(temperature=0.0, n=2000, layers="0", draft=draft)
        res = lossless.lab(tiny_lm, tiny_lm.encode_prompt("Pick a word"), cfg)
        assert res["temperature"] == lossless.LAB_TEMPERATURE and res["draft"] == draft
    with pytest.raises(ValueError):
        lossless.context_dists(tiny_lm, [5, 6], 1.0, draft="oracle")
    assert len(res["texts"]) == len(res["tokens"])
    json.dumps(res, allow_nan=False)


@pytest.mark.parametrize("device", DEVICES)
def test_the_lab_runs_on_the_models_device_and_draws_the_same(tiny_lm, device, trained) -> None:
    """On a GPU the model's p and q live there, the lab's generators on the CPU; the same seed, the same counts."""
    lm = production(tiny_lm, device)
    ids = lm.encode_prompt("Pick a word")
    for draft in lossless.DRAFTS:
        p, q = lossless.context_dists(lm, ids, 1.0, layers="0", draft=draft)
        assert p.device.type == q.device.type == device
        assert lossless.perturbed(p).device == p.device
        assert lossless.lab_from_dists(p, q, 3000, seed=4) == lossless.lab_from_dists(p.cpu(), q.cpu(), 3000, seed=4)
        res = lossless.lab(lm, ids, lossless.LabConfig(n=2000, layers="0", draft=draft))
        assert [r["rule"] for r in res["rules"]] == list(lossless.RULES)


def test_the_page_says_when_the_lab_cannot_run(tiny_app, monkeypatch) -> None:
    """A device error inside the lab (CUDA out of memory, a kernel error) is one message on the page, not a crash."""
    from tests.apptest import app_on

    def broken(*_a, **_kw):
        raise RuntimeError("CUDA error: device-side assert triggered\nmore detail")

    monkeypatch.setattr(lossless, "lab", broken)
    at = app_on("views/acceptance.py", max_new_tokens=4, prompt="A prompt only this test uses, for the lab.")
    assert not at.exception
    assert any("The lab could not run" in w.value and "device-side assert" in w.value for w in at.warning)


def test_the_lab_takes_its_turn_on_the_model_in_line_with_the_runs(fresh_app, monkeypatch) -> None:
    """The lab runs the model over the prompt: it waits in line with the other visitors' runs (and says so while it
    waits, as every live run does) instead of on the model's lock without a word."""
    from tests.apptest import app_on, turns_taken

    held = turns_taken(monkeypatch, lossless, "lab")
    at = app_on("views/acceptance.py", max_new_tokens=4, prompt="A prompt only the lab's turn test uses.")
    assert not at.exception and not at.error
    assert held == ["the lab"]
