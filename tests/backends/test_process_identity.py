"""A process we just started is always recognised as ours (issue 15: a healthy start once
failed with "exited at start (signal 0)" because /proc/<pid>/cmdline reads empty while the
kernel is still inside execve)."""

from __future__ import annotations

import sys

from pvchaos.clusters.common.processes import ProcessRecord, is_ours, spawn, stop


def test_two_hundred_fresh_processes_are_each_recognised_at_once(tmp_path) -> None:
    marker = str(tmp_path / "marker-dir")
    misses: list[int] = []
    records: list[ProcessRecord] = []
    try:
        for i in range(200):
            _, rec = spawn(f"sleeper-{i}", [sys.executable, "-c", "import time; time.sleep(30)", marker],
                           tmp_path / "logs" / f"{i}.log")
            records.append(rec)
            if not is_ours(rec, marker):
                misses.append(i)
            stop(rec, marker, grace=1.0)
    finally:
        for rec in records:
            stop(rec, marker, grace=0.5)
    assert not misses, f"{len(misses)} of 200 just-started processes were not recognised: {misses[:10]}"


def test_a_start_is_aborted_only_by_a_child_that_really_exited(tmp_path, monkeypatch) -> None:
    """The readiness wait asks our own child for its exit status, not /proc: a running
    child whose command line momentarily reads wrong never aborts a start."""
    import os

    from pvchaos.clusters.common import processes
    from pvchaos.clusters.local import cluster as local
    from pvchaos.clusters.local.config import LocalClusterConfig
    from pvchaos.clusters.local.registry import ClusterState

    monkeypatch.setattr(local, "state_root", lambda: tmp_path)
    c = local.LocalCluster(LocalClusterConfig(name="abort-check"))
    c.directory.mkdir()
    c.state = ClusterState(name="abort-check", directory=c.directory, owner_pid=os.getpid(), k8s_version="v1.35.4")
    running, rec = spawn("etcd", [sys.executable, "-c", "import time; time.sleep(30)", str(c.directory)],
                         c.directory / "logs" / "etcd.log")
    c._procs["etcd"], c.state.processes["etcd"] = running, rec
    try:
        monkeypatch.setattr(local, "is_ours", lambda *_: False)  # /proc misreads, as during execve
        monkeypatch.setattr(processes, "is_ours", lambda *_: False)
        assert c._abort_reason() is None, "a running child must not abort the start"
        running.kill()
        running.wait()
        reason = c._abort_reason()
        assert reason is not None and reason.startswith("etcd exited at start (signal 9)")
    finally:
        running.kill()
        running.wait()
