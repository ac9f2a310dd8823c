"""The fit: a tree's shape chosen from the device's cost curve and the heads' held-out acceptance.

A synthetic flat curve (a wide forward as cheap as a narrow one, drafting free) must land on the papers' settings;
a steep one (each verified token costing a fifth of a pass) on a small tree; the cost of the draft rounds must pull
the depth down; and a Config's fields given keep their values while the unset ones take the fit's.
"""

from __future__ import annotations

import pytest

from specviz.methods import eagle, lookahead, medusa
from specviz.methods.base import settled, unfitted
from specviz.tuning import fit

KS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]


def cost(per_token: float, draft_ms: float = 0.0, base: float = 30.0) -> fit.DeviceCost:
    """A device whose forward costs `base` ms plus `per_token` of it for each token past the first, and whose draft
    rounds cost `draft_ms` each (EAGLE) or per head (Medusa, Hydra); the rest of a step costs nothing."""
    ms = [base * (1 + per_token * (k - 1)) for k in KS]

    def sample(settings: dict, rounds: float) -> fit.StepSample:
        n = settings.get("total_tokens", 4)
        return fit.StepSample(settings, n, draft_ms * rounds, base * (1 + per_token * (n - 1)), 0.0)

    samples = {
        family: [sample(s, s.get("depth", s.get("heads", 1))) for s in shapes]
        for family, shapes in fit.SAMPLES.items()
        if family != "lookahead"
    }
    samples["lookahead"] = [fit.StepSample({"window": 3, "ngram": 2, "guesses": 2}, 6, 0.0, ms[4], 0.0)]
    return fit.DeviceCost("synthetic", KS, ms, base, samples)


@pytest.mark.parametrize("method", ["eagle", "eagle3", "hybrid", "medusa", "hydra"])
def test_a_flat_curve_with_free_drafting_lands_on_the_papers_setting(method):
    f = fit.fit_method(method, cost(per_token=0.0))
    assert f.best.fields == fit.PAPER[method], f.best
    assert f.paper is not None and f.best.speedup == pytest.approx(f.paper.speedup)


@pytest.mark.parametrize("method", ["eagle", "eagle3", "medusa", "hydra"])
def test_a_steep_curve_picks_a_small_tree(method):
    f = fit.fit_method(method, cost(per_token=0.2, draft_ms=1.0))
    assert f.best.forward_tokens <= 4, f.best
    assert f.best.speedup > f.paper.speedup * 2  # the paper's wide tree loses badly on such a device
    wide = max(f.by_width, key=lambda c: c.forward_tokens)
    assert wide.r > 5 and f.best.r < 1.8


def test_costly_draft_rounds_pull_the_depth_down():
    cheap = fit.fit_method("eagle", cost(per_token=0.01, draft_ms=0.1)).best.fields["depth"]
    dear = fit.fit_method("eagle", cost(per_token=0.01, draft_ms=8.0)).best.fields["depth"]
    assert dear < cheap


def test_a_prediction_is_a_over_r_from_the_parts():
    c = fit.fit_method("medusa", cost(per_token=0.05, draft_ms=1.0)).best
    assert c.r == pytest.approx((c.verify_ms + c.draft_ms + c.other_ms) / c.plain_ms)
    assert c.speedup == pytest.approx(c.A / c.r) and 1 < c.A < 1 + c.forward_tokens
    assert "fitted to this device" in fit.fit_method("medusa", cost(0.05)).describe()


def test_lookahead_is_fitted_from_its_measured_acceptance():
    f = fit.fit_method("lookahead", cost(per_token=0.2))
    rows = {(r["window"], r["ngram"], r["guesses"]): r["A"] for r in fit.lookahead_rows()}
    key = (f.best.fields["window"], f.best.fields["ngram"], f.best.fields["guesses"])
    assert rows[key] == f.best.A and f.best.forward_tokens == 1 + (key[1] - 1) * (key[0] + key[2])
    flat = fit.fit_method("lookahead", cost(per_token=0.0)).best
    assert max(rows.values()) == flat.A  # no cost to width: the setting that accepted most


