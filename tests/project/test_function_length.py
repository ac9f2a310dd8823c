"""What the old line budgets were for: a function a reader takes in at once. No function of the app runs over 50
lines, its docstring, comments and blank lines counted. A module has no budget: it is as long as its one idea needs
(a method's file holds its whole algorithm), and files were once split only to pass one."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = [*sorted(p for d in ("specviz", "ui", "views") for p in (ROOT / d).rglob("*.py")), ROOT / "app.py"]
MOST = 50


def long_functions(source: str, most: int = MOST) -> dict[str, int]:
    """Every function (method, nested function) in `source` longer than `most` lines, by name."""
    return {
        node.name: n
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > most
    }


def test_the_check_sees_the_code():
    assert len(FILES) > 50 and any(p.name == "base.py" for p in FILES)


def test_a_long_function_is_found_with_its_prose_counted():
    body = '    """Doc."""\n' + "    # why\n" * 47 + "    return 1\n"  # 50 lines with the def
    assert long_functions("def f():\n" + body) == {}
    method = "class A:\n    def g(self):\n" + body.replace("    ", "        ") + "        pass\n"  # 51 lines
    assert long_functions(method) == {"g": 51}


def test_no_function_over_fifty_lines():
    long = {f"{p.relative_to(ROOT)}:{name}": n for p in FILES for name, n in long_functions(p.read_text()).items()}
    assert not long, f"functions over {MOST} lines: {long}"
