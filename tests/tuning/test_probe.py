"""The latency probe keeps its provenance and never leaves a contaminated curve on screen as if quiet."""

from __future__ import annotations

import json
from dataclasses import replace

from specviz.core.measure import provenance
from specviz.tuning import probe


def _curve(spread: float, load: float = 0.1, device: str = "cpu · float32") -> probe.LatencyCurve:
    prov = {**provenance(device).to_dict(), "load": load, "cores": 2}
    c = probe.LatencyCurve("m", device, 128, [1, 4, 16], [40.0, 42.0, 55.0], [spread * 40, 1.0, 1.0], 5, prov)
    return replace(c, contended=c.disturbance())


def test_a_quiet_curve_is_not_flagged():
    assert _curve(0.02).contended == ""


def test_disagreeing_repeats_or_a_busy_machine_flag_the_curve():
    assert "disagree" in _curve(0.8).contended
    assert "load average" in _curve(0.02, load=5.0).contended


def test_a_noisy_first_probe_is_measured_again(tiny_lm, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    queue = [_curve(0.9), _curve(0.02)]
    calls = []

    def fake(lm):
        calls.append(lm)
        return queue.pop(0)

    curve = probe.cached_curve(tiny_lm, measure=fake)
    assert len(calls) == 2 and curve.contended == ""
    stored = json.loads(probe._path(tiny_lm).read_text())
    assert stored["contended"] == "" and stored["provenance"]["date"]


def test_a_machine_that_stays_busy_keeps_the_curve_flagged(tiny_lm, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    curve = probe.cached_curve(tiny_lm, measure=lambda _lm: _curve(0.9))
    assert curve.contended
    calls = []
    # shown with its flag for a while (every page visit would otherwise re-measure) …
    assert probe.cached_curve(tiny_lm, measure=lambda _lm: calls.append(0) or _curve(0.02)).contended
    assert calls == []
    # … then re-measured, never kept for good; a provenance-less stored curve is re-measured at once
    monkeypatch.setattr(probe, "RETRY_AFTER_S", -1)
    probe.cached_curve(tiny_lm, measure=lambda _lm: calls.append(1) or _curve(0.02))
    assert calls == [1]
    stored = json.loads(probe._path(tiny_lm).read_text())
    old = {k: v for k, v in stored.items() if k not in ("provenance", "contended")}
    probe._path(tiny_lm).write_text(json.dumps(old))
    probe.cached_curve(tiny_lm, measure=lambda _lm: calls.append(2) or _curve(0.02))
    assert calls == [1, 2]


def test_the_caption_says_where_and_when():
    c = _curve(0.02)
    assert "the computer running specviz" in c.measured(provenance("cpu · float32"))
    other = replace(c, provenance={**c.provenance, "cpu": "Elsewhere CPU"})
    assert "Elsewhere CPU" in other.measured(provenance("cpu · float32"))
