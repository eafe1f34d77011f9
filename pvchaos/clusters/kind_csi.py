"""CSI on kind: our driver's node plugin in every worker, zonal storage that behaves like
network storage in one zone, and the host side of the stack (pvchaos/clusters/csi.py).

Why this shape:

- A zonal volume must outlive its node and follow a pod to another node of the zone,
  but never be reachable from another zone, as a zonal network disk. Each zone gets
  one directory on the host, `<kind dir>/csi/zones/<zone>`, bind-mounted (kind
  `extraMounts`) into the workers of that zone only, at `/var/lib/pvchaos-csi/zone`.
  The host-side controller (`--data-root <kind dir>/csi`) creates
  `<kind dir>/csi/zones/<zone>/<volume>`; every node of the zone sees it as
  `/var/lib/pvchaos-csi/zone/<volume>` and the node plugin bind-mounts it for the pod.
  Node-local volumes live inside the node container (`/var/lib/pvchaos-csi/local`, on
  kind's `/var` volume), so they die with the node's disk and nowhere else.
- The node plugin is copied into each worker after `kind create` and runs as an enabled
  systemd unit, rather than being baked into the node image: the image is keyed by a
  digest of its recipe, so a driver rebuilt during development would rebuild the image
  (minutes) where a copy takes a fraction of a second. The container's filesystem
  survives `docker stop`/`start`, so the enabled unit boots again with the node; after
  `docker pause` it simply resumes.
- Registration is the real kubelet's: the plugin serves the registration socket in
  `/var/lib/kubelet/plugins_registry`, the kubelet calls NodeGetInfo and writes the
  CSINode (topology keys, allocatable count) and the node's CSI annotation itself.
- The kubelet dials the CSI fault proxy (`pvchaos-csi proxy`, a second unit), not the
  plugin: the registrar tells it `csi.sock`, the proxy's, which forwards to the plugin's
  `driver.sock`. A test then fails the node's NodeStage/NodePublish calls by writing the
  node's rules file (pvchaos.chaos.csi_calls, `where=<node>`); stopping the plugin leaves
  the proxy up, which answers Unavailable, as a dead plugin's socket would.
"""

from __future__ import annotations

import shlex
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.topology import HOSTNAME_KEY, NodeSpec, Topology
from pvchaos.kube import kinds
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.errors import PollTimeout
from pvchaos.kube.poll import poll_until
from pvchaos.tools.docker_engine import Engine, docker, last_line

NODE_DATA_ROOT = "/var/lib/pvchaos-csi"  # the node plugin's --data-root
NODE_ZONE_DIR = f"{NODE_DATA_ROOT}/zone"  # where a worker sees its zone's shared directory
NODE_BINARY = "/usr/local/bin/pvchaos-csi"
NODE_CALLS_LOG = "/var/log/pvchaos-csi/calls.jsonl"
UNIT = "pvchaos-csi.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
PROXY_UNIT = "pvchaos-csi-proxy.service"
PLUGIN_DIR = f"/var/lib/kubelet/plugins/{csi.DRIVER_NAME}"
PLUGIN_SOCKET = f"{PLUGIN_DIR}/driver.sock"  # the node plugin's own
KUBELET_SOCKET = f"{PLUGIN_DIR}/csi.sock"  # the proxy's, which the kubelet dials
NODE_PROXY_RULES = f"{NODE_DATA_ROOT}/proxy-rules.json"
NODE_PROXY_LOG = "/var/log/pvchaos-csi/proxy-calls.jsonl"
REGISTRATION_DIR = "/var/lib/kubelet/plugins_registry"
# Distributed snapshotting (CsiOptions.node_snapshots): upstream's csi-snapshotter on every
# worker, beside the node plugin, reaching the API server with the cluster's in-network
# admin kubeconfig (`kind get kubeconfig --internal`), as a DaemonSet's would with its
# service account
SNAPSHOTTER_UNIT = "pvchaos-csi-snapshotter.service"
NODE_SNAPSHOTTER_BINARY = "/usr/local/bin/csi-snapshotter"
NODE_KUBECONFIG = "/etc/pvchaos-csi/kubeconfig"
# What the rendered kind-config/multizone.yaml shows instead of this machine's state directory.
ZONES_PLACEHOLDER = "<state dir>/kind-<cluster>/csi/zones"
REGISTRATION_TIMEOUT = 90.0


