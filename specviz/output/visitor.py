"""What a visitor types, shown back or used as a name: escaped for markdown, and kept inside the shipped lessons.

The app renders messages as markdown, so a file name, a `?lesson=` value or a trace's method name that holds
`**`, `[text](url)` or `<b>` must be escaped before it is shown inside the app's own boxes. A lesson path typed
on a shared server must never reach the filesystem outside the shipped lessons' folder: it is only ever looked up
among the names of the lesson files that folder holds.
"""

from __future__ import annotations

import re
from pathlib import Path

from specviz.output.lesson import LESSON_FILE

LESSONS = LESSON_FILE.parent  # the shipped lessons' folder: its *.toml files are the lessons a visitor may name
MAX_SHOWN = 80  # characters of a visitor's text shown back
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()<>#|~$:])|^([-+]|\d+\.)")  # inline marks; a list's at the start


def escaped(text: object, limit: int = MAX_SHOWN) -> str:
    """`text` cut to `limit` characters (control characters dropped) with every markdown character escaped."""
    shown = "".join(c for c in str(text) if c.isprintable())
    shown = shown if len(shown) <= limit else shown[: limit - 1] + "…"
    return _MARKDOWN.sub(lambda m: m.group(0)[:-1] + "\\" + m.group(0)[-1], shown)  # "12." -> "12\."


def shipped_lessons() -> dict[str, Path]:
    """The shipped lessons by file name (lesson.toml and any other *.toml beside it)."""
    return {p.name: p for p in sorted(LESSONS.glob("*.toml")) if p.is_file() and not p.is_symlink()}


def lesson_file(typed: str) -> Path:
    """The shipped lesson a visitor's text names (its file name, or that name under the folder's path); ValueError
    with one sentence for anything else. The text is only compared with the shipped names: it never opens a file."""
    name = str(typed).strip()
    for prefix in (f"{LESSONS.relative_to(LESSONS.parents[1]).as_posix()}/", "./"):  # specviz/output/lesson.toml
        name = name.removeprefix(prefix)
    lessons = shipped_lessons()
    if name in lessons:
        return lessons[name]
    names = ", ".join(lessons) or "none"
    raise ValueError(f"'{escaped(typed, 60)}' is not a lesson shipped with the app (there are: {names}).")
