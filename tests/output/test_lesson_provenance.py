"""One provenance on the lesson's screens: a figure measured on another machine or day than the recording wears a
badge naming them, the GPU stop names the recording's CPU, copied published numbers carry their sources, and a
work's versioned name (EAGLE-2) is not read as a number; Lookahead's accepted drafts counted by origin add up."""

from __future__ import annotations

from specviz.output.deck import machines
from specviz.output.lesson import claims, formulas
from specviz.output.lesson.facts import figure
from specviz.output.lesson.model import LESSON_FILE, load_lesson
from specviz.output.lesson.pack import PACK_FILE, read
from specviz.output.viz.lookahead import accepted_origins


def _badges(fig) -> list[str]:
    return [a.text for a in fig.layout.annotations if (a.text or "").startswith("stored: ")]


def test_a_stored_figure_names_its_machines_and_days_and_the_recordings_own_wear_none():
    lesson, pack = load_lesson(LESSON_FILE), read(PACK_FILE)
    own = f"{pack.provenance.cpu}, {pack.provenance.date[:10]}"
    for sid in ("kinds", "batch", "context", "lineage", "cost_model"):
        fig, measured = figure(pack, lesson.stops[lesson.index(sid)])
        found = machines(measured)
        assert found and set(found) != {own}, sid
        assert _badges(fig) == ["stored: " + ";<br>".join(found)], sid  # a source a line
    # the recording's runs; flat: the probe's curve, measured by the recording (it would wear a badge had it been
    # cached from another day)
    for sid in ("race", "lookahead", "flat"):
        assert not _badges(figure(pack, lesson.stops[lesson.index(sid)])[0]), sid
    # the GPU stop: the recording's curve and a model, beside the H200's stored probe, which it names (once)
    assert _badges(figure(pack, lesson.stops[lesson.index("gpu")])[0]) == ["stored: NVIDIA H200, 2026-12-04"]


def test_machines_reads_each_machine_and_day_once():
    where = ("a.json measured on Intel(R) Xeon(R) Processor (2 cores), cpu, on 2026-12-01, under load; b.json "
             "measured on Intel(R) Xeon(R) Processor (2 cores), cpu, on 2026-12-01; c measured on AMD EPYC (2 cores, "
             "23.5 GiB) on 2026-12-04")  # fmt: skip
    assert machines(where) == ["Intel(R) Xeon(R) Processor, 2026-12-01", "AMD EPYC, 2026-12-04"]
    assert machines("this machine's recorded cost curve") == []
    here = "measured on the computer running specviz, AMD EPYC (2 cores, 23.5 GiB), cpu · float32, on 2026-12-08"
    assert machines(here) == ["AMD EPYC, 2026-12-08"]  # the machine, not the words that say the app runs there


def test_the_gpu_stop_names_the_cpu_the_pack_was_recorded_on():
    pack = read(PACK_FILE)
    fig, fns, where = formulas.computed("gpu_whatif", pack.stops)
    assert pack.provenance.cpu in fig.layout.title.text and "this CPU" not in fig.layout.title.text
    assert pack.provenance.cpu in where and fns["flat"]("cpu") > 0


def test_published_numbers_carry_their_sources():
    fig, fns, where = formulas.computed("published_figures", {})
    assert fns["published"]("specbench-a100", "EAGLE-1", "speedup") == 2.29
    assert "Spec-Bench" in where and "docs/gpu/2026-12-04-h200.md" in where
    badge = [a.text for a in fig.layout.annotations if (a.text or "").startswith("stored: ")]
    assert badge and "Spec-Bench, A100" in badge[0] and "H200" in badge[0]
    assert {t.name for t in fig.data} >= {"Spec-Bench: A100, Vicuna-7B, fp16", "this project: H200, SmolLM2-135M, fp32"}


def test_a_versioned_name_is_not_a_number_but_a_number_beside_it_is():
    said = claims.marked("EAGLE-2 drafts a tree. EAGLE-2 kept 2 tokens. It uses N minus one levels.")[1]
    assert claims.audit(said, (), [])[1] == ["EAGLE-2 kept 2 tokens."]


def test_lookaheads_accepted_drafts_by_origin_add_up_to_its_accepted_drafts():
    pack = read(PACK_FILE)
    run = pack.groups["code-class@0"].median("lookahead")
    counts = accepted_origins(run)
    assert run.config["method"]["seed_prompt"] is False and counts["prompt"] == 0
    assert sum(counts.values()) == sum(s.drafts_accepted for s in run.steps) > 0


def test_the_seeded_build_runs_lookahead_again_with_the_prompt_in_its_pool(tiny_lm):
    from specviz.core.sampling import Sampling
    from specviz.methods import lookahead
    from specviz.output.lesson.stored import regrown

    lesson = load_lesson(LESSON_FILE)
    stop = lesson.stops[lesson.index("lookahead")].at(3)
    assert stop.figure == "lookahead_origins"
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6]  # repeats: the seeded pool has n-grams to offer
    cfg = lookahead.Config(window=3, ngram=3, guesses=2, seed_prompt=False)
    run = lookahead.generate(tiny_lm, prompt, Sampling(max_new_tokens=12), cfg)
    fig = regrown(tiny_lm, stop, run, 0, cfg)
    paper, seeded = fig.layout.meta["origins"]
    assert paper == accepted_origins(run) and paper["prompt"] == 0
    assert [t.name for t in fig.data] == ["harvested from the window", "the prompt's n-grams (seeded)"]
    assert "seeded" in fig.data[0].x[1] and f"{seeded['prompt']} of {sum(seeded.values())}" in fig.layout.title.text
