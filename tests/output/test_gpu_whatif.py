"""The lesson's GPU stop draws the H200's stored probe beside the recording's CPU curve and the modelled GPUs: its
functions read the probe (interpolated, never beyond what it measured), its legend's numbers are the lines' own, and
it wears the probe's chip and day."""

from __future__ import annotations

import json

import pytest

from specviz.output.lesson import gpu
from specviz.output.lesson.formulas import computed
from specviz.output.viz.whatif import Line, legend

CURVE = {"flat": {"data": {"ks": [1, 2, 4, 8], "ms": [10.0, 11.0, 14.0, 22.0]}, "measured": ""}}


def _probe_line() -> dict:
    return json.loads(gpu.H200_PROBE.read_text(encoding="utf-8").splitlines()[0])


def test_gpu_cost_reads_the_h200_probe_against_its_own_first_token():
    data, fns = _probe_line(), computed("gpu_whatif", CURVE)[1]
    ks, ms = data["ks"], data["ms"]
    assert fns["gpu_cost"](1) == 1.0 and fns["gpu_tokens"]() == ks[-1] == 64
    assert fns["gpu_cost"](64) == pytest.approx(ms[-1] / ms[0], abs=1e-4)
    assert fns["gpu_cost"](12) == pytest.approx((ms[3] + ms[4]) / 2 / ms[0], abs=1e-4)  # halfway from 8 to 16
    assert fns["gpu_ms"](1) == ms[0] and fns["gpu_floor_ms"]() < ms[0] / 50  # a launch-bound forward
    with pytest.raises(ValueError, match="from 1 to 64 tokens"):
        fns["gpu_cost"](128)


def test_the_cpu_functions_read_the_recordings_curve():
    fns = computed("gpu_whatif", CURVE)[1]
    assert fns["cpu_cost"](8) == 2.2 and fns["cpu_cost"](6) == pytest.approx(1.8)
    assert fns["flat"]("cpu") == pytest.approx(4 + 0.1 / 0.8 * 4) and fns["flat_at"]() == gpu.FLAT
    assert fns["flat"]("h100") == pytest.approx(gpu.FLAT * fns["knee"]("h100"), abs=0.01)


def test_the_figure_draws_each_curve_its_legend_from_its_numbers_and_badges_the_h200():
    fig, fns, where = computed("gpu_whatif", CURVE)
    names = [t.name for t in fig.data]
    assert len(names) == 4 and "NVIDIA H200" in names[1] and "measured 2026-12-04" in names[1]
    assert f"{fns['gpu_cost'](64):.2f}× at 64 tokens" in names[1]
    assert f"≈ {fns['flat']('cpu'):.0f} tokens" in names[0] and f"≈ {fns['flat']('a100'):.0f} tokens" in names[2]
    assert list(fig.data[1].y) == pytest.approx([m / _probe_line()["ms"][0] for m in _probe_line()["ms"]])
    badges = [a.text for a in fig.layout.annotations if a.text.startswith("stored: ")]
    assert badges == ["stored: NVIDIA H200, 2026-12-04"]
    assert "docs/gpu/2026-12-04-h200/probe.txt" in where and "cores" not in where  # no machine for facts to badge


def test_a_curve_that_never_reaches_the_bar_says_so_rather_than_a_crossing():
    flat = Line("a GPU", (1, 8, 64), (1.0, 1.1, 1.2))
    assert gpu.crossing([1, 8, 64], [10, 11, 12]) is None
    assert legend(flat, 1.5) == "a GPU, measured: 1.20× at 64 tokens, under 1.5× throughout"
    assert legend(Line("a GPU", (1, 8), (1.0, 2.0), 4.5, day="2026-12-04"), 1.5).startswith("a GPU, measured 2026-12")


def test_a_probe_without_a_curve_is_one_sentence(tmp_path):
    bad = tmp_path / "probe.txt"
    line = _probe_line() | {"ms": [0.0] * len(_probe_line()["ks"])}
    bad.write_text(json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="positive"):
        gpu.h200_probe(bad)
