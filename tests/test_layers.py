"""The library never imports streamlit; pages never import torch (checked with ast)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_library_does_not_import_streamlit():
    offenders = [p for p in (ROOT / "specviz").rglob("*.py") if "streamlit" in imported(p)]
    assert not offenders


def test_pages_do_not_touch_tensors():
    files = [*(ROOT / "pages").glob("*.py"), ROOT / "app.py"]
    offenders = [p for p in files if imported(p) & {"torch", "transformers"}]
    assert not offenders
