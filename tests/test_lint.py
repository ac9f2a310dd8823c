"""Static checks as configured in pyproject.toml: ruff check and ruff format on the whole tree, and pyright
(basic) over specviz/ and ui/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"{name} is not installed (it is in requirements.txt)"
    return found


def test_ruff_is_clean():
    out = subprocess.run([tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]


def test_ruff_format_is_clean():
    out = subprocess.run([tool("ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, "run `ruff format` on: " + out.stdout[-3000:]


@pytest.mark.full
def test_pyright_is_clean():
    """About a minute on 2 cores, so it runs in the full tier (scripts/test.sh)."""
    out = subprocess.run([tool("pyright")], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-4000:]
