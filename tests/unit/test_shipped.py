"""The built-in suites and kind's configurations are found in a checkout and in an
install (the wheel's copies under pvchaos/, which setup.py puts there)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pvchaos import runner
from pvchaos.tools import shipped

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkout_uses_its_own_folders() -> None:
    assert shipped.checkout_root() == ROOT
    assert shipped.suites_dir() == ROOT / "suites" and shipped.kind_config_dir() == ROOT / "kind-config"
    assert shipped.builtin_suite("reclaim") == ROOT / "suites" / "test_reclaim.py"
    assert shipped.builtin_suite("nosuch") is None and shipped.builtin_suite("../suites/test_reclaim") is None
    assert runner.known_suites() == shipped.builtin_suites() and "reclaim" in runner.known_suites()


def test_an_install_uses_the_copies_under_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Installed, the folder above `pvchaos/` is site-packages: no pyproject.toml there."""
    monkeypatch.setattr(shipped, "_ABOVE", tmp_path)
    package = ROOT / "pvchaos"
    assert shipped.checkout_root() is None
    assert shipped.suites_dir() == package / "_suites" and shipped.kind_config_dir() == package / "_kind_config"
    assert shipped.builtin_suite("reclaim") is None, "a checkout has no pvchaos/_suites"


def test_setup_py_ships_what_the_resolver_looks_for() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text())
    table = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "SHIPPED" for t in node.targets))
    from_setup = {k: v[0] for k, v in ast.literal_eval(table).items()}
    assert from_setup == shipped.SHIPPED
    assert all((ROOT / folder).is_dir() for folder in shipped.SHIPPED)
