"""The static checks hold: `ruff check .` and `mypy` with the configuration in
pyproject.toml ([tool.ruff], [tool.mypy]: pvchaos and suites, kube and conformance strict)
exit 0. Run from the venv's bin dir, as test_layers.py runs lint-imports; mypy keeps its
incremental cache in .mypy_cache (gitignored), so a run after the first takes seconds."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    return shutil.which(name, path=str(Path(sys.executable).parent)) or name


def test_ruff_finds_nothing() -> None:
    done = subprocess.run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_finds_nothing() -> None:
    done = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
