"""The stated public API (pvchaos.api): no public name disappears without notice, each is
documented in docs/writing-suites.md, and the names that moved under `pvchaos.` still
import for one release, with a warning, without shadowing a project's own packages."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pvchaos import api, api_reference

ROOT = Path(__file__).resolve().parents[2]


def test_no_public_name_has_disappeared() -> None:
    promised = api_reference.SNAPSHOT.read_text(encoding="utf-8").split()
    gone = []
    for entry in promised:
        module, name = entry.split(":")
        try:
            if not hasattr(importlib.import_module(module), name):
                gone.append(entry)
        except ImportError:
            gone.append(entry)
    assert not gone, (f"public names disappeared: {gone}; keep an alias that warns for one release "
                      "(docs/writing-suites.md#public-api), or say so in the release notes and drop them from "
                      f"{api_reference.SNAPSHOT.relative_to(ROOT)}")


def test_every_public_name_is_in_the_snapshot_and_documented() -> None:
    promised = set(api_reference.SNAPSHOT.read_text(encoding="utf-8").split())
    new = sorted(set(api_reference.snapshot()) - promised)
    doc = api_reference.DOC.read_text(encoding="utf-8")
    fresh = api_reference.spliced(doc, api_reference.render())
    assert not new and fresh == doc, (
        f"the public API changed ({len(new)} new names: {new[:5]}...) or its reference in docs/writing-suites.md "
        "is stale: re-run `python -m pvchaos.api_reference --write` and read the diff")


def test_api_names_import() -> None:
    missing = [n for n in api.__all__ if not hasattr(api, n)]
    assert not missing


MOVED_USE = '''
import warnings
warnings.simplefilter("error", DeprecationWarning)
import pvchaos.moved
pvchaos.moved.install()
import tools                     # the project's own package wins
assert tools.MINE == 1, tools
try:
    from kube import builders   # the old name of pvchaos.kube: still works, and warns
except DeprecationWarning as w:
    print("warned:", w)
warnings.simplefilter("ignore", DeprecationWarning)
from kube import builders
import pvchaos.kube.builders
assert builders is pvchaos.kube.builders, "one module under two names, not a copy"
from clusters.backend import Capability
from pvchaos.clusters.backend import Capability as C2
assert Capability is C2
print("ok")
'''


def test_moved_names_import_with_a_warning_and_never_shadow_a_projects_own(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("MINE = 1\n")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(MOVED_USE)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "warned: `kube` moved to `pvchaos.kube`" in done.stdout and done.stdout.rstrip().endswith("ok")


@pytest.mark.parametrize("top", ["kube", "clusters", "drivers", "chaos", "conformance", "tools"])
def test_nothing_is_installed_at_the_top_level_any_more(top: str) -> None:
    assert not (ROOT / top).exists(), f"{top}/ is back at the top level: it would shadow users' packages"
