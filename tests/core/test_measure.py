"""The one definition of speedup, A, r and TTFT, and the provenance every stored figure carries."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pytest

from specviz.core import measure


@dataclass
class _Step:
    wall_s: float
    forward_tokens: int = 1
    committed: list = field(default_factory=list)


@dataclass
class _Trace:
    steps: list = field(default_factory=list)
    output_ids: list = field(default_factory=list)
    total_s: float = 0.0
    prefill_s: float = 0.0


def _run(step_walls: list[float], tokens: int, prefill: float = 0.1, final_without_forward: bool = False):
    """Steps of equal size committing `tokens` in all (the last root-only step, if any, commits one)."""
    body = tokens - int(final_without_forward)
    sizes = [body // len(step_walls) + (i < body % len(step_walls)) for i in range(len(step_walls))]
    steps = [_Step(w, committed=[0] * n) for w, n in zip(step_walls, sizes, strict=True)]
    if final_without_forward:
        steps.append(_Step(0.001, forward_tokens=0, committed=[0]))
    return _Trace(steps, list(range(tokens)), prefill + sum(s.wall_s for s in steps), prefill)


def test_speedup_is_end_to_end_wall_time_prefill_included():
    ar = _run([0.04] * 10, 10)  # 0.1 + 0.4
    fast = _run([0.05] * 4, 10)  # 0.1 + 0.2
    assert measure.speedup(ar, fast) == pytest.approx(0.5 / 0.3)
    assert measure.speedup(ar, ar) == pytest.approx(1.0)
    # the trace's bookkeeping (after each step's clock) is not generation time
    booked = _Trace(fast.steps, fast.output_ids, total_s=10.0, prefill_s=fast.prefill_s)
    assert measure.speedup(ar, booked) == pytest.approx(0.5 / 0.3)


def test_a_counts_forward_passes_after_the_prefill_only():
    t = _run([0.05] * 4, 11, final_without_forward=True)
    assert measure.forward_steps(t) == 4
    assert measure.mean_accepted(t) == pytest.approx(2.5)  # 10 tokens from 4 forwards; the last root needs none
    plain = _run([0.04] * 9, 10, final_without_forward=True)
    assert measure.mean_accepted(plain) == 1.0
    assert measure.pooled_accepted([t, plain]) == pytest.approx((10 + 9) / (4 + 9))
    assert measure.mean_accepted(_Trace()) == 1.0


def test_r_is_mean_step_time_over_plain_decodings():
    ar = _run([0.04] * 10, 10)
    m = _run([0.05] * 4, 10)
    assert measure.step_cost(ar, m) == pytest.approx(1.25)
    assert measure.ttft_s(m) == pytest.approx(0.15)


def test_paired_reports_median_and_range_and_labels_one_run():
    ars = [_run([0.04] * 10, 10), _run([0.05] * 10, 10), _run([0.04] * 10, 10)]
    ms = [_run([0.05] * 4, 10), _run([0.05] * 4, 10), _run([0.06] * 4, 10)]
    res = measure.paired(ars, ms)
    assert res["speedup"].n == 3
    assert res["speedup"].low <= res["speedup"].median <= res["speedup"].high
    assert "3 runs" in res["speedup"].label()
    assert measure.spread([1.3]).label() == "1.30× (one run)"
    with pytest.raises(ValueError):
        measure.paired(ars, ms[:2])


def test_provenance_round_trips_and_says_this_machine_only_when_it_is():
    here = measure.provenance("cpu · float32 · onednn", dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc))
    again = measure.Provenance.from_dict(here.to_dict())
    assert again == here
    assert "the computer running specviz" in again.describe(here)
    other = measure.Provenance(**{**here.to_dict(), "cpu": "Some Other CPU"})
    text = other.describe(here)
    assert "the computer running specviz" not in text and "Some Other CPU" in text and "2026-12-01" in text
    with pytest.raises(ValueError):
        measure.Provenance.from_dict({"cpu": "x"})


def test_contended_flags_a_busy_machine():
    p = measure.provenance("cpu")
    busy = measure.Provenance(**{**p.to_dict(), "cores": 2, "load": 4.0})
    quiet = measure.Provenance(**{**p.to_dict(), "cores": 2, "load": 0.3})
    assert measure.contended(busy) and not measure.contended(quiet)
