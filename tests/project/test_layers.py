"""The layers hold: import-linter's contracts (pyproject.toml) pass and can fail, the packages of specviz are the
layers and every module sits in one, and the Streamlit side (app.py, views/, ui/) never touches tensors (ast)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

from specviz.methods import NOT_METHODS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli is pytest's own dependency there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def package_layers() -> dict:
    """The contract of the packages themselves (the one layers contract without containers)."""
    (layered,) = [c for c in contracts() if c["type"] == "layers" and not c.get("containers")]
    return layered


def lint_imports(*args: str) -> subprocess.CompletedProcess:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is not installed (it is in requirements.txt)"
    return subprocess.run([lint, "--no-cache", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


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
    out = lint_imports()
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert "0 broken" in out.stdout


def test_the_layer_check_can_fail(tmp_path):
    """The same packages in the reverse order break: import-linter really reads the graph."""
    layers = json.dumps(package_layers()["layers"][::-1])
    config = tmp_path / "reversed.toml"
    roots = json.dumps(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"])
    config.write_text(
        f"[tool.importlinter]\nroot_packages = {roots}\n\n[[tool.importlinter.contracts]]\n"
        f'name = "reversed"\ntype = "layers"\nlayers = {layers}\n'
    )
    out = lint_imports(str(config))
    assert out.returncode != 0 and "1 broken" in out.stdout, (out.stdout + out.stderr)[-4000:]


def test_every_library_module_sits_in_a_layer():
    placed = {m for layer in package_layers()["layers"] for m in modules_of(layer)}
    files = sorted((ROOT / "specviz").rglob("*.py"))
    assert len(files) > 20
    names = [module_name(p) for p in files]
    packages = {n for n in names if any(m.startswith(n + ".") for m in placed)}  # specviz
    missing = [n for n in names if n not in packages and not any(n == m or n.startswith(m + ".") for m in placed)]
    assert not missing, f"add these to a layer in pyproject.toml: {missing}"


def test_the_folders_are_the_layers():
    """Only the package face and the CLI sit at the top of specviz/; every package there is one layer."""
    top = ROOT / "specviz"
    assert sorted(p.name for p in top.glob("*.py")) == ["__init__.py", "__main__.py"]
    folders = {f"specviz.{d.name}" for d in top.iterdir() if (d / "__init__.py").is_file()}
    assert len(folders) >= 7
    assert folders <= set(package_layers()["layers"]), folders - set(package_layers()["layers"])


def test_every_method_is_kept_apart_from_the_others():
    """The methods sit in three layers: the compositions (card's composes), the methods that extend another's file
    (card's builds_on), every other method; within a layer none imports another ("|")."""
    methods = {
        module_name(p) for p in (ROOT / "specviz" / "methods").glob("*.py") if p.stem not in ("__init__", *NOT_METHODS)
    }
    from specviz import methods as registry

    composed = {registry.MODULES[c.name] for c in registry.cards() if c.composes}  # each imports its parts
    builders = {registry.MODULES[c.name] for c in registry.cards() if c.builds_on}  # each imports the one it extends
    (inside,) = [c for c in contracts() if c.get("containers") == ["specviz.methods"]]
    layers = [{f"specviz.methods.{m}" for m in modules_of(layer)} for layer in inside["layers"][1:4]]
    assert methods and layers == [composed, builders, methods - composed - builders]
    assert all(":" not in layer for layer in inside["layers"][2:4])  # apart: independent siblings


def test_the_pages_and_app_py_are_inside_the_layers():
    """import-linter reads views/ as a namespace package (every page in its graph, the top layer); app.py, a module
    beside the packages, is checked here: it imports only the pages, ui and the library's face, and nothing imports
    it."""
    import grimp

    graph = grimp.build_graph("specviz", "ui", "views")
    pages = {module_name(p) for p in (ROOT / "views").glob("*.py")}
    assert len(pages) >= 5 and pages <= graph.modules
    assert package_layers()["layers"][0] == "views"
    assert any(m.startswith("ui.") for m in graph.find_modules_directly_imported_by("views.data"))
    ours = {"specviz", "ui", "views", "app", "tests", "scripts"}
    assert imported(ROOT / "app.py") & ours <= {"views", "ui", "specviz"}
    code = [*(ROOT / "specviz").rglob("*.py"), *(ROOT / "ui").rglob("*.py"), *(ROOT / "views").glob("*.py")]
    assert not [p for p in code if "app" in imported(p)]


def test_streamlit_side_never_touches_tensors():
    files = [*(ROOT / "views").glob("*.py"), *(ROOT / "ui").glob("*.py")]
    assert len([p for p in files if p.parent.name == "views"]) >= 5, "the pages live in views/"
    offenders = [p.name for p in [*files, ROOT / "app.py"] if imported(p) & {"torch", "transformers"}]
    assert not offenders


def test_nothing_imports_the_pages():
    offenders = [p for p in [*(ROOT / "specviz").rglob("*.py"), *(ROOT / "ui").glob("*.py")] if "views" in imported(p)]
    assert not offenders
