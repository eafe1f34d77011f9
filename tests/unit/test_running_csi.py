"""The harness's CSI processes read back from the host (pvchaos/clusters/running.py):
their argv from /proc, and which of them no longer runs, from the local registry or
kind's ProcessBook."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pvchaos.clusters import running


def _record(component: str, pid: int, argv: list[str], tmp: Path) -> dict:
    return {"component": component, "pid": pid, "argv": argv, "log": str(tmp / f"{component}.log")}


def test_a_stopped_sidecar_is_named_and_a_running_ones_argv_read_back(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(30)", f"--csi-address={tmp_path}/csi/c.sock"]
    alive = subprocess.Popen(argv)
    dead = subprocess.Popen([sys.executable, "-c", "pass", str(tmp_path)])
    dead.wait()
    try:
        (tmp_path / "state.json").write_text(json.dumps({
            "name": "c1", "owner_pid": 1, "k8s_version": "v1.35.4", "processes": {
                "kube-apiserver": _record("kube-apiserver", dead.pid, ["kube-apiserver"], tmp_path),
                "csi-provisioner": _record("csi-provisioner", alive.pid, argv, tmp_path),
                "csi-attacher": _record("csi-attacher", dead.pid, ["csi-attacher", str(tmp_path)], tmp_path)}}))
        assert running.csi_not_running(tmp_path) == ["csi-attacher"]
        lines = running.csi_command_lines(tmp_path)
        assert lines["csi-provisioner"] == argv, "read from /proc"
        assert lines["csi-attacher"] == ["csi-attacher", str(tmp_path)], "the recorded argv once it is gone"
        assert "kube-apiserver" not in lines
    finally:
        alive.kill()
        alive.wait()


def test_kinds_process_book_is_read_and_no_stack_is_no_knowledge(tmp_path: Path) -> None:
    (tmp_path / "csi").mkdir()
    (tmp_path / "csi" / "processes.json").write_text(json.dumps(
        {"csi-attacher": _record("csi-attacher", 2 ** 22 + 7, ["csi-attacher", str(tmp_path)], tmp_path)}))
    assert running.csi_not_running(tmp_path) == ["csi-attacher"]
    assert running.csi_not_running(tmp_path / "nothing") == []
    assert running.csi_not_running(None) == []


def test_the_harness_own_command_line_leaves_out_the_configurations_extra_flags(tmp_path: Path) -> None:
    kcm = ["kube-controller-manager", "--node-monitor-grace-period=8s", "--node-monitor-grace-period=40s"]
    (tmp_path / "state.json").write_text(json.dumps({
        "name": "c1", "owner_pid": 1, "k8s_version": "v1.35.4",
        "settings": {"config": {"extra_kcm_flags": ["--node-monitor-grace-period=40s"]}},
        "processes": {"kube-controller-manager": _record("kube-controller-manager", 1, kcm, tmp_path)}}))
    assert running.harness_command_lines(tmp_path)["kube-controller-manager"] == kcm[:2]


def test_the_schedulers_config_file_is_read_where_it_is_on_this_host(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: VolumeZone\n")
    data, source = running.scheduler_config(["kube-scheduler", f"--config={config}"])
    assert data == {"profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "VolumeZone"}]}}}]}
    assert source == f"--config {config}"
    assert running.scheduler_config(["kube-scheduler"]) == (None, "no --config: upstream's default profile")
    missing, why = running.scheduler_config(["kube-scheduler", "--config=/etc/kubernetes/sched.yaml"])
    assert missing is None and "not readable here" in why
