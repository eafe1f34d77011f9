"""The nightly workflow (.github/workflows/nightly.yml) is valid and agrees with the
repository, although no GitHub runner ever ran it here.

- actionlint, built from its Go module (github.com/rhysd/actionlint, pinned) into the
  binary cache on first use, checks the syntax, the expressions, the matrix references
  and the actions' inputs; a workflow with a known mistake must fail it, so the check
  can fail;
- the matrix and the commands agree: shard lists 1..N, the run step passes `--shard
  K/N` with the matrix's N, the merge step runs `report merge` over every shard's
  upload, and the files its cache keys hash exist.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pvchaos.tools.build import cache_root

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
ACTIONLINT = "v1.7.12"


def actionlint() -> Path:
    """The pinned actionlint, built with `go install` into the cache once (about a minute)."""
    target = cache_root() / "bin" / f"actionlint-{ACTIONLINT}"
    exe = target / "actionlint"
    if exe.is_file():
        return exe
    if shutil.which("go") is None:
        pytest.skip("no go on PATH: actionlint cannot be built")
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["go", "install", f"github.com/rhysd/actionlint/cmd/actionlint@{ACTIONLINT}"],
                          env={**os.environ, "GOBIN": str(target)}, capture_output=True, text=True, timeout=1200,
                          check=False)
    assert done.returncode == 0 and exe.is_file(), done.stderr[-2000:]
    return exe


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(actionlint()), "-no-color", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)


def test_actionlint_passes() -> None:
    done = _lint(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """A matrix key that does not exist and a misspelt job key: the check is not a no-op."""
    broken = WORKFLOW.read_text().replace("--shard ${{ matrix.shard }}/${{ matrix.shards }}",
                                          "--shard ${{ matrix.part }}/${{ matrix.shards }}")
    broken = broken.replace("    runs-on: ubuntu-latest\n    timeout-minutes: 30", "    run-on: ubuntu-latest\n    "
                            "timeout-minutes: 30")
    path = tmp_path / ".github" / "workflows" / "nightly.yml"
    path.parent.mkdir(parents=True)
    path.write_text(broken)
    done = _lint(path)
    assert done.returncode != 0
    assert "matrix.part" in done.stdout or "part" in done.stdout, done.stdout
    assert "run-on" in done.stdout, done.stdout


def _workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(str(step.get("run", "")) for step in job["steps"])


def test_shards_and_commands_agree() -> None:
    jobs = _workflow()["jobs"]
    matrix = jobs["suites"]["strategy"]["matrix"]
    (total,) = matrix["shards"]
    assert matrix["shard"] == list(range(1, total + 1)), "shard must list 1..N"
    run = _runs(jobs["suites"])
    assert "bin/pvchaos run" in run and "--shard ${{ matrix.shard }}/${{ matrix.shards }}" in run
    assert "--k8s-version ${{ matrix.k8s }}" in run and "--backend ${{ matrix.backend }}" in run
    upload = next(s for s in jobs["suites"]["steps"] if s.get("name") == "Upload this shard's results")
    assert "reports/shard/run.json" in upload["with"]["path"] and upload["if"] == "always()"
    assert jobs["merge"]["needs"] == "suites" and "cancelled()" in jobs["merge"]["if"]
    download = next(s for s in jobs["merge"]["steps"] if "download-artifact" in str(s.get("uses")))
    assert upload["with"]["name"].startswith(download["with"]["pattern"].rstrip("*"))
    assert re.search(r"bin/pvchaos report merge reports shards/\* --history previous", _runs(jobs["merge"]))


def test_versions_are_served_and_cached_files_exist() -> None:
    from pvchaos.tools.versions import SUPPORTED_MINORS, minor_of
    versions = _workflow()["jobs"]["suites"]["strategy"]["matrix"]["k8s"]
    assert {minor_of(v) for v in versions} <= set(SUPPORTED_MINORS)
    text = WORKFLOW.read_text()
    for pattern in re.findall(r"hashFiles\(([^)]*)\)", text):
        for glob in re.findall(r"'([^']+)'", pattern):
            assert list(ROOT.glob(glob)), f"{glob}: the cache key hashes no file"


def test_binary_cache_keys_cover_every_built_source() -> None:
    """A cached binary whose source or version the key does not hash is rebuilt every
    night (the CSI driver and sidecars were, issue 38): each key names the repository's Go
    sources and the modules that pin the upstream versions."""
    import inspect

    from pvchaos.tools import csi_sidecars, versions
    from pvchaos.tools.build import PROVISIONER_SRC
    from pvchaos.tools.csi_driver import CSI_DRIVER_SRC

    def rel(path: str | Path) -> str:
        return Path(path).resolve().relative_to(ROOT).as_posix()

    keys = {step["with"]["path"].split()[0]: step["with"]["key"] for step in _workflow()["jobs"]["suites"]["steps"]
            if step.get("uses", "").startswith("actions/cache/restore")}
    pinned = [rel(inspect.getfile(csi_sidecars)), rel(inspect.getfile(versions))]
    assert all(f"'{rel(src)}/**'" in keys["~/.cache/pvchaos"] for src in (CSI_DRIVER_SRC, PROVISIONER_SRC)), keys
    assert all(f"'{rel(src)}/go.sum'" in keys["~/go/pkg/mod"] for src in (CSI_DRIVER_SRC, PROVISIONER_SRC)), keys
    assert all(f"'{module}'" in key for module in pinned for key in keys.values()), keys


def test_nightly_certifies_every_example_package_and_runs_the_on_request_tiers() -> None:
    """Issue 35: the full certify of each example package runs nightly (CI runs short
    suite lists); the tiers selftest leaves out run there too."""
    from pvchaos.cli import ON_REQUEST_TIERS

    jobs = _workflow()["jobs"]
    packages = {p.name for p in (ROOT / "examples").iterdir() if (p / "02-csidriver.yaml").exists()}
    expected = {row["package"]: row["expect"] for row in jobs["certify"]["strategy"]["matrix"]["include"]}
    assert set(expected) == packages, f"nightly certifies {sorted(expected)}, examples/ has {sorted(packages)}"
    assert {p for p, code in expected.items() if code == 0} == {"vendor-driver", "vendor-node-local"}
    assert '--driver-dir "examples/$PACKAGE"' in _runs(jobs["certify"])
    assert set(jobs["long-selftests"]["strategy"]["matrix"]["tier"]) == set(ON_REQUEST_TIERS) - {"versions"}
