"""pvchaos-csi, our own CSI driver (tools/csidriver): its Go tests, and csi-sanity run
against `pvchaos-csi all` (controller and node on one endpoint) with real bind mounts in
a temp directory, for mount and block access, its snapshot and clone tests included (they
run because the driver advertises CREATE_DELETE_SNAPSHOT, LIST_SNAPSHOTS and
CLONE_VOLUME). Needs Go, the module proxy and root (bind mounts, loop devices for block),
hence the binaries tier. Afterwards nothing of it may remain: no process, no socket, no
mount under the temp directory, no loop device over a file in it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pvchaos.tools.csi_driver import CSI_DRIVER_SRC, ensure_csi_driver, ensure_csi_sanity

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bind mounts: Linux only")

SUMMARY = re.compile(r"(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped")


def _mount_points_under(root: Path) -> list[str]:
    """Mount points at or below `root`, from /proc/self/mountinfo (octal escapes undone)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if point == str(root) or point.startswith(f"{root}/"):
            found.append(point)
    return found


def _loop_devices_over(root: Path) -> list[str]:
    """Loop devices whose backing file is below `root` (sysfs names each one's file)."""
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            path = backing.read_text().strip().removesuffix("(deleted)").strip()
        except OSError:
            continue
        if path.startswith(f"{root}/"):
            found.append(f"{backing.parent.parent.name}: {path}")
    return found


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def test_go_tests_of_the_csi_driver_pass() -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("no go on PATH")
    done = subprocess.run([go, "test", "-count=1", "./..."], cwd=CSI_DRIVER_SRC, capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, f"go test failed:\n{_tail(done.stdout)}\n{_tail(done.stderr)}"
    assert "ok" in done.stdout


@pytest.mark.parametrize("access_type", ["mount", "block"])
def test_csi_sanity_passes_against_pvchaos_csi_all(access_type: str, tmp_path: Path) -> None:
    if shutil.which("go") is None:
        pytest.skip("no go on PATH")
    if os.geteuid() != 0:
        pytest.skip("the node service bind-mounts: needs root")
    driver, sanity = ensure_csi_driver(), ensure_csi_sanity()
    root = tmp_path.resolve()
    sock = root / "csi.sock"
    (root / "control").mkdir()
    (root / "control" / "capacity.json").write_text('{"zone-a": "1Pi"}')
    # Class parameters as a StorageClass would pass them; the knob's node list never
    # matches sanity's node, so it is parsed, stripped and never fires.
    params = root / "params.yaml"
    params.write_text("pvchaos.dev/topology: zone\npvchaos.dev/fail-nodes: not-this-node\n")
    calls = root / "calls.jsonl"
    driver_log = (root / "driver.log").open("w")
    proc = subprocess.Popen(
        [str(driver), "all", "--endpoint", f"unix://{sock}", "--driver-name", "csi.pvchaos.dev",
         "--state-file", str(root / "state.json"), "--calls-log", str(calls), "--data-root", str(root / "data"),
         "--control-dir", str(root / "control"), "--node-id", "sanity-node", "--zone", "zone-a",
         "--hostname", "sanity-node", "--max-volumes-per-node", "8"],
        stdout=driver_log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert proc.poll() is None, f"pvchaos-csi exited {proc.returncode}:\n{(root / 'driver.log').read_text()}"
            assert time.monotonic() < deadline, "pvchaos-csi did not create its socket in 30s"
            time.sleep(0.05)
        done = subprocess.run(
            [str(sanity), f"--csi.endpoint=unix://{sock}", f"--csi.stagingdir={root / 'staging'}",
             f"--csi.mountdir={root / 'mount'}", f"--csi.testvolumeaccesstype={access_type}",
             f"--csi.testvolumeparameters={params}", "--csi.testnodevolumeattachlimit", "--ginkgo.no-color"],
            capture_output=True, text=True, timeout=600, cwd=root, check=False,
        )
        output = done.stdout + done.stderr
        summary = SUMMARY.search(output)
        assert done.returncode == 0 and summary, (
            f"csi-sanity ({access_type}) failed, exit {done.returncode}:\n{_tail(output)}\n"
            f"--- pvchaos-csi:\n{_tail((root / 'driver.log').read_text(), 20)}")
        passed, failed, _, _ = (int(g) for g in summary.groups())
        assert failed == 0 and passed >= 60, summary.group(0)  # 65 with snapshots and clones (v5.6.0)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        driver_log.close()
    assert proc.returncode == 0, f"pvchaos-csi exited {proc.returncode} on SIGTERM:\n{(root / 'driver.log').read_text()}"
    assert not sock.exists(), "pvchaos-csi left its socket behind"
    assert _mount_points_under(root) == [], "mounts left behind"
    assert _loop_devices_over(root) == [], "loop devices left attached"
    if access_type == "block":  # the node service gave sanity's block volumes loop devices
        assert "staged block volume" in (root / "driver.log").read_text()
    lines = [json.loads(line) for line in calls.read_text().splitlines()]
    methods = {line["method"] for line in lines}
    assert {"CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume"} <= methods
    # The driver advertises snapshots and clones, so sanity's snapshot and clone tests ran:
    # snapshots cut and listed, and volumes made from a snapshot and from a volume.
    assert {"CreateSnapshot", "DeleteSnapshot", "ListSnapshots"} <= methods, sorted(methods)
    sources = [line["request"]["volume_content_source"] for line in lines
               if line["method"] == "CreateVolume" and line["code"] == "OK" and "volume_content_source" in line["request"]]
    assert any(s["snapshot_id"] for s in sources) and any(s["volume_id"] for s in sources), sources
    assert not any("fail-nodes" in json.dumps(line.get("response", {})) for line in lines), "knob keys leaked"


def test_the_driver_digest_ignores_go_tests(tmp_path: Path) -> None:
    """A Go test edit must not rebuild the driver for every user; a source edit must."""
    from pvchaos.tools.csi_driver import csi_driver_digest

    src = tmp_path / "csidriver"
    shutil.copytree(CSI_DRIVER_SRC, src)
    before = csi_driver_digest(src)
    assert before == csi_driver_digest()
    (src / "driver" / "knob_test.go").write_text("package driver\n")
    assert csi_driver_digest(src) == before
    (src / "driver" / "knob.go").write_text((src / "driver" / "knob.go").read_text() + "\n// edit\n")
    assert csi_driver_digest(src) != before
