"""The check of the message table against a version's source finds a wording that is
there, and says MISSING for one that is not (a fake module cache, no Go needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvchaos.tools import message_sources


def _fake_source(modcache: Path, version: str, text: str) -> None:
    pkg = modcache / "k8s.io" / f"kubernetes@{version}" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "binder.go").write_text(text)
    (pkg / "binder_test.go").write_text('"had volume node affinity conflict"')  # tests do not count


def test_fragment_is_the_longest_literal_between_placeholders_and_quotes() -> None:
    assert message_sources.fragment_of('volume "{volume}" already bound to a different claim.') == \
        " already bound to a different claim."
    assert message_sources.fragment_of("0/{total} nodes are available") == " nodes are available"


def test_the_versions_wording_is_found_and_a_wrong_one_is_missing(tmp_path: Path) -> None:
    _fake_source(tmp_path, "v1.34.4", 'ErrReasonNodeConflict = "node(s) didn\'t match PersistentVolume\'s node affinity"')
    found = {c.key: c.found for c in message_sources.check_version("v1.34.4", tmp_path)}
    assert found["NODE_AFFINITY_CONFLICT"] is True
    assert found["NO_PV_TO_BIND"] is False
    assert found["PVC_NOT_FOUND"] is None


def test_an_old_version_expects_its_old_wording(tmp_path: Path) -> None:
    _fake_source(tmp_path, "v1.32.0", 'ErrReasonNodeConflict = "node(s) didn\'t match PersistentVolume\'s node affinity"')
    (check,) = [c for c in message_sources.check_version("v1.32.0", tmp_path) if c.key == "NODE_AFFINITY_CONFLICT"]
    assert check.wording == "had volume node affinity conflict" and check.found is False
    assert "**MISSING**" in message_sources.render({"v1.32.0": [check]})


def test_a_version_without_source_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="bin/pvchaos build --k8s-version v1.36.3"):
        message_sources.check_version("v1.36.3", tmp_path)