# ---- paths and config (pure) ------------------------------------------------------------

def csi_paths(directory: Path) -> csi.CsiPaths:
    """The host-side stack's paths under the kind cluster's directory."""
    return csi.paths_for(directory)


def data_root(directory: Path) -> Path:
    """The controller's --data-root: it creates `<this>/zones/<zone>/<volume>`."""
    return csi_paths(directory).root


def zones_dir(directory: Path) -> Path:
    """The parent of the per-zone directories the workers mount."""
    return data_root(directory) / "zones"


# Where every worker of a cluster with a vendor's package sees its zone's shared directory:
# a stand-in for a zone's network storage, which a test package of a zonal driver whose
# real backend cannot run here may use (examples/vendor-driver does; docs/certify.md).
VENDOR_ZONE_DIR = "/var/lib/pvchaos/zone-storage"
# On the control plane of a vendor's cluster: every zone's directory, `<this>/<zone>`
VENDOR_ZONES_DIR = "/var/lib/pvchaos/zones"


def zone_mounts(zones: str | Path, zone: str, container_path: str = NODE_ZONE_DIR) -> list[dict[str, Any]]:
    """A worker's kind `extraMounts`: its zone's shared directory, and no other zone's."""
    return [{"hostPath": f"{zones}/{zone}", "containerPath": container_path}]


def node_plugin_args(spec: NodeSpec, options: csi.CsiOptions) -> list[str]:
    """The node plugin's command line on one worker (the driver's fixed CLI)."""
    return [NODE_BINARY, "node", f"--endpoint=unix://{PLUGIN_SOCKET}", f"--kubelet-endpoint=unix://{KUBELET_SOCKET}",
            f"--driver-name={csi.DRIVER_NAME}",
            f"--node-id={spec.name}", f"--zone={spec.zone}",
            f"--hostname={spec.labels.get(HOSTNAME_KEY, spec.name)}",
            f"--max-volumes-per-node={options.max_volumes_per_node}", f"--data-root={NODE_DATA_ROOT}",
            f"--calls-log={NODE_CALLS_LOG}", f"--registration-dir={REGISTRATION_DIR}",
            *(["--fault-block-file"] if options.fault_block_file else []),
            *(["--fault-no-mount"] if options.fault_no_mount else []),
            *(["--fault-ignore-mount-group"] if options.fault_ignore_mount_group else []),
            *(["--node-snapshots"] if options.node_snapshots else [])]


def node_unit(spec: NodeSpec, options: csi.CsiOptions) -> str:
    """The systemd unit of the node plugin on one worker. Restart=always: a plugin the
    kubelet refused (it exits on a failed registration) or one killed with the node's
    processes comes back without the harness."""
    dirs = " ".join((PLUGIN_DIR, REGISTRATION_DIR, f"{NODE_DATA_ROOT}/local", str(Path(NODE_CALLS_LOG).parent)))
    return (
        "[Unit]\n"
        f"Description=pvchaos-csi node plugin ({csi.DRIVER_NAME}) for {spec.name}\n"
        "After=containerd.service\n\n"
        "[Service]\n"
        f"ExecStartPre=/bin/mkdir -p {dirs}\n"
        f"ExecStart={shlex.join(node_plugin_args(spec, options))}\n"
        "Restart=always\nRestartSec=1\n\n"
        "[Install]\nWantedBy=multi-user.target\n")


def node_snapshotter_args() -> list[str]:
    """The node's csi-snapshotter (--node-deployment: it takes only the contents labelled
    with its NODE_NAME), on the fault proxy's socket like the kubelet, so a node's rules
    file fails its snapshot calls too."""
    return [NODE_SNAPSHOTTER_BINARY, "--node-deployment", f"--csi-address={KUBELET_SOCKET}",
            f"--kubeconfig={NODE_KUBECONFIG}", "--leader-election=false", f"--timeout={csi.OPERATION_TIMEOUT}",
            f"--retry-interval-start={csi.RETRY_START}", f"--retry-interval-max={csi.RETRY_MAX}", "--v=4"]


