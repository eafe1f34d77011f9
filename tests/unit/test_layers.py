"""The layers of docs/architecture.md hold: `lint-imports` checks the contracts in
pyproject.toml (layers; only kube/ and clusters/ use the Kubernetes client; a pure oracle)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _layered_modules() -> set[str]:
    """Every module the layers contract names (split on the separators | and :)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return {m.strip() for layer in contract["layers"] for m in re.split(r"[|:]", layer)}


def test_every_module_of_pvchaos_is_in_a_layer() -> None:
    """A new top-level module or package of pvchaos that no layer names would escape the
    contract silently: name it in pyproject.toml's layers."""
    layered = _layered_modules()
    children = {f"pvchaos.{p.stem}" for p in (ROOT / "pvchaos").glob("*.py") if p.stem != "__init__"}
    children |= {f"pvchaos.{p.parent.name}" for p in (ROOT / "pvchaos").glob("*/__init__.py")}
    assert not children - layered, f"not in any layer of the import contract: {sorted(children - layered)}"


def test_import_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    done = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
