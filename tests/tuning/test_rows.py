"""The row bench keeps what it measured: rows appended as runs finish, a run stopped at its limit (or killed
mid-line) still summarises, every method paired with plain decoding on the same prompt and repeat."""

from __future__ import annotations

from specviz.core.sampling import Sampling
from specviz.tuning import rows


def test_a_bench_stopped_at_its_limit_keeps_its_rows(tiny_lm, tmp_path):
    out = tmp_path / "rows.jsonl"
    prompts = ["one two three", "four five six", "seven eight nine"]
    ticks = iter(range(100))  # each run start reads the clock once: the deadline falls after the fourth run
    s = Sampling(max_new_tokens=8)
    written = rows.run_rows(tiny_lm, ["ar", "pld", "jacobi"], prompts, s, 2, out, deadline=3, clock=lambda: next(ticks))
    assert written == 4  # prompt 0: ar, pld, jacobi; prompt 1: ar; then the limit
    with out.open("a") as f:
        f.write('{"method": "pld", "prompt": 1, "rep')  # a run killed while writing its line
    head, got = rows.read_rows(out)
    assert head["max_new_tokens"] == 8 and "provenance" in head
    assert [(r["method"], r["prompt"]) for r in got] == [("ar", 0), ("pld", 0), ("jacobi", 0), ("ar", 1)]
    summ = rows.summary(got)
    assert set(summ) == {"ar", "pld", "jacobi"} and summ["ar"]["speedup"] == 1.0
    assert summ["pld"]["identical"] == "1/1" and summ["pld"]["runs"] == 1
    assert "| pld |" in rows.table(summ)


def test_variants_name_their_settings_and_refuse_unknown_ones():
    assert rows.variant("eagle:depth=5,top_k=10,total_tokens=60") == (
        "eagle@depth=5,top_k=10,total_tokens=60",
        "eagle",
        {"depth": "5", "top_k": "10", "total_tokens": "60"},
    )
    assert rows.main(["--out", "x.jsonl", "--set", "eagle:no_such=1"]) == 2


def test_the_newest_stored_run_is_read_with_its_provenance(tmp_path):
    assert rows.latest_stored(tmp_path) is None
    for day, tps in (("2026-12-01-x", 10.0), ("2026-12-04-y", 20.0)):
        (tmp_path / day).mkdir()
        lines = [
            '{"provenance": {"device": "gpu ' + day + '"}, "max_new_tokens": 8}',
            '{"method": "ar", "prompt": 0, "repeat": 0, "tokens": 8, "generation_s": '
            + str(8 / tps)
            + ', "decode_s": 0.1, "forwards": 8, "A": 1.0, "identical": false}',
        ]
        (tmp_path / day / "rows.jsonl").write_text("\n".join(lines) + "\n")
    head, summ = rows.latest_stored(tmp_path)
    assert head["provenance"]["device"] == "gpu 2026-12-04-y" and summ["ar"]["tokens_per_s"] == 20.0
