"""Where the files pvchaos ships beside its code are: the built-in suites and kind's
cluster configurations.

In a checkout they sit at the top of the repository (`suites/`, `kind-config/`), next to
`pyproject.toml`, as the design keeps them. A wheel carries copies under the package
(`pvchaos/_suites`, `pvchaos/_kind_config`; setup.py puts them there at build time), so
`pvchaos run` and `pvchaos certify` work from a pip install too. Every caller asks here,
never `REPO_ROOT / "suites"`, so the two layouts cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]  # pvchaos/
_ABOVE = _PACKAGE.parent  # the checkout, or site-packages when installed

# Name at the top of a checkout -> name under the installed package (setup.py reads this).
SHIPPED = {"suites": "_suites", "kind-config": "_kind_config"}


def checkout_root() -> Path | None:
    """The repository this pvchaos runs from, or None when it is installed."""
    return _ABOVE if (_ABOVE / "pyproject.toml").is_file() and (_ABOVE / "suites").is_dir() else None


def _shipped(name: str) -> Path:
    root = checkout_root()
    return root / name if root is not None else _PACKAGE / SHIPPED[name]


def suites_dir() -> Path:
    """The built-in suites: `suites/` of the checkout, else the copy the wheel installed."""
    return _shipped("suites")


def kind_config_dir() -> Path:
    """kind's cluster configurations (multizone.yaml): `kind-config/` of the checkout, else
    the installed copy."""
    return _shipped("kind-config")


def builtin_suite(name: str) -> Path | None:
    """`reclaim` -> the file of that built-in suite, or None when there is no such suite."""
    path = suites_dir() / f"test_{name}.py"
    return path if name and name.replace("_", "").isalnum() and path.is_file() else None


def builtin_suites() -> list[str]:
    """The names of the built-in suites (files `test_NAME.py`), sorted."""
    return sorted(p.stem.removeprefix("test_") for p in suites_dir().glob("test_*.py"))