def node_snapshotter_unit(spec: NodeSpec) -> str:
    """The systemd unit of the csi-snapshotter on one worker. Restart=always: it exits
    when the plugin's socket is not there yet, and comes back when it is."""
    return (
        "[Unit]\n"
        f"Description=csi-snapshotter --node-deployment for {csi.DRIVER_NAME} on {spec.name}\n"
        f"After={UNIT}\n\n"
        "[Service]\n"
        f"Environment=NODE_NAME={spec.name}\n"
        f"ExecStart={shlex.join(node_snapshotter_args())}\n"
        "Restart=always\nRestartSec=1\n\n"
        "[Install]\nWantedBy=multi-user.target\n")


def proxy_unit(options: csi.CsiOptions | None = None) -> str:
    """The node's CSI fault proxy: the kubelet's side of the node plugin. Without
    `proxy_rules` (the csi-proxy-inert breakage) it forwards everything and reads no rules."""
    rules = [f"--rules={NODE_PROXY_RULES}"] if options is None or options.proxy_rules else []
    argv = [NODE_BINARY, "proxy", f"--listen=unix://{KUBELET_SOCKET}", f"--target=unix://{PLUGIN_SOCKET}",
            *rules, f"--log={NODE_PROXY_LOG}"]
    return (
        "[Unit]\n"
        f"Description=pvchaos-csi fault proxy in front of the node plugin ({csi.DRIVER_NAME})\n"
        f"Before={UNIT}\n\n"
        "[Service]\n"
        f"ExecStartPre=/bin/mkdir -p {PLUGIN_DIR} {Path(NODE_PROXY_LOG).parent}\n"
        f"ExecStart={shlex.join(argv)}\n"
        "Restart=always\nRestartSec=1\n\n"
        "[Install]\nWantedBy=multi-user.target\n")


def registered(csinode: Mapping[str, Any] | None, options: csi.CsiOptions) -> bool:
    """Does this CSINode (a dict as the API sends it) list our driver as the kubelet
    writes it after a registration: both topology keys and the allocatable count (none
    for a driver without a limit)?"""
    for drv in ((csinode or {}).get("spec") or {}).get("drivers") or []:
        if drv.get("name") == csi.DRIVER_NAME:
            return (sorted(drv.get("topologyKeys") or []) == sorted(csi.TOPOLOGY_KEYS)
                    and (drv.get("allocatable") or {}).get("count") == (options.max_volumes_per_node or None))
    return False


def node_volume_dir(pv: Mapping[str, Any]) -> str | None:
    """Where a PV's data is inside a node container that can reach it: our driver's
    backing directory (zone or node-local, from the volume's attributes), a hostPath's
    path (static stand-in PVs, the test double), or None for anything else."""
    spec = pv.get("spec") or {}
    source = spec.get("csi") or {}
    if source.get("driver") == csi.DRIVER_NAME:
        mode = (source.get("volumeAttributes") or {}).get(csi.TOPOLOGY_PARAMETER, "zone")
        return f"{NODE_DATA_ROOT}/{'local' if mode == 'node' else 'zone'}/{source['volumeHandle']}"
    return (spec.get("hostPath") or {}).get("path")


# ---- node plugins ------------------------------------------------------------------------

def _run(engine: Engine, container: str, *args: str, timeout: float = 120) -> str:
    proc = docker(engine, args, timeout=timeout)
    if proc.returncode != 0:
        raise ClusterError(f"pvchaos-csi node plugin on {container}: docker {' '.join(args[:2])}: {last_line(proc)}")
    return proc.stdout


@dataclass(frozen=True)
class NodeSnapshotter:
    """What a worker needs to run its own csi-snapshotter: the static binary and the
    cluster's in-network kubeconfig."""

    binary: Path
    kubeconfig: Path


