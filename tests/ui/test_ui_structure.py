"""The app's glue keeps its shape: every cached resource in ui/resources.py, no model lock taken by a page or by ui/
(the library takes it), and no import circle among the ui modules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GLUE = sorted([*(ROOT / "ui").glob("*.py"), *(ROOT / "views").glob("*.py"), ROOT / "app.py"])


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def test_every_cached_resource_lives_in_ui_resources():
    found = {
        f"{p.relative_to(ROOT)}:{n.lineno}"
        for p in GLUE
        for n in ast.walk(_tree(p))
        if isinstance(n, ast.Attribute) and n.attr in ("cache_resource", "cache_data")
    }
    assert found and all(f.startswith("ui/resources.py:") for f in found), sorted(found)


def test_no_page_or_ui_module_takes_the_model_lock():
    taken = [
        f"{p.relative_to(ROOT)}:{n.lineno}"
        for p in GLUE
        for n in ast.walk(_tree(p))
        if isinstance(n, ast.Attribute) and n.attr == "lock"
    ]
    assert not taken, taken


def _ui_imports(path: Path) -> set[str]:
    out = set()
    for n in ast.walk(_tree(path)):
        if isinstance(n, ast.ImportFrom) and n.module == "ui":
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and (n.module or "").startswith("ui."):
            out.add((n.module or "").removeprefix("ui."))
        elif isinstance(n, ast.Import):
            out |= {a.name.removeprefix("ui.") for a in n.names if a.name.startswith("ui.")}
    return out


def test_the_ui_modules_import_each_other_without_a_circle():
    graph = {p.stem: _ui_imports(p) for p in (ROOT / "ui").glob("*.py")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(d == goal or (d not in seen and reaches(d, goal, seen | {d})) for d in graph.get(start, ()))

    assert not [m for m in graph if reaches(m, m, set())]
