"""The bench: every method interleaved with plain decoding, in specviz.core.measure's terms."""

from __future__ import annotations

from specviz.core.prompts import PromptItem
from specviz.core.sampling import Sampling
from specviz.tuning.bench import run_bench
from tests.conftest import make_tiny


def test_bench_reports_measures_a_and_identity_on_the_tiny_model(tokenizer, tmp_path, monkeypatch):
    # its own model and cache: the bench installs a measured latency curve on the model it runs
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    tiny_lm = make_tiny(tokenizer)
    items = [PromptItem("Say hello to the world.", "chat"), PromptItem("Repeat: a b c a b c a b c", "extraction")]
    res = run_bench(tiny_lm, ["ar", "pld", "hf"], items, Sampling(max_new_tokens=8), repeats=1)
    rows = res.summary()
    assert list(rows) == ["ar", "pld", "hf"]
    assert rows["ar"]["mean_accepted"] == 1.0  # plain decoding: one token per forward after the prefill
    assert rows["hf"]["mean_accepted"] == 1.0  # the peer's prefill pass is not counted as a step
    assert rows["pld"]["mean_accepted"] >= 1.0
    for name in rows:
        assert rows[name]["identical"] == rows[name]["total"] == 2 and rows[name]["speedup"] > 0
    assert set(res.by_category()) == {"chat", "extraction"}
    for run in res.runs["pld"]:
        assert 0 < run.decode_s <= run.seconds and run.produced >= run.forwards


def test_the_bench_speedup_is_the_median_of_paired_ratios_with_its_range(tiny_lm, monkeypatch):
    """Repeat i of the method is divided by repeat i of plain decoding (measure's definition), never the ratio of
    two independent medians; each prompt's range is kept; the warm-up runs inside the model lock too."""
    from specviz.tuning import bench

    times = {"ar": [9.0, 1.0, 4.0, 2.0, 1.0, 1.0, 1.0], "pld": [9.0, 0.5, 4.0, 4.0, 0.5, 0.5, 0.5]}  # warm-up first

    def runner(name):
        def run(_ids, _s):
            assert tiny_lm.lock.locked(), "a run (the warm-up too) outside the model lock"
            return bench.RunResult([1, 2], times[name].pop(0), 1, 1, 0.1)

        return run

    monkeypatch.setattr(bench, "runners", lambda _lm, names, _c: {n: runner(n) for n in ["ar", *names]})
    monkeypatch.setattr(bench.fit, "prepare", lambda _lm, configs, _names=(): dict(configs))
    items = [PromptItem("Say hello to the world.", "chat"), PromptItem("Repeat: a b c", "extraction")]
    res = bench.run_bench(tiny_lm, ["pld"], items, Sampling(max_new_tokens=2), repeats=3)
    # prompt 1: paired ratios 1/0.5, 4/4, 2/4 = 2, 1, 0.5 -> 1.0 (independent medians would give 2 / 4 = 0.5)
    assert res.ratios["pld"] == [[2.0, 1.0, 0.5], [2.0, 2.0, 2.0]]
    first = res.prompt_speedups("pld")[0]
    assert (first.median, first.low, first.high, first.n) == (1.0, 0.5, 2.0, 3)
    row = res.summary()["pld"]
    assert row["speedup"] == 1.5 and (row["speedup_low"], row["speedup_high"]) == (1.0, 2.0)
    assert row["speedup_q1"] <= row["speedup"] <= row["speedup_q3"]
    assert res.by_category() == {"chat": {"ar": 1.0, "pld": 1.0}, "extraction": {"ar": 1.0, "pld": 2.0}}
    data = res.to_dict()
    assert data["prompt_speedups"]["pld"] == [[1.0, 0.5, 2.0], [2.0, 2.0, 2.0]]
    assert "same repeat" in data["speedup_definition"] and "1.00–2.00x" in bench.format_table(res)