def install_node_plugin(engine: Engine, container: str, spec: NodeSpec, binary: Path,
                        options: csi.CsiOptions, snapshotter: NodeSnapshotter | None = None) -> None:
    """Copy the static driver and its unit into one worker and start it (enabled, so a
    `docker start` of the node starts it again); with `snapshotter`, the node's
    csi-snapshotter too."""
    units = [PROXY_UNIT, UNIT]
    with tempfile.TemporaryDirectory(prefix="pvchaos-csi-unit-") as tmp:
        unit, proxy = Path(tmp) / UNIT, Path(tmp) / PROXY_UNIT
        unit.write_text(node_unit(spec, options))
        proxy.write_text(proxy_unit(options))
        _run(engine, container, "cp", str(binary), f"{container}:{NODE_BINARY}")
        _run(engine, container, "cp", str(unit), f"{container}:{UNIT_PATH}")
        _run(engine, container, "cp", str(proxy), f"{container}:/etc/systemd/system/{PROXY_UNIT}")
        if snapshotter is not None:
            snap_unit = Path(tmp) / SNAPSHOTTER_UNIT
            snap_unit.write_text(node_snapshotter_unit(spec))
            _run(engine, container, "exec", container, "mkdir", "-p", str(Path(NODE_KUBECONFIG).parent))
            _run(engine, container, "cp", str(snapshotter.binary), f"{container}:{NODE_SNAPSHOTTER_BINARY}")
            _run(engine, container, "cp", str(snapshotter.kubeconfig), f"{container}:{NODE_KUBECONFIG}")
            _run(engine, container, "cp", str(snap_unit), f"{container}:/etc/systemd/system/{SNAPSHOTTER_UNIT}")
            units.append(SNAPSHOTTER_UNIT)
    _run(engine, container, "exec", container, "sh", "-c",
         f"chmod 0755 {NODE_BINARY} && systemctl daemon-reload && systemctl enable --now {' '.join(units)}")


def install_node_plugins(engine: Engine, containers: Mapping[str, str], topology: Topology, binary: Path,
                         options: csi.CsiOptions, snapshotter: NodeSnapshotter | None = None) -> None:
    """Every worker at once (`containers`: node name -> container)."""
    specs = topology.nodes()
    with ThreadPoolExecutor(max_workers=min(8, len(specs))) as pool:
        for future in [pool.submit(install_node_plugin, engine, containers[s.name], s, binary, options, snapshotter)
                       for s in specs]:
            future.result()


def await_node_snapshotters(engine: Engine, containers: Mapping[str, str], cluster: str,
                            timeout: float = REGISTRATION_TIMEOUT) -> None:
    """Until every worker's csi-snapshotter logged its start line (it probed the node
    plugin and found CREATE_DELETE_SNAPSHOT); on timeout ONE line with the first missing
    node's journal tail."""
    ready = csi.READY_LOG[csi.SNAPSHOTTER]
    check = f"journalctl -u {SNAPSHOTTER_UNIT} --no-pager -o cat | grep -qF {shlex.quote(ready)}"
    missing = sorted(containers)

    def all_started() -> bool | None:
        missing[:] = [n for n in missing
                      if docker(engine, ["exec", containers[n], "sh", "-c", check], timeout=30).returncode != 0]
        return True if not missing else None
    try:
        poll_until(all_started, timeout, "every worker's csi-snapshotter logged its start", interval=0.5)
    except PollTimeout:
        first = missing[0]
        tail = _tail(engine, containers[first], f"journalctl -u {SNAPSHOTTER_UNIT} --no-pager -n 3 -o cat")
        raise ClusterError(f"kind cluster {cluster}: csi-snapshotter --node-deployment did not start within "
                           f"{timeout:.0f}s on {', '.join(missing)}; on {first}: {tail}".replace("\n", " ")) from None


def _tail(engine: Engine, container: str, command: str) -> str:
    proc = docker(engine, ["exec", container, "sh", "-c", command], timeout=30)
    text = " | ".join(ln.strip() for ln in proc.stdout.splitlines() if ln.strip())
    return text[-400:] or f"(nothing{'' if proc.returncode == 0 else ': ' + last_line(proc)})"


