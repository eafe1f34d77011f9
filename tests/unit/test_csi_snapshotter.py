"""Building external-snapshotter's components without Go: the module download and `go build`
are faked, so what is checked is the recipe (the client module copied where the parent's
`replace ... => ./client` expects it, one build per missing component, nothing rebuilt
when cached, nothing installed when a build fails) and where the CRDs are found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pvchaos.tools import csi_snapshotter as snap
from pvchaos.tools.build import BuildError


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Read-only-looking module dirs, a `go build` that writes its -o file (or fails when
    told), and a cache of our own."""
    monkeypatch.setenv("PVCHAOS_CACHE", str(tmp_path / "cache"))
    parent = tmp_path / "mod" / "external-snapshotter"
    (parent / "cmd" / "csi-snapshotter").mkdir(parents=True)
    (parent / "cmd" / "snapshot-controller").mkdir(parents=True)
    (parent / "go.mod").write_text("module github.com/kubernetes-csi/external-snapshotter/v8\n"
                                   "replace github.com/kubernetes-csi/external-snapshotter/client/v8 => ./client\n")
    client = tmp_path / "mod" / "client"
    (client / "config" / "crd").mkdir(parents=True)
    (client / "go.mod").write_text("module github.com/kubernetes-csi/external-snapshotter/client/v8\n")
    for name in snap.CRD_FILES:
        (client / "config" / "crd" / name).write_text("kind: CustomResourceDefinition\n")
    state: dict[str, Any] = {"builds": [], "downloads": [], "fail": None}

    def module_dir(module: str, version: str, log: Path, what: str) -> Path:
        state["downloads"].append((module, version))
        return client if module == snap.CLIENT_MODULE else parent

    def run_go(args: list[str], cwd: Path, log: Path, what: str, extra_env: object = None) -> None:
        assert (cwd / "client" / "go.mod").read_text().startswith(f"module {snap.CLIENT_MODULE}\n")
        command = args[-1]
        state["builds"].append(command)
        if command == state["fail"]:
            raise BuildError(f"{what}: failed")
        Path(args[args.index("-o") + 1]).write_text("#!/bin/true\n")

    monkeypatch.setattr(snap, "module_dir", module_dir)
    monkeypatch.setattr(snap, "_run_go", run_go)
    monkeypatch.setattr(snap, "_require_go", lambda: "go")
    return state


def test_builds_both_from_one_copy_with_the_client_module_in_place(fake_go: dict[str, Any]) -> None:
    binaries = snap.ensure_snapshot_components()
    assert fake_go["builds"] == ["./cmd/csi-snapshotter", "./cmd/snapshot-controller"]
    assert binaries.snapshotter == snap.SNAPSHOTTER.target and binaries.snapshotter.exists()
    assert binaries.controller == snap.SNAPSHOT_CONTROLLER.target and binaries.controller.exists()
    assert binaries.version == "v8.7.0" and str(binaries.snapshotter).endswith("bin/csi-snapshotter-v8.7.0/csi-snapshotter")
    assert [p.name for p in binaries.crds] == list(snap.CRD_FILES)
    assert all(p.parent.parts[-2:] == ("config", "crd") for p in binaries.crds)
    assert (snap.SNAPSHOTTER_MODULE, "v8.7.0") in fake_go["downloads"]
    assert (snap.CLIENT_MODULE, "v8.7.0") in fake_go["downloads"]
    # cached: no second build
    snap.ensure_snapshot_components()
    assert len(fake_go["builds"]) == 2


def test_only_the_missing_one_is_built_and_a_failed_build_installs_nothing(fake_go: dict[str, Any]) -> None:
    fake_go["fail"] = "./cmd/snapshot-controller"
    with pytest.raises(BuildError, match="snapshot-controller"):
        snap.ensure_snapshot_components()
    assert snap.SNAPSHOTTER.target.exists() and not snap.SNAPSHOT_CONTROLLER.target.exists()
    fake_go["fail"] = None
    fake_go["builds"].clear()
    snap.ensure_snapshot_components()
    assert fake_go["builds"] == ["./cmd/snapshot-controller"]


def test_a_crd_missing_from_the_module_is_named(fake_go: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "mod" / "client" / "config" / "crd" / snap.CRD_FILES[2]).unlink()
    with pytest.raises(BuildError, match=r"snapshot\.storage\.k8s\.io_volumesnapshots\.yaml not in .*config/crd"):
        snap.snapshot_crds()
