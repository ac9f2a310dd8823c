"""Static checks as configured in pyproject.toml: ruff check and ruff format on the whole tree. pyright (basic, over
specviz/ and ui/) runs in scripts/test.sh beside the real-model tests, not here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
