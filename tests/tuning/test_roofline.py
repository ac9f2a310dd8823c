"""This device's roofline: measured peaks, the floor and ceiling of one forward, the sentence, the home figure."""

from __future__ import annotations

import copy

import pytest
import torch

from specviz.core.kernels import can_pack, pack_linears
from specviz.core.measure import provenance
from specviz.output.viz.latency import latency_figure
from specviz.tuning import roofline
from specviz.tuning.hardware import SMALL, model_shape
from specviz.tuning.probe import LatencyCurve

KS = [1, 2, 4, 8, 16, 32, 64]


def fake_peaks(device: str = "cpu", dtype: str = "float32", gbs: float = 20.0, tflops: float = 0.1):
    return roofline.Peaks(device, dtype, gbs, tflops, 2, provenance(f"{device} · {dtype}").to_dict())


def test_the_floor_is_the_weights_read_once_and_the_knee_where_the_ceiling_meets_it():
    p = fake_peaks(gbs=20.0, tflops=0.1)
    r = roofline.roof(p, SMALL, KS, prefix=0, bytes_per_value=4)
    assert r.floor_ms == pytest.approx(1000 * SMALL.params * 4 / 20e9)  # 538 MB at 20 GB/s: 26.9 ms
    assert r.ceiling_ms[0] == pytest.approx(1000 * 2 * SMALL.params / 0.1e12)
    assert r.knee == pytest.approx(4 * 0.1e12 / (2 * 20e9))  # bytes per value · FLOP/s / (2 · bandwidth) = 10
    assert r.at(1) == pytest.approx(r.floor_ms) and r.at(64) == pytest.approx(r.ceiling_ms[-1])
    half = roofline.roof(p, SMALL, KS, prefix=0, bytes_per_value=2)
    assert half.floor_ms == pytest.approx(r.floor_ms / 2)


def test_one_sentence_per_device_with_its_numbers_and_provenance():
    cpu, bf16 = fake_peaks(), fake_peaks(dtype="bfloat16", tflops=0.4)
    gpu = fake_peaks("cuda:0 · NVIDIA H200", "bfloat16", gbs=4000.0, tflops=700.0)
    said = {}
    for p, nbytes in ((cpu, 4), (bf16, 2), (gpu, 2)):
        r = roofline.roof(p, SMALL, KS, 128, nbytes)
        said[r.label] = roofline.explain(p, r, SMALL, nbytes)
    assert list(said) == ["CPU, fp32", "CPU, bf16", "GPU (NVIDIA H200), bf16"]
    for text in said.values():
        assert "measured on" in text and "the computer running specviz" not in text and "unrecorded" not in text
        assert text.count(". ") <= 1  # one sentence (and its provenance)
    assert "small trees" in said["CPU, fp32"] and "--dtype bf16" in said["CPU, bf16"]
    assert "a tree of 60" in said["GPU (NVIDIA H200), bf16"]


@pytest.mark.full  # measures this machine's peaks: about a second
def test_peaks_are_measured_once_per_process_and_setting():
    roofline.peaks.cache_clear()
    first = roofline.peaks("cpu", "float32", torch.get_num_threads())
    assert first is roofline.peaks("cpu", "float32", torch.get_num_threads())
    assert first.read_gbs > 0.1 and first.tflops > 1e-4 and first.device == "cpu"
    assert "cpu · float32" in first.measured() and "the computer running specviz" not in first.measured()


def test_a_packed_model_counts_all_its_weights(app_lm):
    if not can_pack(app_lm.device, torch.float32):
        pytest.skip("no oneDNN packing on this build")
    packed = copy.deepcopy(app_lm.hf)
    assert pack_linears(packed) > 0
    plain = sum(p.numel() for p in app_lm.hf.parameters())
    assert sum(p.numel() for p in packed.parameters()) < plain  # what the old count read
    assert model_shape(app_lm).params == plain


def test_the_cost_curve_draws_the_roofline():
    curve = LatencyCurve("m", "cpu", 128, KS, [30.0, 31, 32, 35, 45, 70, 120], [1.0] * 7, 3)
    r = roofline.roof(fake_peaks(gbs=20.0, tflops=0.1), SMALL, KS, 128, 4)
    names = [d.get("name", "") for d in latency_figure(curve, roof=r).to_dict()["data"]]
    assert any(n.startswith("memory floor") for n in names) and any(n.startswith("compute ceiling") for n in names)
    assert any(n.startswith("the roofline model's flat stretch: to ~10 tokens") for n in names)
    assert not any("floor" in d.get("name", "") for d in latency_figure(curve).to_dict()["data"])
