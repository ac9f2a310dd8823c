"""python -m specviz lesson {record, retell, check, deck, readme}: measure a lesson once into a pack, tell its
narration again from a pack's data after the lesson's wording changed, check its claims on a pack, write a lecture
of it as slides, and the README's table of the four questions."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specviz.core.model_files import ModelError
from specviz.output.lesson.model import LessonError, load_lesson
from specviz.output.lesson.pack import PACK_FILE


def parser(model_args: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m specviz lesson", description=__doc__)
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("record", help="run every stop's methods (a warm-up, then interleaved repeats) into a pack")
    r.add_argument("--out", required=True, metavar="PACK.json")
    r.add_argument("--repeats", type=int, default=3, help="interleaved runs of each method (at least 3)")
    r.add_argument("--lesson-file", help="the lesson to record (default: $SPECVIZ_LESSON or the shipped one)")
    r.add_argument("--threads", type=int, help="torch's intra-op threads (default: its own; 1 on a shared CPU)")
    model_args(r)
    c = sub.add_parser("check", help="every stop's checks on a pack: the figure deciding each; exit 1 if any fails")
    c.add_argument("pack", nargs="?", default=str(PACK_FILE), help="a recorded pack (default: the shipped one)")
    c.add_argument("--lesson-file", help="the lesson whose checks to run (default: the shipped one)")
    d = sub.add_parser("deck", help="write a lecture (or all of them) as slides from a recorded pack (no model)")
    d.add_argument("out", metavar="DECK.pptx")
    d.add_argument("--lecture", default="all", help="a lecture's id (the lesson file's [[lecture]]), or all")
    d.add_argument("--pack", default=str(PACK_FILE), help="a recorded pack (default: the shipped one)")
    d.add_argument("--lesson-file", help="the lesson to write (default: the shipped one)")
    t = sub.add_parser("retell", help="store the lesson's narration told from a pack's own data (no model, no run)")
    t.add_argument("pack", help="a recorded pack, rewritten in place")
    t.add_argument("--lesson-file", help="the lesson whose narration to tell (default: the shipped one)")
    sub.add_parser("readme", help="rewrite the README's four questions and recording from the shipped lesson and pack")
    return p


def record(a: argparse.Namespace, load: Callable[[argparse.Namespace], Any]) -> int:
    from specviz.output.lesson.pack import plan
    from specviz.output.lesson.record import record, write

    lesson = load_lesson(a.lesson_file)
    plan(lesson)  # a lesson that cannot be packed fails before the model loads
    if a.threads:  # two threads spin-wait for each other on a CPU other work shares: one keeps the timings honest
        import torch

        torch.set_num_threads(a.threads)
    data = record(load(a), lesson, a.repeats, note=lambda m: print(m, file=sys.stderr, flush=True))
    path = write(data, Path(a.out))
    print(f"wrote {path}: {len(data['stops'])} stops, {len(data['groups'])} groups of runs, {a.repeats} repeats")
    return 0


def retell(a: argparse.Namespace) -> int:
    """A pack's narration told again from its own data for the lesson as it now reads (its wording edited after
    the recording): the numbers and chosen sentences stored, the runs untouched."""
    import json

    from specviz.output.lesson.pack import MAX_PACK_BYTES
    from specviz.output.lesson.record import told, write

    lesson, path = load_lesson(a.lesson_file), Path(a.pack)
    if not path.is_file() or path.stat().st_size > MAX_PACK_BYTES:
        raise LessonError(f"{path.name} is not a pack file this command can rewrite.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LessonError(f"{path.name} could not be read ({type(exc).__name__}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("stops"), dict):
        raise LessonError(f"{path.name} is not a lesson pack.")
    if lacks := [s.id for s in lesson.stops if s.id not in data["stops"]]:
        raise LessonError(f"{path.name} lacks the lesson's stops {', '.join(lacks[:4])}; record it again.")
    write(told(data, lesson), path)
    print(f"retold the narration of {len(lesson.stops)} stops from {path.name}'s own data")
    return 0


def printable(text: object) -> str:
    """`text` with what a terminal would act on (ESC, C1 codes like CSI, BEL, backspace, carriage returns, line
    breaks) shown as its Python escape, e.g. '\\x1b[2J' for a clear-screen: seen, never obeyed."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def say(line: str) -> None:
    """Print one line of `lesson check`: every one carries a pack's or a lesson file's text, so each is escaped."""
    print(printable(line))


