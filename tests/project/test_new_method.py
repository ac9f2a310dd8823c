"""Adding a method with a head and a page, by docs/DESIGN.md's checklist, in a copy of the repository: it is
registered from what it declares (its card among the methods, its head's trainer among the kinds, its page in the
navigation), the import contracts hold, and the addition touches at most 8 files (issue 51)."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("specviz", "ui", "views", "app.py", "pyproject.toml")
MOST_FILES = 8

# the method's file: the run-on fixture (tests/fixture_method.py), its card naming its head and where it is kept
HEAD_FIELDS = """    head="runon",  # its head's training kind: specviz/training/runon_train.py
    head_label="Run-on heads",
    models=DEFAULT_DIR,
"""
HEAD = '''"""The run-on head's files: where its trained weights and manifest live."""

from __future__ import annotations

from specviz.core.paths import MODELS

DEFAULT_DIR = MODELS / "runon"
'''
TRAINER = '''"""The run-on head's trainer: its settings (the batches and the loss are training.trainer's protocol)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class RunOnTrainer:
    """How many drafted copies the head learns to score."""

    kind: ClassVar[str] = "runon"
    gamma: int = 4  # copies of the root a training position drafts
'''
DECLARATION = '''"""The Run-on drafting page: the last token guessed to repeat, one forward checks the run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specviz import methods
from specviz.output.pages.page import Control, Figure, Page, own, per_step
from specviz.output.viz.acceptance import gallery

CONTROLS = (Control("runon.gamma", "int", 1, 16, field="gamma"),)


def runs(values: dict[str, Any], _figure: str, _shows: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    return {"runon": methods.get("runon").Config(**own(values, CONTROLS))}, None


FIGURES = (Figure("runon_steps", per_step("runon"), method="runon"),)
PAGE = Page("runon", "Run-on drafting", CONTROLS, runs, FIGURES, icon=":material/repeat:", views={"runon": gallery})
'''
VIEW = '''"""Run-on drafting: the last token guessed to repeat γ times, the run checked in one forward pass."""

from __future__ import annotations

import streamlit as st

from specviz.output.pages.runon import PAGE
from ui.common import page_header, run_method, settings
from ui.declared import configs, draw, widget

page_header("Run-on drafting", "How far does guessing that the text repeats itself get?")
widget(st, PAGE, "runon.gamma", "γ (copies of the last token drafted)", value=4)
trace = run_method("runon", configs(PAGE)["runon"], settings())
if trace is not None:
    draw(PAGE, "runon_steps", {"runon": trace})
'''
OWN_TEST = '''"""Run-on drafting's own: the draft is the root repeated, as a one-branch tree."""

from specviz.methods import runon


def test_the_draft_is_the_root_repeated_as_a_chain():
    g = runon.guess(7, 3)
    assert g.tokens == [7, 7, 7, 7] and g.spec.parents == [-1, 0, 1, 2]
'''
CHECK = """
from specviz import methods
from specviz.output.pages import NAVIGATION
from specviz.training.kinds import TRAINERS
card = methods.card("runon")
assert card in methods.cards() and card.head == "runon", methods.cards()
assert TRAINERS["runon"].__name__ == "RunOnTrainer", TRAINERS
assert ("views/runon.py", "Run-on drafting", ":material/repeat:") in NAVIGATION, NAVIGATION
print("registered")
"""


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def add_method(repo: Path) -> None:
    """DESIGN.md's "Adding a method", steps 1-7, for a method with a head and a page of its own."""
    method = (ROOT / "tests" / "fixture_method.py").read_text(encoding="utf-8")
    order = "    order=90,  # after every shipped method"
    assert order in method
    method = method.replace(order, order + "\n" + HEAD_FIELDS.rstrip("\n"))
    method = method.replace(
        "\nfrom specviz.methods.base", "\nfrom specviz.heads.runon import DEFAULT_DIR\nfrom specviz.methods.base"
    )
    (repo / "specviz" / "methods" / "runon.py").write_text(method, encoding="utf-8")  # 1, 2: its file and record
    toml = repo / "pyproject.toml"  # 3: its layer (kept apart from the others there), its trainer's layer
    edit(toml, "lookahead | dflash", "lookahead | dflash | runon")
    edit(toml, "eagle_train | hydra_train", "eagle_train | hydra_train | runon_train")
    (repo / "specviz" / "heads" / "runon.py").write_text(HEAD, encoding="utf-8")  # 4: its head and trainer
    (repo / "specviz" / "training" / "runon_train.py").write_text(TRAINER, encoding="utf-8")
    # 5, 6: its page, declared (its figures there: a chain's acceptance views, as prompt lookup's), and its view
    (repo / "specviz" / "output" / "pages" / "runon.py").write_text(DECLARATION, encoding="utf-8")
    pages = repo / "specviz" / "output" / "pages" / "__init__.py"
    edit(pages, "import acceptance,", "import acceptance, runon,")
    edit(pages, "        lineage.PAGE,\n", "        lineage.PAGE,\n        runon.PAGE,\n")
    (repo / "views" / "runon.py").write_text(VIEW, encoding="utf-8")
    own = repo / "tests" / "methods"  # 7: its own test, beside the methods' (the identity contract finds it by itself)
    own.mkdir(parents=True, exist_ok=True)
    (own / "test_runon.py").write_text(OWN_TEST, encoding="utf-8")


def touched(repo: Path) -> list[str]:
    """The files of the copy that are new or differ from this checkout's."""
    out = []
    for path in sorted(p for p in repo.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = path.relative_to(repo)
        if not (ROOT / rel).is_file() or not filecmp.cmp(path, ROOT / rel, shallow=False):
            out.append(str(rel))
    return out


@pytest.fixture
def repo(tmp_path) -> Path:
    copy = tmp_path / "repo"
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            copy.mkdir(exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


@pytest.mark.full  # a copy of the repository, a fresh Python and lint-imports over it: ~6 s
def test_a_method_with_a_head_and_a_page_is_registered_by_at_most_8_files(repo):
    assert not touched(repo), "the copy differs from the checkout before anything is added"
    add_method(repo)
    changed = touched(repo)
    assert len(changed) <= MOST_FILES, changed
    env = os.environ | {"PYTHONPATH": str(repo)}
    run = subprocess.run([sys.executable, "-c", CHECK], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "registered" in run.stdout, run.stderr[-2000:]
    lint = Path(sys.executable).with_name("lint-imports")
    linted = subprocess.run([str(lint)], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert linted.returncode == 0, linted.stdout[-3000:]
    assert "0 broken" in linted.stdout and "dflash | runon" in (repo / "pyproject.toml").read_text()
