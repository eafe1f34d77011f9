"""Where local clusters live on disk, and how to find the ones a killed run left.

Each cluster has a directory `<state root>/<name>/` holding its kubeconfig, logs, etcd
data and `state.json` (the pids and ports). `pvchaos cluster list/down --all` and the
session sweeper read only these files.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pvchaos.clusters.common.processes import ProcessRecord, is_ours, process_start_time, stop
from pvchaos.clusters.common.state import state_root as state_root  # re-exported


@contextmanager
def registry_lock() -> Iterator[None]:
    """Serialises port choice and directory creation between parallel workers."""
    with (state_root() / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass
class ClusterState:
    """The on-disk record of one local cluster."""

    name: str
    directory: Path
    owner_pid: int
    k8s_version: str
    ports: dict[str, int] = field(default_factory=dict)
    processes: dict[str, ProcessRecord] = field(default_factory=dict)
    detached: bool = False  # started by `pvchaos cluster up`: outlives its owner
    settings: dict[str, Any] = field(default_factory=dict)
    owner_started: int | None = None  # start time of owner_pid, so a reused pid is not mistaken for it

    @property
    def path(self) -> Path:
        return self.directory / "state.json"

    def save(self) -> None:
        data = {
            "name": self.name,
            "owner_pid": self.owner_pid,
            "k8s_version": self.k8s_version,
            "ports": self.ports,
            "detached": self.detached,
            "settings": self.settings,
            "owner_started": self.owner_started,
            "processes": {k: v.to_json() for k, v in self.processes.items()},
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.path)

    @classmethod
    def load(cls, directory: Path) -> ClusterState:
        data = json.loads((directory / "state.json").read_text())
        return cls(
            name=data["name"],
            directory=directory,
            owner_pid=int(data["owner_pid"]),
            k8s_version=data["k8s_version"],
            ports={k: int(v) for k, v in data.get("ports", {}).items()},
            processes={k: ProcessRecord.from_json(v) for k, v in data.get("processes", {}).items()},
            detached=bool(data.get("detached")),
            settings=data.get("settings", {}),
            owner_started=data.get("owner_started"),
        )

    def marker(self) -> str:
        """A string every process of this cluster has on its command line: the directory."""
        return str(self.directory)

    def alive_components(self) -> list[str]:
        return [c for c, rec in self.processes.items() if is_ours(rec, self.marker())]

    def owner_alive(self) -> bool:
        """The owner runs if its pid exists with the same start time and is not a zombie."""
        started = process_start_time(self.owner_pid)
        if started is None:
            return False
        if self.owner_started is not None and started != self.owner_started:
            return False
        try:
            return ") Z " not in Path(f"/proc/{self.owner_pid}/stat").read_text()
        except OSError:
            return False


def list_clusters() -> list[ClusterState]:
    """Every cluster with a readable state file, sorted by name."""
    found = []
    for d in sorted(state_root().iterdir()):
        if (d / "state.json").is_file():
            try:
                found.append(ClusterState.load(d))
            except (OSError, ValueError, KeyError):
                continue
    return found


def stop_all_processes(state: ClusterState) -> list[str]:
    """Stop every process of the cluster, in reverse start order; returns failures."""
    errors = []
    for component, rec in reversed(list(state.processes.items())):
        try:
            stop(rec, state.marker())
        except RuntimeError as exc:
            errors.append(f"{component}: {exc}")
    return errors


def destroy(state: ClusterState) -> None:
    """Stop the processes and remove the directory; raises if a process survives."""
    errors = stop_all_processes(state)
    if errors:
        raise RuntimeError(f"cluster {state.name}: " + "; ".join(errors))
    for _ in range(3):  # a process that was exiting may still have been writing
        shutil.rmtree(state.directory, ignore_errors=True)
        if not state.directory.exists():
            return
        time.sleep(0.2)
    raise RuntimeError(f"cluster {state.name}: could not remove {state.directory}")


def sweep_orphans() -> list[str]:
    """Remove clusters whose owning run died without tearing down (not detached ones)."""
    removed = []
    for state in list_clusters():
        if not state.detached and not state.owner_alive():
            destroy(state)
            removed.append(state.name)
    return removed
