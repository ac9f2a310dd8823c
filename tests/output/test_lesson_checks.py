"""The lesson's checks can fail: perturb the shipped recording (one method's steps twice as slow or twice as fast,
its runs swapped with another method's, its prefill tripled, its trees doubled) and some check of every method stop
stops holding (a told number or sentence, lesson.told, or a declared check); and `lesson check` fails on a marked
sentence without a check, a check backing no sentence, a kind declared wrong, and lists unmarked sentences that
state numbers."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

import pytest

from specviz.core.trace import Trace
from specviz.output.lesson import claims
from specviz.output.lesson.facts import check, main_method
from specviz.output.lesson.model import LESSON_FILE, Stop, load_lesson
from specviz.output.lesson.pack import Pack, read

Perturb = Callable[[Trace], Trace]


def _scaled(k: float) -> Perturb:
    """Every step of the run k times as long (the prefill as it was)."""

    def run(t: Trace) -> Trace:
        steps = [replace(s, wall_s=s.wall_s * k, propose_s=s.propose_s * k, verify_s=s.verify_s * k) for s in t.steps]
        return replace(t, steps=steps, total_s=t.prefill_s + k * (t.total_s - t.prefill_s))

    return run


def _prefill(k: float) -> Perturb:
    return lambda t: replace(t, prefill_s=t.prefill_s * k, total_s=t.total_s + (k - 1) * t.prefill_s)


SHAPES = ("total_tokens", "gamma", "guesses", "window", "max_draft")  # a method's width, whichever it has


def _doubled(ratio: Callable[[int], float]) -> Perturb:
    """The run as if its tree (or chain, or window) were twice as wide: its Config's width doubled, every step
    verifying twice the tokens, its pass as much dearer as this device's curve says (`ratio(w)`: the cost of a
    pass over 2w tokens against one over w)."""

    def run(t: Trace) -> Trace:
        config = {k: (2 * v if k in SHAPES and isinstance(v, int) else v) for k, v in t.config.items()}
        steps = [replace(s, forward_tokens=2 * s.forward_tokens, verify_s=s.verify_s * ratio(s.forward_tokens),
                         wall_s=s.wall_s + s.verify_s * (ratio(s.forward_tokens) - 1)) for s in t.steps]  # fmt: skip
        extra = sum(s.wall_s for s in steps) - sum(s.wall_s for s in t.steps)
        return replace(t, config=config, steps=steps, total_s=t.total_s + extra)

    return run


def doubled(pack: Pack, stop: Stop) -> Pack:
    """The pack with every method of the stop's group run at twice its width, its Configs saying so."""
    import numpy as np

    group = pack.group(stop)
    assert group is not None
    ks, ms = pack.fit["ks"], pack.fit["ms"]
    ratio = lambda w: float(np.interp(2 * max(w, 1), ks, ms) / np.interp(max(w, 1), ks, ms))  # noqa: E731
    runs = {n: ts if n == "ar" else [_doubled(ratio)(t) for t in ts] for n, ts in group.runs.items()}
    wide = lambda c: {k: (2 * v if k in SHAPES and isinstance(v, int) else v) for k, v in c.items()}  # noqa: E731
    configs = {n: wide(dict(c) if isinstance(c, dict) else vars(c)) for n, c in group.configs.items()}
    return replace(pack, groups=dict(pack.groups) | {group.key: replace(group, runs=runs, configs=configs)})


def _method(stop: Stop) -> str:
    """The method a stop is about: its figure's, else the first it shows."""
    return main_method(stop) or next(m for m in stop.methods if m != "ar")


def perturbed(pack: Pack, stop: Stop, how: str) -> Pack:
    """The pack with the stop's method changed in its group: 'slow', 'fast', 'prefill' or 'swap' (its runs
    traded with the next method's of the group, plain decoding's where it is alone)."""
    group = pack.group(stop)
    assert group is not None
    name, runs = _method(stop), dict(group.runs)
    if how == "swap":
        others = [n for n in runs if n not in (name, "ar")]
        other = others[0] if others else "ar"
        runs[name], runs[other] = runs[other], runs[name]
    else:
        change = {"slow": _scaled(2.0), "fast": _scaled(0.5), "prefill": _prefill(3.0)}[how]
        runs[name] = [change(t) for t in runs[name]]
    groups = dict(pack.groups) | {group.key: replace(group, runs=runs)}
    return replace(pack, groups=groups)


@pytest.fixture(scope="module")
def shipped() -> tuple[list[Stop], Pack]:
    """The method stops of the shipped lesson (those that answer the four questions, the method stops beside them:
    typical acceptance, tree sampling, the cost model's test, and the stop that says why a method wins) and the
    shipped recording."""
    lesson, pack = load_lesson(LESSON_FILE), read()
    stops = [s for s in lesson.stops if pack.group(s) is not None and (s.questions or main_method(s) or s.id == "why")]
    return stops, pack


