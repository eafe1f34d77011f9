"""Put the CSI fault proxy in front of a vendor's driver without the vendor changing a file
(issue 36; docs/csi-fault-proxy.md). Pure: the package's manifests in, rewired manifests
and the reason for anything that could not be wired out; kind.py writes and applies them.

Two sockets are rewired, both through flags the manifests already carry:
- the node plugin's: the registration sidecar's `--kubelet-registration-path` names the
  socket the kubelet dials; a proxy container in the same pod listens beside it
  (`pvchaos-proxy.sock` in that directory) and forwards to the driver's socket, and the
  registrar advertises the proxy's socket instead;
- the controller's: every sidecar's `--csi-address` (also through `$(ADDRESS)`-style
  environment variables) is pointed at a proxy container in its pod, which forwards to
  the address the sidecar had.

Rules and call logs stay where `pvchaos.chaos.csi_calls` already reads and writes them:
a node's proxy uses the node paths of pvchaos's own node proxy (hostPath), a controller's
uses `CONTROLLER_DIR`, which kind mounts in every node from the cluster's host-side CSI
directory, so the harness writes the rules as it does for its own stack.
"""

from __future__ import annotations

import copy
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pvchaos.clusters.kind_csi import NODE_PROXY_LOG, NODE_PROXY_RULES
from pvchaos.clusters.vendor_package import DriverPackage

PROXY_CONTAINER = "pvchaos-csi-proxy"
PROXY_SOCKET = "pvchaos-proxy.sock"
# In every node of a vendor's kind cluster: the host's <cluster>/csi directory, where the
# controller proxy's rules and log are the files csi.paths_for() names.
CONTROLLER_DIR = "/var/lib/pvchaos-csi/controller-proxy"
CONTROLLER_RULES, CONTROLLER_LOG = f"{CONTROLLER_DIR}/proxy-rules.json", f"{CONTROLLER_DIR}/proxy-calls.jsonl"
_VOLUME_PREFIX = "pvchaos-proxy-"
_ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")

Doc = dict[str, Any]


@dataclass(frozen=True)
class ProxyWiring:
    """The manifests to apply, and what was wired; `refusal` is why csi_faults cannot run
    against this package ("" when both sides were wired)."""

    documents: tuple[Doc, ...]
    node_sockets: tuple[str, ...]  # "<workload>: <kubelet's socket> -> <proxy's>"
    controller_sockets: tuple[str, ...]  # "<workload>/<container>: <address> -> <proxy's>"
    refusal: str = ""

    @property
    def wired(self) -> bool:
        return not self.refusal


def _flag(args: list[str], name: str) -> tuple[int, str] | None:
    """(index, value) of `--name=value` or `--name value` in args; None when absent."""
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return i, arg.split("=", 1)[1]
        if arg == name and i + 1 < len(args):
            return i + 1, args[i + 1]
    return None


def _set_flag(args: list[str], index: int, name: str, value: str) -> None:
    args[index] = f"{name}={value}" if args[index].startswith(f"{name}=") else value


def _expand(value: str, container: Mapping[str, Any]) -> tuple[str, str | None]:
    """The value with `$(VAR)` replaced from the container's literal env, and the one
    variable it came from when the whole value is a single reference (so the rewrite goes
    into the env, where the vendor put the path)."""
    env = {str(e.get("name")): e.get("value") for e in container.get("env") or [] if isinstance(e, dict)}
    whole = _ENV_REF.fullmatch(value)
    expanded = _ENV_REF.sub(lambda m: str(env.get(m.group(1)) or m.group(0)), value)
    return expanded, (whole.group(1) if whole and isinstance(env.get(whole.group(1)), str) else None)


def _socket_path(address: str) -> str:
    return address.removeprefix("unix://") if address.startswith("unix://") else address


def _args_of(container: dict[str, Any]) -> list[str] | None:
    args = container.get("args")
    return args if isinstance(args, list) and all(isinstance(a, str) for a in args) else None


