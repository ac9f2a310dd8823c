"""The layers hold: import-linter's contracts (pyproject.toml) pass, every module sits in a layer, and the
Streamlit side (app.py, views/, ui/) never touches tensors (checked with ast)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def modules_of(layer: str) -> list[str]:
    """The module names in one layer string: 'a : b', 'a | b' or '(a)' (optional)."""
    parts = layer.replace("|", ":").split(":")
    return [p.strip().strip("()") for p in parts if p.strip()]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_import_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is not installed (it is in requirements.txt)"
    out = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert "0 broken" in out.stdout


def test_every_library_module_sits_in_a_layer():
    (layered,) = [c for c in contracts() if c["type"] == "layers"]
    placed = {m for layer in layered["layers"] for m in modules_of(layer)}
    files = sorted((ROOT / "specviz").rglob("*.py"))
    assert len(files) > 20
    names = [module_name(p) for p in files]
    packages = {n for n in names if any(m.startswith(n + ".") for m in placed)}  # specviz, specviz.heads
    missing = [n for n in names if n not in packages and not any(n == m or n.startswith(m + ".") for m in placed)]
    assert not missing, f"add these to a layer in pyproject.toml: {missing}"


def test_every_method_is_kept_apart_from_the_others():
    (apart,) = [c for c in contracts() if c["type"] == "independence"]
    methods = {
        module_name(p) for p in (ROOT / "specviz" / "methods").glob("*.py") if p.stem not in ("__init__", "base")
    }
    assert methods and methods == set(apart["modules"])


def test_streamlit_side_never_touches_tensors():
    files = [*(ROOT / "views").glob("*.py"), *(ROOT / "ui").glob("*.py")]
    assert len([p for p in files if p.parent.name == "views"]) >= 5, "the pages live in views/"
    offenders = [p.name for p in [*files, ROOT / "app.py"] if imported(p) & {"torch", "transformers"}]
    assert not offenders


def test_nothing_imports_the_pages():
    offenders = [p for p in [*(ROOT / "specviz").rglob("*.py"), *(ROOT / "ui").glob("*.py")] if "views" in imported(p)]
    assert not offenders
