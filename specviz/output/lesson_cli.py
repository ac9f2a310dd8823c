"""python -m specviz lesson {record, check}: measure a lesson once into a pack, and check its claims on a pack."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specviz.output.lesson import LessonError, load_lesson
from specviz.output.lesson_pack import PACK_FILE


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
    return p


def record(a: argparse.Namespace, load: Callable[[argparse.Namespace], Any]) -> int:
    from specviz.output.lesson_pack import plan, record, write

    lesson = load_lesson(a.lesson_file)
    plan(lesson)  # a lesson that cannot be packed fails before the model loads
    if a.threads:  # two threads spin-wait for each other on a CPU other work shares: one keeps the timings honest
        import torch

        torch.set_num_threads(a.threads)
    data = record(load(a), lesson, a.repeats, note=lambda m: print(m, file=sys.stderr, flush=True))
    path = write(data, Path(a.out))
    print(f"wrote {path}: {len(data['stops'])} stops, {len(data['groups'])} groups of runs, {a.repeats} repeats")
    return 0


def check(a: argparse.Namespace) -> int:
    """Print every check of every stop with the figures that decide it; 1 if any fails or cannot be decided."""
    from specviz.output.lesson_facts import check as check_stop
    from specviz.output.lesson_pack import read

    lesson, pack = load_lesson(a.lesson_file), read(a.pack)
    print(f"{Path(a.pack).name}: {pack.where()}")
    failed = bare = 0
    for k, stop in enumerate(lesson.stops, 1):
        verdicts = check_stop(pack, stop)
        print(f"{k:2}. {stop.id}: {len(verdicts)} check(s)")
        for v in verdicts:
            print(f"      {v.line()}")
        failed += sum(v.holds is not True for v in verdicts)
        bare += not verdicts
    total = sum(len(s.checks) for s in lesson.stops)
    print(f"{total - failed} of {total} checks hold; {bare} stop(s) without a check")
    return 1 if failed or bare else 0


def main(argv: list[str], model_args: Callable, load: Callable) -> int:
    a = parser(model_args).parse_args(argv)
    try:
        return record(a, load) if a.action == "record" else check(a)
    except LessonError as exc:
        print(f"specviz: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


def recorded_deck(lesson: Any, path: Path) -> bool:
    """export --lesson from the shipped pack when it holds every stop of `lesson` (no model); False otherwise."""
    from specviz.output.deck import deck_bytes
    from specviz.output.lesson_deck import pack_slides
    from specviz.output.lesson_pack import read

    pack = read(PACK_FILE) if PACK_FILE.is_file() else None
    if pack is None or not all(s.id in pack.stops for s in lesson.stops):
        return False
    path.write_bytes(deck_bytes(pack_slides(pack, lesson)))
    print(f"wrote {len(lesson.stops)} slides (the lesson {Path(lesson.source).name}, recorded) to {path}")
    return True
