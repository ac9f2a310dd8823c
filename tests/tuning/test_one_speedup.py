"""One definition of speedup: the same pair of traces gives the same number through every path the pages,
the figures and the export use (specviz.core.measure), and a single live run is labelled as one."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from streamlit.testing.v1 import AppTest

from specviz.core import measure
from specviz.core.measure import running_speedup
from specviz.core.sampling import Sampling
from specviz.core.trace import StepTrace, Trace
from specviz.output.viz.gallery import figures
from specviz.output.viz.tree import steps_figure
from specviz.tuning.compare import summarize
from tests.apptest import APP


def trace(method: str, chunks: list[list[int]], wall: float, prefill: float, width: int) -> Trace:
    steps = [
        StepTrace(
            index=i,
            committed=c,
            texts=["x"] * len(c),
            forward_tokens=width if i < len(chunks) - 1 else 0,
            propose_s=0.0,
            verify_s=wall,
            wall_s=wall,
            prob=0.5,
            entropy=1.0,
        )
        for i, c in enumerate(chunks)
    ]
    out = [t for c in chunks for t in c]
    # total_s carries bookkeeping time on purpose: no path may divide it
    return Trace(
        method=method,
        model="m",
        device="cpu",
        prompt="p",
        prompt_ids=[1],
        config={"sampling": asdict(Sampling(max_new_tokens=8)), "method": {}},  # what a trace file must carry
        steps=steps,
        output_ids=out,
        text="",
        total_s=9.9,
        prefill_s=prefill,
        stopped="length",
    )


AR = trace("ar", [[t] for t in range(8)], 0.010, 0.030, 1)
FAST = trace("medusa", [[0, 1, 2], [3, 4], [5, 6, 7]], 0.013, 0.031, 6)


def test_every_path_gives_measures_speedup():
    want = measure.speedup(AR, FAST)
    assert want == pytest.approx((0.030 + 0.08) / (0.031 + 0.039))
    rows = {r.method: r for r in summarize({"ar": AR, "medusa": FAST})}
    assert rows["medusa"].speedup == pytest.approx(want)  # the Compare page's table and bars
    assert rows["medusa"].label == measure.paired([AR], [FAST])["speedup"].label() == f"{want:.2f}× (one run)"
    assert running_speedup(AR, FAST)[-1] == pytest.approx(want)  # the method pages' running line
    line = steps_figure(FAST, AR).data[1]
    assert line.y[-1] == pytest.approx(want, abs=1e-3)
    bars = figures({"ar": AR, "medusa": FAST})["speedup"].data[0]  # the CLI export's gallery
    assert dict(zip(bars.x, bars.y))["medusa"] == pytest.approx(want)
    assert FAST.generation_s == measure.generation_s(FAST) and FAST.mean_accepted == measure.mean_accepted(FAST)


def test_repeats_are_paired_and_summarised_as_a_spread():
    slow = trace("medusa", [[0, 1, 2], [3, 4], [5, 6, 7]], 0.020, 0.031, 6)
    rows = {r.method: r for r in summarize({"ar": [AR, AR, AR], "medusa": [FAST, slow, FAST]})}
    assert rows["medusa"].speedup == pytest.approx(measure.speedup(AR, FAST))  # the median of three
    assert rows["medusa"].label.endswith(", 3 runs")


def test_identity_is_not_claimed_at_t_above_zero():
    hot = trace("medusa", [[0, 1, 2], [3, 4], [5, 6, 7]], 0.013, 0.031, 6)
    hot = Trace(**{**hot.__dict__, "config": {"sampling": {"temperature": 0.8}}})
    row = {r.method: r for r in summarize({"ar": AR, "medusa": hot})}["medusa"]
    assert row.identical is None and row.same_tokens == "n/a at T > 0"


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_one_live_run_is_labelled_one_run(tiny_app):
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in {"sidebar.max_new_tokens": 8, "lookahead.repeats": 1}.items():
        at.session_state[key] = value
    at.run()
    at.switch_page("views/lookahead.py").run()
    assert not at.exception
    speed = next(m for m in at.metric if m.label.startswith("Speedup"))
    assert speed.value.endswith("×") and len(speed.value) <= 6, speed.value  # it fits its column
    assert any(c.value == "one run" for c in at.caption), "the metric's caption says it is one run"


def test_tokens_per_second_is_the_median_over_repeats_not_the_first():
    slow = trace("medusa", [[0, 1, 2], [3, 4], [5, 6, 7]], 0.100, 0.031, 6)  # a disturbed first repeat
    row = next(r for r in summarize({"ar": [AR, AR, AR], "medusa": [slow, FAST, FAST]}) if r.method == "medusa")
    assert row.tokens_per_s == pytest.approx(FAST.tokens_per_s) and row.seconds == pytest.approx(
        measure.generation_s(FAST)
    )


def test_replayed_traces_of_another_prompt_or_setting_are_never_divided():
    """Loaded traces pair by prompt and settings, not by method name: an unrelated one gets no speedup."""
    from dataclasses import replace

    from specviz.tuning.compare import pairable, replay_runs

    other_prompt = replace(FAST, prompt_ids=[7, 8])
    hotter = replace(FAST, config={"sampling": {"temperature": 0.8}})
    assert pairable(AR, FAST) and not pairable(AR, other_prompt) and not pairable(AR, hotter)
    runs, unrelated = replay_runs({"ar": AR, "medusa": FAST, "pld": replace(AR, method="pld")}, ["medusa", "pld"])
    assert list(runs) == ["ar", "medusa", "pld"] and unrelated == []
    runs, unrelated = replay_runs({"ar": AR, "medusa": other_prompt}, ["medusa", "eagle"])
    assert runs == {"medusa": [other_prompt]} and unrelated == ["medusa"]  # shown alone, never against ar
    assert replay_runs({"medusa": FAST}, ["medusa"]) == ({"medusa": [FAST]}, [])


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
@pytest.mark.parametrize("related", [True, False])
def test_a_page_replaying_unrelated_traces_shows_no_speedup(tiny_app, related):
    from dataclasses import replace

    from specviz.core.trace import bundle_json

    medusa = FAST if related else replace(FAST, prompt_ids=[7, 8], prompt="another prompt")
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    bundle = bundle_json([AR, medusa]).encode()
    at.file_uploader(key="replay.files").set_value(("runs.json", bundle, "application/json")).run()
    at.switch_page("views/compare.py").run()
    assert not at.exception
    table = next((d.value for d in at.dataframe if "A/r" in d.value.columns), None)  # the live table
    told = any("No speedup for medusa" in i.value for i in at.info)
    assert (table is not None and not told) if related else (table is None and told)