def _fails(pack: Pack, stop: Stop) -> list[str]:
    return [v.line() for v in check(pack, stop) if v.holds is not True]


def test_every_method_stop_holds_on_the_recording_and_fails_when_it_is_perturbed(shipped):
    stops, pack = shipped
    ids = {s.id for s in stops}
    assert {"sps", "pld", "medusa", "hydra", "typical", "eagle", "eagle3", "tree_sampling", "jacobi",
            "lookahead", "hybrid", "why", "gamma"} <= ids  # fmt: skip
    for stop in stops:
        assert not _fails(pack, stop), stop.id
        failing = {how: _fails(perturbed(pack, stop, how), stop) for how in ("slow", "fast", "swap")}
        assert failing["swap"], (stop.id, "its runs swapped with another method's: some check must fail")
        assert failing["slow"] and failing["fast"], (stop.id, "its steps' times changed: some check must fail")


def test_every_method_stop_fails_a_recording_whose_trees_are_doubled(shipped):
    stops, pack = shipped
    for stop in stops:
        failing = _fails(doubled(pack, stop), stop)
        assert failing, (stop.id, "its methods run at twice their width: some check must fail")
    trained = [s for s in stops if s.id in ("medusa", "hydra", "eagle", "eagle3", "hybrid", "why")]
    for stop in trained:  # the fitted shape itself is held, not only the numbers it gave
        assert any("fitted(" in line for line in _fails(doubled(pack, stop), stop)), stop.id


def test_a_told_sentence_fails_when_its_data_changes_and_a_pack_without_its_narration_fails(shipped):
    lesson, pack = load_lesson(LESSON_FILE), shipped[1]
    why = lesson.stops[lesson.index("why")]
    said = [v for v in check(pack, why) if v.claim.startswith("told:")]
    assert said and all(v.holds for v in said)
    flipped = perturbed(pack, why, "slow" if pack.group(why).numbers("eagle")["speedup"].median > 1 else "fast")
    assert any(v.holds is False for v in check(flipped, why) if v.claim.startswith("told: speedup")), "wins/loses"
    bare = replace(
        pack, stops=dict(pack.stops) | {why.id: {k: v for k, v in pack.stops[why.id].items() if k != "told"}}
    )
    assert any(v.holds is None and "stores no narration" in v.error for v in check(bare, why))


def test_the_narration_is_told_from_the_recording_it_shows(shipped):
    from specviz.output.lesson.facts import narrate

    lesson, pack = load_lesson(LESSON_FILE), shipped[1]
    for stop in lesson.stops:
        text = re.sub(r"\$\$.*?\$\$", "", narrate(pack, stop).text)  # a formula's braces are LaTeX's
        assert "{{" not in text and "}}" not in text and "—" not in text, (stop.id, text)
    serial = lesson.stops[lesson.index("serial")]
    group = pack.group(serial)
    assert group is not None
    from specviz.output.lesson.runs import step_ms

    assert f"{step_ms(group, 'ar'):.1f} ms" in narrate(pack, serial).text


def test_the_timing_claims_fail_both_ways_and_a_changed_prefill_fails_a_r(shipped):
    lesson, pack = load_lesson(LESSON_FILE), shipped[1]
    for sid in ("sps", "medusa", "hydra", "eagle", "jacobi", "hybrid", "eagle3"):
        stop = lesson.stops[lesson.index(sid)]
        assert _fails(perturbed(pack, stop, "slow"), stop) and _fails(perturbed(pack, stop, "fast"), stop), sid
    a_r = lesson.stops[lesson.index("a_r")]
    assert not _fails(pack, a_r)
    assert _fails(perturbed(pack, a_r, "prefill"), a_r), "a method whose prefill costs three times plain decoding's"


def test_lesson_check_fails_on_a_mark_without_a_check_and_lists_numbers_no_check_holds():
    sentences = claims.marked("Prompt lookup runs 2.5× faster [#fast]. It has no mark and costs 3 ms. Plain words.")
    shown, said = sentences
    assert shown == "Prompt lookup runs 2.5× faster. It has no mark and costs 3 ms. Plain words."
    assert said[0] == ("Prompt lookup runs 2.5× faster.", ("fast",)) and said[1][1] == ()
    backed = (claims.Check('speedup("pld") > 2', "measured", ("fast",)),)
    holds = [claims.Verdict('speedup("pld") > 2', True, (), kind="measured")]
    problems, unmarked = claims.audit(said, backed, holds)
    assert not problems and unmarked == ["It has no mark and costs 3 ms."], "listed, not failed"
    problems, _ = claims.audit(said, (), [])
    assert problems == ["no check backs the sentence marked [#fast]: 'Prompt lookup runs 2.5× faster.'"]
    stray = (claims.Check('speedup("pld") > 2', "stored", ("slow",)),)
    problems, _ = claims.audit(said, stray, holds)
    assert any("backs [#slow], which no sentence carries" in p for p in problems)
    assert any("is declared stored but reads measured figures" in p for p in problems)


