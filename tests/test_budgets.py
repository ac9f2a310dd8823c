"""The style budgets, checked: no module of the app over ~300 lines, no function over ~40 (45 with slack)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = [*sorted(p for d in ("specviz", "ui", "views") for p in (ROOT / d).rglob("*.py")), ROOT / "app.py"]
MODULE_LINES, FUNCTION_LINES = 300, 45


def test_the_budget_checks_see_the_code():
    assert len(FILES) > 50 and any(p.name == "base.py" for p in FILES)


def test_no_module_over_budget():
    long = {str(p.relative_to(ROOT)): n for p in FILES if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert not long, f"modules over {MODULE_LINES} lines: {long}"


def test_no_function_over_budget():
    long = {}
    for p in FILES:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.name}"] = n
    assert not long, f"functions over {FUNCTION_LINES} lines: {long}"