def diagnose(engine: Engine, container: str) -> str:
    """The end of the node plugin's journal and the kubelet's registration lines on one node."""
    # the plugin's own last words (systemd's "repeated too quickly" alone says nothing), then systemd's
    plugin = _tail(engine, container, f"journalctl -t pvchaos-csi --no-pager -n 2 -o cat; "
                                      f"journalctl -u {UNIT} --no-pager -n 1 -o cat")
    kubelet = _tail(engine, container,
                    f"journalctl -u kubelet --no-pager -o cat | grep -E '{csi.DRIVER_NAME}|plugin_watcher|"
                    "RegisterPlugin|plugins_registry' | tail -n 2")
    return f"{UNIT} journal: {plugin}; kubelet: {kubelet}"


def await_registration(kube: Kube, engine: Engine, containers: Mapping[str, str], options: csi.CsiOptions,
                       cluster: str, timeout: float = REGISTRATION_TIMEOUT) -> float:
    """Until every worker's CSINode lists our driver as its kubelet registered it; returns
    the seconds waited. On timeout ONE line: the nodes missing, and for the first of them
    the plugin's journal tail and the kubelet's registration log lines."""
    start = time.monotonic()
    missing: list[str] = sorted(containers)
    while True:
        try:
            # as dicts: the typed client refuses a CSINode with `drivers: null` (the control plane's)
            found = {n["metadata"]["name"]: n for n in kinds.list_objects(kube, "CSINode")[0]}
        except Exception as exc:  # noqa: BLE001 - the apiserver may blink; the deadline decides
            found, last_error = {}, f"{type(exc).__name__}: {exc}"
        else:
            last_error = ""
        missing = [n for n in sorted(containers) if not registered(found.get(n), options)]
        if not missing:
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            break
        time.sleep(0.5)
    first = missing[0]
    raise ClusterError(
        f"kind cluster {cluster}: CSI driver {csi.DRIVER_NAME} not registered by the kubelet within {timeout:.0f}s "
        f"on {', '.join(missing)}{' (' + last_error + ')' if last_error else ''}; on {first} "
        f"({containers[first]}): {diagnose(engine, containers[first])}".replace("\n", " "))


# The kubelet's block map paths, where its fd-lock loop devices' backing files are
# (k8s.io/kubernetes pkg/volume/util.MapBlockVolume), released before the driver's own.
KUBELET_BLOCK_DIR = "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices"


def release_loop_devices(engine: Engine, containers: list[str]) -> list[str]:
    """Detach the loop devices of block volumes in these node containers, before they are
    deleted: loop devices are the host kernel's, so one a pod still used when its node was
    deleted (no NodeUnstageVolume came) would stay attached on the host, holding its
    backing file. Best effort: a stopped or paused node, or one without the plugin (the
    control plane, a vendor's node), releases nothing. Returns what was detached."""
    script = (f"test -x {NODE_BINARY} || exit 0; "
              f"exec {NODE_BINARY} release-loops {KUBELET_BLOCK_DIR} {NODE_DATA_ROOT}")

    def release(container: str) -> list[str]:
        try:
            proc = docker(engine, ["exec", container, "sh", "-c", script], timeout=30)
        except Exception:  # noqa: BLE001 - a node that cannot be asked is deleted anyway
            return []
        return [f"{container[:12]}: {ln.removeprefix('detached ')}" for ln in proc.stdout.splitlines()
                if ln.startswith("detached ")]
    if not containers:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(containers))) as pool:
        return [line for lines in pool.map(release, containers) for line in lines]


# ---- host side ---------------------------------------------------------------------------

def host_stack_book(directory: Path, tie_to_parent: bool = True) -> csi.ProcessBook:
    """Where the host-side processes are recorded, so any later process (`cluster down
    --all`) finds and stops them; the cluster's directory is on each command line."""
    return csi.ProcessBook(csi_paths(directory), str(directory), tie_to_parent=tie_to_parent)


def create_csi_driver(kubeconfig: Path, options: csi.CsiOptions) -> None:
    """The CSIDriver object (attach required, so VolumeAttachments are made and served)."""
    kube = connect(kubeconfig)
    try:
        kube.storage.create_csi_driver(body=csi.csi_driver_object(options), _preload_content=False)
    finally:
        kube.api.close()
