"""The README a newcomer reads: short, every method named up front, the two commands CI runs, every file it cites
committed; and the experiments' index lists every experiment file."""

from __future__ import annotations

import re

import pytest

from specviz import methods
from specviz.core.paths import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
EXPERIMENTS = REPO / "docs" / "experiments"
# the words the opening paragraph uses for each registered method (plain decoding is "plain autoregressive decoding")
OPENING_NAMES = (
    "plain autoregressive decoding",
    "speculative sampling",
    "prompt lookup",
    "Medusa",
    "Hydra",
    "Medusa + Lookahead",
    "EAGLE-2",
    "EAGLE-3",
    "DFlash",
    "Jacobi",
    "Lookahead",
    "EAGLE + n-gram hybrid",
)


def test_the_readme_is_short_and_names_every_method_in_its_first_paragraph():
    assert len(README.splitlines()) <= 250
    first = " ".join(README.split("\n\n")[1].split())  # the paragraph after the title
    missing = [n for n in OPENING_NAMES if n not in first]
    assert not missing, missing
    assert len(OPENING_NAMES) == len(methods.available()), "a method was added: name it in the README's opening"


def test_the_readme_keeps_the_two_commands():
    assert "bash scripts/app.sh " in README
    assert "bash scripts/test.sh " in README  # CI's .ci/run calls it; a newcomer runs the same
    assert "scripts/test.sh" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_every_file_the_readme_cites_is_committed():
    cited = set(re.findall(r"`((?:docs|specviz|scripts|models|tests|data)/[\w./-]+)`", README))
    cited |= set(re.findall(r"\]\(((?:docs)/[\w./-]+?)(?:#[\w-]+)?\)", README))
    assert len(cited) > 10
    missing = sorted(c for c in cited if "<" not in c and not (REPO / c).exists())
    assert not missing, missing


def test_the_experiments_index_lists_every_experiment_file():
    index = (EXPERIMENTS / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w.-]+)\)", index))
    files = {p.name for p in EXPERIMENTS.iterdir() if p.is_file() and p.name != "README.md"}
    assert files - linked == set(), sorted(files - linked)
    assert linked - files == set(), sorted(linked - files)  # no link to a file that is not there


@pytest.mark.real_model
def test_the_readmes_python_use_runs(capsys):
    """The README's use of the library from Python runs as written and prints an answer and its A."""
    code = README.split("**From Python**:")[1].split("```python")[1].split("```")[0]
    exec(compile(code, "README.md", "exec"), {})
    text, a = capsys.readouterr().out.rstrip().rsplit(" ", 1)
    assert len(text.split()) > 5 and float(a) >= 1.0