def _mount_for(container: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    """The container's volumeMount that holds `path` (the deepest one)."""
    best: Mapping[str, Any] | None = None
    for m in container.get("volumeMounts") or []:
        mount = str(m.get("mountPath") or "").rstrip("/")
        if path == mount or path.startswith(f"{mount}/"):
            if best is None or len(mount) > len(str(best.get("mountPath")).rstrip("/")):
                best = m
    return best


def _proxy_container(image: str, name: str, listen: str, target: str, mount: Mapping[str, Any],
                     rules: str, log: str, state_volumes: Iterable[tuple[str, str]]) -> Doc:
    return {
        "name": name, "image": image, "imagePullPolicy": "Never",
        "args": ["proxy", f"--listen=unix://{listen}", f"--target=unix://{target}", f"--rules={rules}",
                 f"--log={log}"],
        "volumeMounts": [{"name": mount["name"], "mountPath": mount["mountPath"]},
                         *({"name": v, "mountPath": p} for v, p in state_volumes)],
    }


def _state_volumes(pod: Doc, node_side: bool) -> list[tuple[str, str]]:
    """hostPath volumes for the rules file and the log; added to the pod once."""
    dirs = ([posixpath.dirname(NODE_PROXY_RULES), posixpath.dirname(NODE_PROXY_LOG)] if node_side
            else [CONTROLLER_DIR])
    out = []
    volumes = pod.setdefault("volumes", [])
    for i, d in enumerate(dirs):
        name = f"{_VOLUME_PREFIX}state-{i}"
        if not any(v.get("name") == name for v in volumes):
            volumes.append({"name": name, "hostPath": {"path": d, "type": "DirectoryOrCreate" if node_side
                                                        else "Directory"}})
        out.append((name, d))
    return out


def _wire_pod(doc: Doc, image: str) -> tuple[list[str], list[str], list[str]]:
    """Rewire one workload's pod template in place: (node sockets, controller sockets, problems)."""
    kind, meta = doc.get("kind"), doc.get("metadata") or {}
    ref = f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}"
    pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    node_side = kind == "DaemonSet"
    rules, log = (NODE_PROXY_RULES, NODE_PROXY_LOG) if node_side else (CONTROLLER_RULES, CONTROLLER_LOG)
    proxies: dict[str, str] = {}  # target socket (in-pod path) -> proxy socket
    added: list[Doc] = []
    nodes: list[str] = []
    ctrls: list[str] = []
    problems: list[str] = []

    def proxy_for(target: str, container: Mapping[str, Any], who: str) -> str | None:
        if target in proxies:
            return proxies[target]
        mount = _mount_for(container, posixpath.dirname(target))
        if mount is None:
            problems.append(f"{who}: socket {target} is on no volume the proxy could share")
            return None
        listen = posixpath.join(posixpath.dirname(target), PROXY_SOCKET)
        name = PROXY_CONTAINER if not proxies else f"{PROXY_CONTAINER}-{len(proxies) + 1}"
        added.append(_proxy_container(image, name, listen, target, mount, rules, log,
                                      _state_volumes(pod, node_side)))
        proxies[target] = listen
        return listen

    for c in containers:
        args = _args_of(c)
        if args is None:
            continue
        who = f"{ref} container {c.get('name')}"
        address = _flag(args, "--csi-address")
        registration = _flag(args, "--kubelet-registration-path")
        if address is None:
            continue
        target, env_var = _expand(address[1], c)
        target = _socket_path(target)
        if registration is not None:  # the kubelet's way in: advertise the proxy's socket instead
            host = registration[1]
            if posixpath.basename(host) != posixpath.basename(target):
                problems.append(f"{who}: --kubelet-registration-path {host} and --csi-address {target} name "
                                "different sockets, so the host path of the proxy's socket is unknown")
                continue
            if proxy_for(target, c, who) is None:
                continue
            new_host = posixpath.join(posixpath.dirname(host), PROXY_SOCKET)
            _set_flag(args, registration[0], "--kubelet-registration-path", new_host)
            nodes.append(f"{ref}: {host} -> {new_host}")
            continue
        listen = proxy_for(target, c, who)
        if listen is None:
            continue
        if env_var is not None:
            for e in c.get("env") or []:
                if e.get("name") == env_var:
                    e["value"] = listen
        else:
            _set_flag(args, address[0], "--csi-address", f"unix://{listen}" if address[1].startswith("unix://")
                      else listen)
        (nodes if node_side else ctrls).append(f"{ref} container {c.get('name')}: {target} -> {listen}")
    pod.setdefault("containers", []).extend(added)
    return nodes, ctrls, problems


def wire(documents: Iterable[Mapping[str, Any]], image: str) -> ProxyWiring:
    """The package's objects with the proxy in front of each driver socket its sidecars and
    the kubelet use. Workloads are copied, never changed in place."""
    out: list[Doc] = []
    nodes: list[str] = []
    ctrls: list[str] = []
    problems: list[str] = []
    for original in documents:
        doc = copy.deepcopy(dict(original))
        if doc.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"):
            n, c, p = _wire_pod(doc, image)
            nodes, ctrls, problems = nodes + n, ctrls + c, problems + p
        out.append(doc)
    reasons = list(problems)
    if not nodes:
        reasons.append("no node-driver-registrar with --kubelet-registration-path and --csi-address flags, so "
                       "the kubelet's socket cannot be put behind the proxy")
    if not ctrls:
        reasons.append("no controller Deployment or StatefulSet whose sidecars dial the driver through "
                       "--csi-address (per-node provisioning has no one controller-side proxy)")
    return ProxyWiring(tuple(out), tuple(nodes), tuple(ctrls), "; ".join(reasons))


def write_manifests(package: DriverPackage, wiring: ProxyWiring, directory: Path) -> tuple[Path, ...]:
    """The rewired objects as files named as the package's, in its apply order."""
    directory.mkdir(parents=True, exist_ok=True)
    by_file: dict[Path, list[Doc]] = {}
    for (path, _), doc in zip(package.objects, wiring.documents, strict=True):
        by_file.setdefault(path, []).append(doc)
    out = []
    for path, docs in by_file.items():
        target = directory / path.name
        target.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        out.append(target)
    return tuple(out)
