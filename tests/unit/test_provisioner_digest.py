"""The provisioner's cache key follows its sources: an edit builds a new binary for
everyone (users, CI), a Go test edit builds nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from pvchaos.tools.build import PROVISIONER_SRC, provisioner_digest


def _copy(tmp_path: Path) -> Path:
    src = tmp_path / "provisioner"
    shutil.copytree(PROVISIONER_SRC, src)
    return src


def test_editing_a_source_changes_the_cache_key(tmp_path: Path) -> None:
    src = _copy(tmp_path)
    before = provisioner_digest(src)
    (src / "knob.go").write_text((src / "knob.go").read_text() + "\n// edited\n")
    assert provisioner_digest(src) != before


def test_editing_go_mod_changes_the_cache_key(tmp_path: Path) -> None:
    src = _copy(tmp_path)
    before = provisioner_digest(src)
    (src / "go.mod").write_text((src / "go.mod").read_text() + "\n")
    assert provisioner_digest(src) != before


def test_editing_a_go_test_keeps_the_cache_key(tmp_path: Path) -> None:
    src = _copy(tmp_path)
    before = provisioner_digest(src)
    (src / "knob_test.go").write_text((src / "knob_test.go").read_text() + "\n// edited\n")
    assert provisioner_digest(src) == before
    assert provisioner_digest(src) == provisioner_digest()  # the copy hashes as the original
