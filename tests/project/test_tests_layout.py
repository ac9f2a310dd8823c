"""tests/ mirrors the code: one folder per package of specviz/, ui/ for the app (ui/, views/, AppTest, the browser)
and project/ for whole-repository checks, each a package of its own (an __init__.py, so two folders' modules never
clash by name); only the shared fixtures and helpers sit at the top of tests/."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FOLDERS = ("core", "trees", "heads", "methods", "corpus", "training", "tuning", "output", "ui", "project")
HELPERS = {
    "__init__.py",
    "conftest.py",
    "apptest.py",
    "devices.py",
    "fixture_method.py",
    "layout.py",
    "sampling_check.py",
    "train_check.py",
}


def misplaced(tests: Path) -> list[str]:
    """What breaks the layout under `tests`: a module at the top that is no shared helper, a module in a folder
    that is not one of FOLDERS, and a folder of FOLDERS without its __init__.py."""
    found = []
    for path in sorted(p for p in tests.rglob("*.py") if "__pycache__" not in p.parts):
        rel = path.relative_to(tests)
        top = len(rel.parts) == 1
        if (top and rel.name not in HELPERS) or (not top and rel.parts[0] not in FOLDERS):
            found.append(rel.as_posix())
    return found + [f"{name}/__init__.py" for name in FOLDERS if not (tests / name / "__init__.py").is_file()]


def test_every_test_module_sits_in_its_packages_folder():
    assert len(list(TESTS.glob("*/test_*.py"))) > 100  # the check sees the tests
    assert not misplaced(TESTS), "out of place or missing (see FOLDERS, HELPERS): " + ", ".join(misplaced(TESTS))


def test_every_package_of_the_library_has_its_folder():
    packages = {p.parent.name for p in (ROOT / "specviz").glob("*/__init__.py")}
    mirrored = set(FOLDERS) - {"ui", "project"}
    assert packages == mirrored, f"specviz's packages {sorted(packages)}, tests' folders for them {sorted(mirrored)}"


def test_the_check_catches_a_flat_test_and_a_folder_without_init(tmp_path):
    for name in FOLDERS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").touch()
    (tmp_path / "conftest.py").touch()
    (tmp_path / "core" / "test_ok.py").touch()
    assert misplaced(tmp_path) == []
    (tmp_path / "test_flat.py").touch()
    (tmp_path / "misc").mkdir()
    (tmp_path / "misc" / "test_elsewhere.py").touch()
    (tmp_path / "trees" / "__init__.py").unlink()
    assert misplaced(tmp_path) == ["misc/test_elsewhere.py", "test_flat.py", "trees/__init__.py"]
