"""A CSI driver's own answer to "who are you": GetPluginInfo over its node plugin socket.

A label on the CSIDriver says what someone wrote beside the driver; GetPluginInfo is what
the driver says about itself (its name and vendor_version), the same call the kubelet and
the sidecars make. `pvchaos certify` runs `pvchaos-csi info` (a static CSI client) inside
one kind node against each candidate socket under the kubelet's plugins directory and
keeps the one that names the driver; this module is the pure part: which sockets to try,
what an answer says, and which answer is the driver's (a socket that names the driver's
directory but answers another name is the mismatch the report names as a finding).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

PLUGINS_DIR = "/var/lib/kubelet/plugins"
REGISTRY_DIR = "plugins_registry"  # the kubelet's registration sockets: no CSI services there
PODS_DIR = "/var/lib/kubelet/pods"  # a controller's socket lives in its pod's emptyDir there
# `find` in a kind node lists the sockets; -type s leaves out files named *.sock.
FIND_SOCKETS = f"find {PLUGINS_DIR} {PODS_DIR} -name '*.sock' -type s 2>/dev/null || true"


@dataclass(frozen=True)
class PluginInfo:
    """One socket's answer (`pvchaos-csi info`'s JSON line)."""

    endpoint: str
    name: str
    vendor_version: str
    capabilities: tuple[str, ...] = ()
    node_id: str | None = None
    node_capabilities: tuple[str, ...] = ()  # NodeGetCapabilities
    controller_capabilities: tuple[str, ...] = ()  # ControllerGetCapabilities


def parse_info_line(text: str) -> PluginInfo:
    """The last JSON line `pvchaos-csi info` printed; ValueError in one line otherwise."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        raise ValueError("pvchaos-csi info printed nothing")
    try:
        data = json.loads(lines[-1])
    except ValueError:
        raise ValueError(f"pvchaos-csi info printed no JSON: {lines[-1][:200]!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        raise ValueError(f"pvchaos-csi info: no plugin name in {lines[-1][:200]!r}")
    node = data.get("node") if isinstance(data.get("node"), dict) else None
    return PluginInfo(endpoint=str(data.get("endpoint") or ""), name=data["name"],
                      vendor_version=str(data.get("vendor_version") or ""),
                      capabilities=tuple(str(c) for c in data.get("capabilities") or []),
                      node_id=str(node["node_id"]) if node and node.get("node_id") else None,
                      node_capabilities=tuple(str(c) for c in data.get("node_capabilities") or []),
                      controller_capabilities=tuple(str(c) for c in data.get("controller_capabilities") or []))


def candidate_sockets(find_output: str, driver: str) -> list[str]:
    """The sockets worth asking, from `find`'s output: absolute paths ending in .sock, none
    in the registration directory; those under a directory named after the driver first
    (the usual /var/lib/kubelet/plugins/<driver>/csi.sock), then by path."""
    paths = []
    for line in find_output.splitlines():
        path = PurePosixPath(line.strip())
        if not path.is_absolute() or path.suffix != ".sock" or REGISTRY_DIR in path.parts:
            continue
        if str(path) not in paths:
            paths.append(str(path))
    return sorted(paths, key=lambda p: (driver not in PurePosixPath(p).parent.parts, p))


@dataclass(frozen=True)
class PluginChoice:
    """The driver's answer (None when no socket gave one), the node asked, a finding when
    the driver answers another name than its CSIDriver, and, without an answer, why."""

    node: str
    info: PluginInfo | None
    finding: str | None = None
    why: str = ""
    answers: tuple[PluginInfo, ...] = ()  # every socket that answered on the node (a controller's too)

    def controller_capabilities(self, driver: str) -> tuple[str, ...]:
        """ControllerGetCapabilities of a socket on the node that answers the driver's name."""
        return next((a.controller_capabilities for a in self.answers if a.name == driver and a.controller_capabilities),
                    ())

    @property
    def source(self) -> str:
        """Where the version was read, as the report shows it."""
        if self.info is None:
            return f"GetPluginInfo on node {self.node} gave no answer: {self.why}"
        return f"GetPluginInfo on node {self.node} ({self.info.endpoint.removeprefix('unix://')})"


def choose_plugin(driver: str, node: str, answers: Sequence[PluginInfo], failures: Sequence[str] = ()) -> PluginChoice:
    """The answer whose name is the CSIDriver's; else, as a mismatch, the one socket in a
    directory named after the driver, or the only socket that answered at all (certify's
    cluster has no other storage); else no answer, saying what was found."""
    found = tuple(answers)
    for a in answers:
        if a.name == driver and a.node_id is not None:  # the node plugin's socket, where there are several
            return PluginChoice(node, a, answers=found)
    for a in answers:
        if a.name == driver:
            return PluginChoice(node, a, answers=found)
    named = [a for a in answers if driver in PurePosixPath(a.endpoint.removeprefix("unix://")).parent.parts]
    guess = named[0] if named else (answers[0] if len(answers) == 1 else None)
    if guess is not None:
        return PluginChoice(node, guess, answers=found, finding=(
            f"GetPluginInfo on node {node} ({guess.endpoint.removeprefix('unix://')}) answers name {guess.name!r}, "
            f"but the CSIDriver object is {driver!r}: the kubelet and the sidecars use the name the driver "
            f"answers, so volumes of the StorageClass's provisioner {driver!r} are not this driver's"))
    if answers:
        names = ", ".join(sorted(f"{a.name} ({a.endpoint.removeprefix('unix://')})" for a in answers))
        return PluginChoice(node, None, why=f"no socket under {PLUGINS_DIR} answers name {driver} (answered: {names})")
    if failures:
        return PluginChoice(node, None, why=f"no socket under {PLUGINS_DIR} answered ({'; '.join(failures)})")
    return PluginChoice(node, None, why=f"no socket under {PLUGINS_DIR}")