def check(a: argparse.Namespace) -> int:
    """Print every check of every stop with its kind and the figures that decide it, how many per stop are measured
    on the recording, and the narration's sentences no check holds; 1 if a check fails or cannot be decided, a
    marked sentence has no check, a check's kind is declared wrong, or a stop has no check (a pack that cannot be
    read at all is refused in one line: exit 2, from main)."""
    from specviz.output.lesson.claims import audit
    from specviz.output.lesson.facts import check as check_stop
    from specviz.output.lesson.pack import read

    lesson = load_lesson(a.lesson_file)
    pack = read(a.pack, lesson)  # fitted to the lesson: stops and figures it does not have dropped, unvalidated
    say(f"{Path(a.pack).name}: {pack.where()}")  # a visitor's pack: no terminal control codes
    if said := pack.note():
        say(f"      {said}")
    failed = bare = wrong = measured = listed = counted = 0
    for k, stop in enumerate(lesson.stops, 1):
        verdicts = check_stop(pack, stop)
        here = sum(v.kind == "measured" for v in verdicts)
        say(f"{k:2}. {stop.id}: {len(verdicts)} check(s), {here} measured on this recording")
        for v in verdicts:
            say(f"      {v.line()}")
        problems, unmarked = audit(stop.sentences, stop.checks, verdicts)
        for p in problems:
            say(f"      PROBLEM   {p}")
        for text in unmarked:
            say(f"      unmarked  {text}")
        failed, counted = failed + sum(v.holds is not True for v in verdicts), counted + len(verdicts)
        bare, wrong = bare + (not verdicts), wrong + len(problems)
        measured, listed = measured + here, listed + len(unmarked)
    total = counted
    say(
        f"{total - failed} of {total} checks hold ({measured} measured on this recording); {bare} stop(s) without a "
        f"check; {wrong} problem(s) with marks or kinds; {listed} unmarked sentence(s) with numbers or comparisons"
    )
    return 1 if failed or bare or wrong else 0


def deck(a: argparse.Namespace) -> int:
    """Write one lecture (or every one) of the lesson from a pack, builds as consecutive slides."""
    from specviz.output.deck import deck_bytes
    from specviz.output.lesson.deck import pack_slides
    from specviz.output.lesson.facts import UNDECIDED
    from specviz.output.lesson.pack import read

    lesson, path = load_lesson(a.lesson_file), Path(a.out)
    if path.suffix.lower() != ".pptx":
        raise LessonError(f"A slide deck is written as .pptx; {path.name} has another suffix.")
    lesson.lecture(a.lecture)  # an unknown lecture fails before anything is drawn
    pack = read(a.pack, lesson)
    try:
        slides = pack_slides(pack, lesson, a.lecture)
    except UNDECIDED as exc:  # a pack that passed its schema and still cannot draw a stop: one line, exit 2
        raise LessonError(f"{Path(a.pack).name} cannot draw the lesson ({type(exc).__name__}: {exc}).") from None
    path.write_bytes(deck_bytes(slides))
    print(f"wrote {len(slides)} slides (lecture {a.lecture} of {Path(lesson.source).name}, recorded) to {path}")
    return 0


def main(argv: list[str], model_args: Callable, load: Callable) -> int:
    a = parser(model_args).parse_args(argv)
    try:
        if a.action == "deck":
            return deck(a)
        if a.action == "readme":
            from specviz.output.lesson.pack import PACK_FILE, read
            from specviz.output.lesson.readme import README, write

            done = write(load_lesson(), read(PACK_FILE))
            print(f"{'rewrote' if done else 'found no markers for'} the lesson's table and recording in {README.name}")
            return 0 if done else 1
        if a.action == "retell":
            return retell(a)
        return record(a, load) if a.action == "record" else check(a)
    except (LessonError, ModelError) as exc:  # record's model that cannot load: one line too
        print(f"specviz: error: {printable(str(exc).splitlines()[0])}", file=sys.stderr)
        return 2


def recorded_deck(lesson: Any, path: Path) -> bool:
    """export --lesson from the shipped pack when it holds every stop of `lesson` (no model); False otherwise."""
    from specviz.output.deck import deck_bytes
    from specviz.output.lesson.deck import pack_slides
    from specviz.output.lesson.pack import read

    pack = read(PACK_FILE, lesson) if PACK_FILE.is_file() else None
    if pack is None or pack.lacks:
        return False
    slides = pack_slides(pack, lesson)
    path.write_bytes(deck_bytes(slides))
    print(
        f"wrote {len(slides)} slides ({len(lesson.stops)} stops; the lesson {Path(lesson.source).name}, "
        f"recorded) to {path}"
    )
    return True