def test_unset_fields_take_the_fit_and_given_ones_keep_their_value(monkeypatch):
    monkeypatch.setattr(fit, "fitted_fields", lambda _lm, m: fit.PAPER[m])
    assert unfitted(eagle.Config()) == ["depth", "top_k", "total_tokens"]
    got = fit.measured(None, eagle.Config(total_tokens=7), "eagle")  # type: ignore[arg-type]
    assert (got.depth, got.top_k, got.total_tokens) == (5, 10, 7)
    la = fit.measured(None, lookahead.Config(guesses=0), "lookahead")  # type: ignore[arg-type]
    assert (la.window, la.ngram, la.guesses) == (7, 5, 0)  # G 0 is a setting, not "unset"
    assert settled(medusa.Config()).total_tokens == 5 and unfitted(settled(medusa.Config())) == []


def test_a_composition_takes_the_fitted_shape_of_its_first_part(monkeypatch):
    """Medusa + Lookahead's tree is Medusa's, fitted to the device; its window stays as given."""
    from specviz.methods import medusa_lookahead

    best = fit.Candidate({"heads": 3, "total_tokens": 7}, 7, 1.6, 30.0, 2.0, 1.0, 30.0)
    fitted = {"medusa": fit.Fit("medusa", best, None, (best,), "cpu", {})}
    monkeypatch.setattr(fit, "fits", lambda _lm, refresh=False: fitted)
    got = fit.measured(None, medusa_lookahead.Config(window=2), medusa_lookahead.CARD.name)  # type: ignore[arg-type]
    assert (got.heads, got.total_tokens, got.window) == (3, 7, 2)


def test_a_damaged_stored_cost_is_measured_again(tmp_path, monkeypatch, tiny_lm):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    calls = []

    def measure(lm, curve=None):
        calls.append(1)
        return cost(0.1)

    monkeypatch.setattr(fit, "measure_cost", measure)
    monkeypatch.setattr(fit.probe, "cached_curve", lambda lm, refresh=False: None)
    path = fit._path(tiny_lm)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    fit.device_cost(tiny_lm)
    assert calls == [1] and path.is_file()


def test_drafts_run_in_bf16_only_where_the_device_computes_it(monkeypatch, tiny_lm):
    """`auto` reads the device: bf16 with avx512 kernels and bf16 units, fp32 where bf16 would be emulated."""
    import torch

    from specviz.core import kernels
    from specviz.heads import eagle_drafter

    cpu = torch.device("cpu")
    monkeypatch.setattr(kernels, "cpu_flags", lambda: "avx2 avx512f avx512_bf16")
    monkeypatch.setattr(kernels, "can_pack", lambda _d, _t: True)
    monkeypatch.setattr(kernels, "cpu_isa", lambda: "AVX512")
    assert kernels.bf16_native(cpu) and kernels.isa_note(cpu) == ""
    monkeypatch.setattr(kernels, "cpu_isa", lambda: "AVX2")  # ATEN_CPU_CAPABILITY=avx2 on the same CPU
    assert not kernels.bf16_native(cpu) and kernels.isa_note(cpu) == "avx2 kernels"
    monkeypatch.setattr(kernels, "cpu_isa", lambda: "AVX512")
    monkeypatch.setattr(kernels, "cpu_flags", lambda: "avx2 avx512f")  # avx512 without bf16 units
    assert not kernels.bf16_native(cpu)
    fake = type("LM", (), {"dtype": torch.float32, "device": cpu})()
    monkeypatch.setattr(eagle_drafter, "bf16_native", lambda _d: True)
    assert eagle_drafter.head_dtype(fake, "auto") == torch.bfloat16
    monkeypatch.setattr(eagle_drafter, "bf16_native", lambda _d: False)
    assert eagle_drafter.head_dtype(fake, "auto") == torch.float32
    assert eagle_drafter.head_dtype(fake, "bf16") == torch.bfloat16  # asked for by name: as named
    assert eagle_drafter.head_dtype(tiny_lm, "auto") == torch.float64  # the float64 test model keeps its own


def test_the_search_runs_once_per_device_cost(monkeypatch):
    """Every run's start asks for the fit (fit.measured) and so does its price (tuning.budget): the search over
    every shape runs once per device cost, not at each ask."""
    calls = []
    search = fit._search
    monkeypatch.setattr(fit, "_SEARCHED", {})
    monkeypatch.setattr(fit, "_search", lambda m, c: calls.append(m) or search(m, c))
    first = fit.fit_method("medusa", cost(0.07))
    assert fit.fit_method("medusa", cost(0.07)) is first and calls == ["medusa"]
    fit.fit_method("medusa", cost(0.08))  # another device's cost: searched again
    assert calls == ["medusa", "medusa"]
