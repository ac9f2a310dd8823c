"""Comparison summaries, the roofline model, the latency probe and figure export, on the tiny model."""

from __future__ import annotations

import json

import pytest

from specviz.core.measure import acceptance_series, method_shape
from specviz.core.sampling import Sampling
from specviz.core.trace import StepTrace, Trace, bundle_json, load_traces
from specviz.methods import ar
from specviz.output.viz.gallery import figures
from specviz.tuning import hardware
from specviz.tuning.compare import summarize
from specviz.tuning.probe import LatencyCurve, probe_latency


def fake_step(i: int, committed: list[int], width: int, draft: float = 0.0) -> StepTrace:
    return StepTrace(
        index=i,
        committed=committed,
        texts=["x"] * len(committed),
        forward_tokens=width,
        propose_s=draft,
        verify_s=0.01,
        wall_s=0.01 + draft,
        prob=0.5,
        entropy=1.0,
    )


def fake_trace(method: str, chunks: list[list[int]], width: int, draft: float = 0.0) -> Trace:
    steps = [fake_step(i, c, width, draft) for i, c in enumerate(chunks)]
    out = [t for c in chunks for t in c]
    return Trace(
        method=method,
        model="m",
        device="cpu",
        prompt="p",
        prompt_ids=[1],
        config={},
        steps=steps,
        output_ids=out,
        text="",
        total_s=sum(s.wall_s for s in steps),
        prefill_s=0.0,
        stopped="length",
    )


def test_summary_against_ar():
    base = fake_trace("ar", [[1], [2], [3], [4]], 1)
    fast = fake_trace("medusa", [[1, 2], [3, 4]], 8, draft=0.002)
    rows = {r.method: r for r in summarize({"ar": base, "medusa": fast})}
    assert rows["ar"].speedup == 1.0 and rows["ar"].identical
    assert rows["medusa"].mean_accepted == 2.0 and rows["medusa"].identical
    assert rows["medusa"].step_cost == pytest.approx(0.012 / 0.01)
    assert rows["medusa"].speedup == pytest.approx(0.04 / 0.024)
    assert rows["medusa"].predicted == pytest.approx(2.0 / 1.2)
    per, cum = acceptance_series(fast)
    assert per == [pytest.approx(1 / 7)] * 2 and cum[-1] == pytest.approx(2 / 14)
    a, width, share = method_shape(fast)
    assert (a, width, share) == (2.0, 8.0, pytest.approx(0.2))


def test_roofline_model():
    model = hardware.ModelShape("m", 1e9, layers=10, kv_values_per_token=1000)
    dev = hardware.Device("d", bandwidth_gbs=100.0, tflops=1.0, bytes_per_value=2.0)
    # 1e9 params at 2 bytes: 20 ms to stream; 2e9 FLOP per token at 1 TFLOP/s: 2 ms per token
    assert hardware.step_ms(dev, model, 1) == pytest.approx(20.0)
    assert hardware.step_ms(dev, model, 40) == pytest.approx(80.0)  # compute-bound past 10 tokens
    # the KV cache streams too: 1000 values · 2 bytes · 1e6 tokens = 2 GB more, 20 ms more
    assert hardware.step_ms(dev, model, 1, context=1_000_000) == pytest.approx(40.0)
    assert hardware.modeled_speedup(dev, model, mean_accepted=2.0, width=5, context=0) == pytest.approx(2.0)
    assert hardware.modeled_speedup(dev, model, mean_accepted=2.0, width=40, context=0) == pytest.approx(0.5)
    curve = LatencyCurve("m", "cpu", 16, [1, 64], [20.0, 40.0], [0, 0], 1)
    fitted = hardware.fit_device(curve, model, 2)
    assert fitted.bandwidth_gbs == pytest.approx(100.0, rel=0.01)
    assert hardware.step_ms(fitted, model, 64, context=16) == pytest.approx(40.0, rel=0.02)


def test_roofline_floor_caps_the_gain_and_the_caption_says_what_is_left_out():
    """A per-layer floor (launches, Python) makes a small model's step flat in width, so A carries through whole;
    without it a wide tree would look costly on a GPU that in truth waits on launches."""
    floored = hardware.step_ms(hardware.A100, hardware.SMALL, 1)
    assert floored == pytest.approx(30.0, rel=0.05)  # 30 layers · ~1 ms, the weights stream in ~0.1 ms
    assert hardware.step_ms(hardware.A100, hardware.SMALL, 64) == pytest.approx(floored, rel=0.01)
    assert hardware.modeled_speedup(hardware.A100, hardware.SMALL, 2.0, 64) == pytest.approx(2.0, rel=0.01)
    # the 7B model's KV at 8k context in bf16: 2 · 32 · 32 · 128 · 2 B · 8192 = 4.3 GB per step, a third of its weights
    assert hardware.BIG.kv_bytes(2.0, 8192) == pytest.approx(4.29e9, rel=0.01)
    speedups = hardware.whatif({"eagle": (2.0, 8.0, 0.2)}, None, hardware.SMALL)
    assert set(speedups) == {d.name for d in hardware.GPUS}
    caption = hardware.whatif_caption(None, hardware.SMALL, 512)
    assert "MODEL" in caption and "Left out" in caption and "floor" in caption


def test_probe_and_surface_run_on_tiny(tiny_lm):
    curve = probe_latency(tiny_lm, ks=(1, 4), prefix_len=8, repeats=2)
    assert curve.ks == [1, 4] and all(m > 0 for m in curve.ms) and curve.relative()[0] == 1.0
    surface = hardware.probe_surface(tiny_lm, batches=(1, 2), ks=(1, 4), prefix_len=8, repeats=1)
    assert len(surface.ms) == 2 and len(surface.ms[0]) == 2
    speed = hardware.modeled_batch_speedup(surface, 2.0, 4, 0.0)
    assert len(speed) == 2 and all(s > 0 for s in speed)


def test_the_latency_surface_says_where_and_when(tiny_lm, tmp_path, monkeypatch):
    """Captioned from its own provenance ('this machine' only when it was); a cached one without it is re-measured."""
    import json
    from dataclasses import asdict

    from specviz.core.measure import provenance

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    small = {"batches": (1,), "ks": (1, 2), "prefix_len": 4, "repeats": 1}
    monkeypatch.setattr(hardware, "probe_surface", lambda lm, _p=hardware.probe_surface: _p(lm, **small))
    surface = hardware.cached_surface(tiny_lm)
    here = provenance(tiny_lm.describe())
    assert surface.provenance and "the computer running specviz" in surface.measured(here)
    elsewhere = provenance(tiny_lm.describe()).to_dict() | {"machine_id": "f" * 16}
    assert "the computer running specviz" not in hardware.Surface(
        **{**asdict(surface), "provenance": elsewhere}
    ).measured(here)
    path = next((tmp_path / "probe").glob("*.surface.json"))
    path.write_text(json.dumps({k: v for k, v in asdict(surface).items() if k != "provenance"}))  # from before
    assert hardware.cached_surface(tiny_lm).provenance


def test_bundle_round_trip_and_gallery(tiny_lm):
    ids = tiny_lm.encode_prompt("Hi")
    trace = ar.generate(tiny_lm, ids, Sampling(max_new_tokens=4))
    again = load_traces(bundle_json([trace]))
    assert again == [trace]
    assert load_traces(trace.to_json()) == [trace]
    figs = figures({"ar": trace})
    assert {"timeline", "tokens_over_time"} <= set(figs)
    json.loads(figs["timeline"].to_json())  # serialisable for the app and for export