def test_a_check_table_is_read_and_a_bad_one_refused():
    read = claims.checks([{"check": "A('pld') > 2", "kind": "measured", "backs": "jumps"}, "A('pld') > 1"], {"A"})
    assert read == (claims.Check("A('pld') > 2", "measured", ("jumps",)), claims.Check("A('pld') > 1"))
    for bad, says in [({"check": "A('x') > 1", "kind": "guessed"}, "kind is one of"),
                      ({"check": "A('x') > 1", "backs": ["Bad Mark"]}, "names marks"),
                      ({"check": "A('x') > 1", "why": "?"}, "not one with 'why'")]:  # fmt: skip
        with pytest.raises(claims.ClaimError, match=says):
            claims.checks([bad], {"A"})
    kinds = {"flat": lambda device: "measured" if device == "cpu" else "arithmetic"}
    fns = {"flat": {"cpu": 20.0, "a100": 230.0}.__getitem__}
    assert claims.evaluate("flat('a100') > 100", fns, kinds=kinds).kind == "arithmetic"
    assert claims.evaluate("flat('a100') > 5 * flat('cpu')", fns, kinds=kinds).kind == "measured"


def test_the_shipped_lesson_marks_every_sentence_it_checks():
    from specviz.output.lesson.claims import audit

    lesson, pack = load_lesson(LESSON_FILE), read()
    for stop in lesson.stops:
        problems, _unmarked = audit(stop.sentences, stop.checks, check(pack, stop))
        assert not problems, (stop.id, problems)
        assert "[#" not in stop.narration, "the marks are not shown"


def test_the_uncertain_rule_picks_the_longest_path_where_the_target_was_unsure():
    from specviz.output.focus import focus_step

    lesson, pack = load_lesson(LESSON_FILE), read()
    eagle = lesson.stops[lesson.index("eagle")]
    group = pack.group(eagle)
    assert group is not None
    steps = [s for s in group.median("eagle").steps if s.detail is not None]
    shown = focus_step(steps, "uncertain")
    unsure = [s for s in steps if s.entropy >= 1.0]
    assert shown in unsure and shown.drafts_accepted == max(s.drafts_accepted for s in unsure)
    assert focus_step([s for s in steps if s.entropy < 1.0], "uncertain") is not None, "none unsure: the longest"


def test_lesson_check_exits_1_on_a_marked_sentence_without_its_check(tmp_path, capsys):
    from specviz.__main__ import main
    from specviz.output.lesson.pack import PACK_FILE

    text = LESSON_FILE.read_text(encoding="utf-8")
    assert main(["lesson", "check", str(PACK_FILE)]) == 0
    shipped = capsys.readouterr().out
    assert " 2. serial: 1 check(s), 1 measured on this recording" in shipped and "0 problem(s)" in shipped
    assert "FAILS" not in shipped and "unmarked  " not in shipped, "all hold; every sentence with a number marked"
    moved = tmp_path / "lesson.toml"
    moved.write_text(text.replace("decoding writes [#same]", "decoding writes [#sane]"), encoding="utf-8")
    assert main(["lesson", "check", str(PACK_FILE), "--lesson-file", str(moved)]) == 1
    out = capsys.readouterr().out
    assert "PROBLEM   no check backs the sentence marked [#sane]: 'Every lane writes exactly" in out
    assert "backs [#same], which no sentence carries" in out and "2 problem(s) with marks or kinds" in out


def test_a_range_needs_three_interleaved_runs(shipped):
    lesson, pack = load_lesson(LESSON_FILE), shipped[1]
    race = lesson.stops[lesson.index("race")]
    group = pack.group(race)
    assert group is not None
    two = replace(group, runs={n: ts[:2] for n, ts in group.runs.items()})
    verdicts = check(replace(pack, groups=dict(pack.groups) | {group.key: two}), race)
    ranged = [v for v in verdicts if "low(" in v.claim]
    assert ranged and all(v.holds is None for v in ranged), "a told choice over ranges is undecided on two runs"


def test_the_lesson_holds_on_a_recording_made_on_an_avx2_cpu(capsys):
    """The same lesson recorded on an AVX2-only EPYC (a steeper cost curve, smaller fitted trees, bf16 emulated; or
    an avx512 CPU running AVX2 kernels): its narration is told from its own runs and every check holds."""
    from specviz.__main__ import main
    from specviz.output.lesson.pack import PACK_FILE

    avx2 = PACK_FILE.with_name("pack-avx2.json")
    made = read(avx2).provenance
    assert "avx512" not in made.cpu_flags or "avx2 kernels" in made.device, made
    assert main(["lesson", "check", str(avx2)]) == 0
    out = capsys.readouterr().out
    assert "FAILS" not in out and "UNDECIDED" not in out and " 0 problem(s)" in out
