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
