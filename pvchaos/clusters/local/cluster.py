"""Bring a local cluster up and down: etcd, apiserver, controller-manager, scheduler,
one KWOK controller per zone, and the CSI stack (our driver's controller service with
upstream's external-provisioner and external-attacher, pvchaos/clusters/csi.py) or the
old test provisioner, all on loopback. With no kubelet, the harness writes what a
kubelet and the node registrar would: a CSINode per node and the node's CSI annotations.

Each node carries a label naming the KWOK controller that plays its kubelet
(config.CONTROLLER_LABEL, the node's zone), so a 1,000-node cluster needs three KWOK
processes, not 1,000. A node fails by losing its controller, and the real node-lifecycle
controller then sees its Lease expire, as with a dead kubelet:

- one node (or a few): its label is switched to `stopped`, which no controller selects;
  the apiserver's watch tells the zone's controller the node left its selector and KWOK
  stops renewing that node's Lease and touching its pods at once;
- a whole zone: the zone's controller is killed, every heartbeat stopping in the same
  instant;
- start_node puts the label back (or restarts the zone's controller, the zone's other
  stopped nodes first taken out of its selector so that only the returning node comes back).

We launch the processes ourselves rather than through kwokctl: every pid is recorded,
checked and stopped by us, so nothing outlives a run.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pvchaos.clusters import csi
from pvchaos.clusters.backend import Capability, ClusterError, ClusterHandle
from pvchaos.clusters.common.processes import (
    ProcessRecord,
    is_ours,
    kill_all,
    log_tail,
    process_start_time,
    spawn,
    stop,
)
from pvchaos.clusters.common.provisioners import LOCAL_PROVISIONER, ZONAL_PROVISIONER
from pvchaos.clusters.local import config as flags
from pvchaos.clusters.local import csi_registrar
from pvchaos.clusters.local.config import CONTROLLER_LABEL, STOPPED, LocalClusterConfig
from pvchaos.clusters.local.loopback_http import get as get_url
from pvchaos.clusters.local.readiness import nodes_problem
from pvchaos.clusters.local.registry import (
    ClusterState,
    destroy,
    list_clusters,
    registry_lock,
    state_root,
)
from pvchaos.clusters.topology import NodeSpec
from pvchaos.kube import kinds, spent
from pvchaos.kube import objects as o
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.naming import OWNED_LABEL
from pvchaos.kube.poll import PollTimeout, poll_until
from pvchaos.tools.build import Binaries, BuildError, cache_root, ensure_binaries
from pvchaos.tools.csi_sidecars import ATTACHER, PROVISIONER, RESIZER, ensure_csi_sidecars
from pvchaos.tools.csi_snapshotter import SNAPSHOTTER_VERSION, ensure_snapshot_components

STAGES = Path(__file__).with_name("kwok-stages.yaml")
START_TIMEOUT = 90.0


# The key in ClusterState.ports of each control-plane component's secure port.
COMPONENT_PORT = {"kube-apiserver": "apiserver", "kube-controller-manager": "controller-manager",
                  "kube-scheduler": "scheduler"}
PORT_RANGE = (20000, 32000)  # below Linux's ephemeral range, so outgoing connections never take them


def _free_ports(count: int, taken: set[int]) -> list[int]:
    """Random loopback ports outside the ephemeral range that bind now and that no
    recorded cluster uses; chosen under the registry lock."""
    rng = secrets.SystemRandom()
    ports: list[int] = []
    for _ in range(count * 50):
        port = rng.randrange(*PORT_RANGE)
        if port in taken or port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    raise ClusterError(f"no {count} free loopback ports in {PORT_RANGE[0]}-{PORT_RANGE[1]}")


def _write_pki(d: Path) -> str:
    """A service-account signing key, the apiserver's self-signed serving certificate and a
    static admin token. P-256 keys take a millisecond to make where RSA-2048 ones took
    a few hundred (ours here, and the apiserver's own for its serving certificate)."""
    pki = d / "pki"
    pki.mkdir(parents=True)
    pem = (serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())
    (pki / "sa.key").write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(*pem))
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pvchaos-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    (pki / "apiserver.key").write_bytes(key.private_bytes(*pem))
    (pki / "apiserver.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    token = secrets.token_hex(24)
    (pki / "tokens.csv").write_text(f'{token},pvchaos-admin,pvchaos-admin,"system:masters"\n')
    for f in pki.iterdir():
        f.chmod(0o600)
    return token


def admin_token(directory: Path) -> str:
    """The static admin token `_write_pki` wrote for the cluster in `directory`."""
    return (directory / "pki" / "tokens.csv").read_text().split(",", 1)[0]


def _kubeconfig_text(name: str, port: int, token: str) -> str:
    ctx = f"pvchaos-{name}"
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: {ctx}\n  cluster:\n    server: https://127.0.0.1:{port}\n"
        "    insecure-skip-tls-verify: true\n"
        f"users:\n- name: {ctx}\n  user:\n    token: {token}\n"
        f"contexts:\n- name: {ctx}\n  context:\n    cluster: {ctx}\n    user: {ctx}\n"
        f"current-context: {ctx}\n"
    )


class LocalCluster:
    """One local cluster; also the NodeFaults of its handle."""

    def __init__(self, cfg: LocalClusterConfig, binaries: Binaries | None = None, detached: bool = False):
        self.cfg = cfg
        self.detached = detached
        self._binaries = binaries
        self.directory = state_root() / cfg.name
        self.state: ClusterState | None = None
        self.kube: Kube | None = None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._csi_binaries: csi.CsiBinaries | None = None

    # ---- lifecycle -------------------------------------------------------------------

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            try:
                self._binaries = ensure_binaries(self.cfg.k8s_version)
            except BuildError as exc:
                raise ClusterError(str(exc)) from None
        return self._binaries

    @property
    def csi_binaries(self) -> csi.CsiBinaries:
        """Our driver and upstream's sidecars, built on first use (only for a CSI cluster)."""
        if self._csi_binaries is None:
            from pvchaos.tools.csi_driver import ensure_csi_driver  # built by its own module
            try:
                sidecars = ensure_csi_sidecars()
                snapshots = ensure_snapshot_components()
                self._csi_binaries = csi.CsiBinaries(ensure_csi_driver(), sidecars.provisioner, sidecars.attacher,
                                                     sidecars.resizer, snapshots.snapshotter, snapshots.controller,
                                                     snapshots.crds)
            except BuildError as exc:
                raise ClusterError(str(exc)) from None
        return self._csi_binaries

    def up(self) -> ClusterHandle:
        """Start everything and wait for every node to be Ready; on any failure, tear down.
        A port taken between choosing and binding (another process on the machine) is
        retried once with new ports. The time is charged to cluster starts (kube.spent)."""
        with spent.charged(spent.CLUSTERS):
            try:
                return self._up_once()
            except ClusterError as exc:
                if "address already in use" not in str(exc):
                    raise
                _log(f"cluster {self.cfg.name}: a port was taken meanwhile ({exc}); retrying with new ports")
                return self._up_once()

    def _up_once(self) -> ClusterHandle:
        bins = self.binaries
        if self.cfg.runs_test_double and not bins.provisioner.exists():  # built only for a cluster that runs it
            try:
                ensure_binaries(self.cfg.k8s_version, only=("provisioner",))
            except BuildError as exc:
                raise ClusterError(str(exc)) from None
        csi_bins = self.csi_binaries if self.cfg.runs_csi else None
        started = time.monotonic()
        with registry_lock():
            if self.directory.exists():
                raise ClusterError(
                    f"cluster {self.cfg.name!r} already exists at {self.directory}; "
                    f"run: pvchaos cluster down --name {self.cfg.name}"
                )
            self.directory.mkdir(parents=True)
            taken = {p for st in list_clusters() for p in st.ports.values()}
            etcd_c, etcd_p, api, kcm, sched = _free_ports(5, taken)
            self.state = ClusterState(
                name=self.cfg.name, directory=self.directory, owner_pid=os.getpid(),
                k8s_version=self.cfg.k8s_version, detached=self.detached,
                owner_started=process_start_time(os.getpid()),
                ports={"etcd": etcd_c, "etcd-peer": etcd_p, "apiserver": api,
                       "controller-manager": kcm, "scheduler": sched},
                settings={"config": _jsonable(asdict(self.cfg))},
            )
            self.state.save()
        try:
            self._start(bins, csi_bins)
        except BaseException as exc:
            kept = self._keep_logs()
            self.down()
            if isinstance(exc, KeyboardInterrupt):
                raise
            text = str(exc) if isinstance(exc, ClusterError) else f"cluster {self.cfg.name}: {type(exc).__name__}: {exc}"
            text = text.replace(str(self.directory / "logs"), str(kept)) if kept else text
            raise ClusterError(text.splitlines()[0] if text else "cluster start failed") from None
        _log(f"cluster {self.cfg.name} ready in {time.monotonic() - started:.1f}s "
             f"({self.cfg.topology.node_count} nodes, {self.cfg.k8s_version})")
        return self.handle()

    def _start(self, bins: Binaries, csi_bins: csi.CsiBinaries | None = None) -> None:
        """etcd first (it needs nothing of ours), keys while it starts. The apiserver serves
        requests about 1.5 s before it is ready (its bootstrap hooks sleep a second before
        their first try), so the processes that only need the API (scheduler, KWOK,
        provisioner) start then, and the nodes are created meanwhile. The controller-manager
        waits for readiness: it checks /healthz itself and would otherwise retry a second later.
        The CSI processes are spawned here, on the main thread (their death signal follows
        the spawning thread), and awaited last."""
        assert self.state is not None
        d, ports = self.directory, self.state.ports
        self._spawn("etcd", [str(bins.etcd), *flags.etcd_args(d, ports["etcd"], ports["etcd-peer"])])
        token = _write_pki(d)
        (d / "kubeconfig").write_text(_kubeconfig_text(self.cfg.name, ports["apiserver"], token))
        (d / "kubeconfig").chmod(0o600)
        (d / "scheduler.yaml").write_text(flags.scheduler_config_yaml(self.cfg, d))
        self._spawn("kube-apiserver", [str(bins.kube_apiserver),
                                       *flags.apiserver_args(self.cfg, d, ports["etcd"], ports["apiserver"])])
        api = f"https://127.0.0.1:{ports['apiserver']}"
        self.await_healthy("kube-apiserver", f"{api}/api/v1/namespaces/kube-node-lease", token)  # serving
        self.kube = connect(d / "kubeconfig")
        self._spawn("kube-scheduler", [str(bins.kube_scheduler), *flags.scheduler_args(self.cfg, d, ports["scheduler"])])
        for zone in self.cfg.topology.zones:
            self._spawn_kwok(zone)
        if self.cfg.runs_test_double:
            self._spawn("provisioner", [str(bins.provisioner), *flags.provisioner_args(d, self.cfg.provisioner_reschedule)])
        csi_started = None
        if csi_bins is not None and csi_bins.snapshots:  # before the provisioner, which asks for them once (SWEEP_LOG)
            csi.install_snapshot_api(self.kube, csi_bins.snapshot_crds)
        if csi_bins is not None:
            csi_started = csi.spawn_stack(csi.paths_for(d), d / "kubeconfig", csi_bins, self.cfg.csi, self._spawn)
        with ThreadPoolExecutor(max_workers=2) as pool:
            storage = pool.submit(self._create_storage_objects, csi_bins)
            self._create_nodes()
            storage.result()
        if csi_started is not None and csi_bins is not None:
            csi_started.update(csi.spawn_snapshots(csi.paths_for(d), d / "kubeconfig", csi_bins, self._spawn,
                                                   self.cfg.csi))
        if csi_bins is not None:  # after the nodes, which get their CSINode here; it covers the later ones
            self._spawn(csi_registrar.COMPONENT, csi_registrar.argv(d / "kubeconfig", self.cfg.csi))
        self.await_healthy("kube-apiserver", f"{api}/readyz", token)
        self._spawn("kube-controller-manager", [str(bins.kube_controller_manager),
                                                *flags.controller_manager_args(self.cfg, d, ports["controller-manager"])])
        self.await_healthy("kube-controller-manager", f"https://127.0.0.1:{ports['controller-manager']}/healthz")
        self.await_healthy("kube-scheduler", f"https://127.0.0.1:{ports['scheduler']}/healthz")
        if csi_started is not None:
            csi.await_stack(csi.paths_for(d), csi_started)
            self._await_registrar()
        self._await_nodes_ready()

    def _await_registrar(self) -> None:
        """Until the CSI registrar watches nodes: a node that joins right after the start
        must not wait for the interpreter to load (seconds on a busy machine), or its
        CSINode comes late and the scheduler fills it without a limit."""
        log = self.directory / "logs" / f"{csi_registrar.COMPONENT}.log"

        def watching() -> bool | None:
            try:
                return True if csi_registrar.READY_LINE in log.read_text(errors="replace") else None
            except OSError:
                return None
        try:
            poll_until(watching, START_TIMEOUT, csi_registrar.COMPONENT, interval=0.05,
                       abort=lambda: self._abort_reason(csi_registrar.COMPONENT))
        except PollTimeout as exc:
            raise ClusterError(f"{exc} (log: {log})") from None

    def _keep_logs(self) -> Path | None:
        """Copy the logs of a failed start where the error message can point (the cluster
        directory itself is removed); only the newest few are kept."""
        src = self.directory / "logs"
        if not src.is_dir():
            return None
        root = cache_root() / "failed-starts"
        dest = root / self.cfg.name
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(src, dest)
        for old in sorted(root.iterdir(), key=lambda p: p.stat().st_mtime)[:-5]:
            shutil.rmtree(old, ignore_errors=True)
        return dest

    def _spawn(self, component: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        assert self.state is not None
        log = self.directory / "logs" / f"{component}.log"
        proc, record = spawn(component, argv, log, env=env, tie_to_parent=not self.detached)
        self._procs[component] = proc
        self.state.processes[component] = record
        self.state.save()
        return proc

    def _spawn_kwok(self, controller: str, argv: list[str] | None = None) -> None:
        """Start the KWOK controller of one zone (again, with `argv`, after it was killed)."""
        env = dict(os.environ, KWOK_WORKDIR=str(self.directory / "kwok"))
        self._spawn(f"kwok-{controller}", argv or [str(self.binaries.kwok),
                                                   *flags.kwok_args(self.cfg, self.directory, controller, STAGES)], env)

    def _abort_reason(self, only: str | None = None, when: str = "at start") -> str | None:
        """Ends a readiness wait at once when a component (every one, or `only`) has exited."""
        assert self.state is not None
        for component, rec in self.state.processes.items():
            if only is not None and component != only:
                continue
            proc = self._procs.get(component)
            if proc is not None:  # our child: its exit status is the truth, /proc is not needed
                code = proc.poll()
                if code is None:
                    continue
                how = f"exit code {code}" if code >= 0 else f"signal {-code}"
            elif is_ours(rec, self.state.marker()):
                continue
            else:
                how = "no longer running"
            return f"{component} exited {when} ({how}): {log_tail(rec.log) or '(empty log)'} (log: {rec.log})"
        return None

    def await_healthy(self, component: str, url: str, token: str | None = None, after: str | None = None) -> None:
        """Until `url` answers 200. At start any component's exit ends the wait; `after`
        ("its upgrade") watches only this component and names the occasion."""
        def ok() -> bool | None:
            status, _ = get_url(url, token)
            return True if status == 200 else None

        def abort() -> str | None:
            return self._abort_reason() if after is None else self._abort_reason(component, f"after {after}")
        what = f"{component} health at {url}" + (f" after {after}" if after else "")
        try:
            poll_until(ok, START_TIMEOUT, what, abort=abort)
        except PollTimeout as exc:
            log = self.directory / "logs" / f"{component}.log"
            raise ClusterError(str(exc) if "(log:" in str(exc) else f"{exc} (log: {log})") from None

    def _create_nodes(self) -> None:
        assert self.kube is not None
        create = self.kube.core.create_node
        create_csi_node = self.kube.storage.create_csi_node
        bodies = [flags.node_object(n, i, n.zone) for i, n in enumerate(self.cfg.topology.nodes())]
        runs_csi, options = self.cfg.runs_csi, self.cfg.csi

        def one(body: dict) -> None:
            """The Node, and for CSI what its kubelet and registrar would write."""
            node = body["metadata"]["name"]
            if runs_csi:
                body["metadata"].setdefault("annotations", {}).update(csi.node_annotations(node))
            create(body=body)
            if runs_csi:
                create_csi_node(body=csi.csi_node_object(node, options))
        with ThreadPoolExecutor(max_workers=min(8, len(bodies))) as pool:
            list(pool.map(one, bodies))

    def _create_storage_objects(self, csi_bins: csi.CsiBinaries | None = None) -> None:
        """The CSIDriver: ours with attach required (the attach/detach controller and the
        external-attacher then attach); the test double's without (KWOK nodes never attach).
        With CSI the nodes are attach/detach-controller managed, so the static stand-in
        PVs' driver gets one without attach too: else the controller would create
        VolumeAttachments for them that nothing answers. (The VolumeSnapshot CRDs come
        before the CSI stack starts: its provisioner looks for their API once, at start.)"""
        assert self.kube is not None
        drivers: tuple[str, ...] = (ZONAL_PROVISIONER,)
        if self.cfg.runs_csi:
            self.kube.storage.create_csi_driver(body=csi.csi_driver_object(self.cfg.csi))
            drivers = (csi.STATIC_DRIVER,)
        for driver in drivers:
            self.kube.storage.create_csi_driver(body={
                "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                "metadata": {"name": driver, "labels": {OWNED_LABEL: "true"}},
                "spec": {"attachRequired": False, "podInfoOnMount": False},
            })

    def _await_nodes_ready(self) -> None:
        assert self.kube is not None
        want = {n.name for n in self.cfg.topology.nodes()}
        kube = self.kube

        def all_ready() -> bool | None:
            """Ready, and the lifecycle controller has lifted its not-ready taint."""
            ready = {o.name(n) for n in kinds.list_objects(kube, "Node")[0]
                     if o.ready(n) == "True" and not o.has_taint(n, o.NOT_READY)}
            return True if want <= ready else None

        timeout = START_TIMEOUT + 0.1 * len(want)  # a 1,000-node cluster takes longer to report
        what = f"nodes {sorted(want)} Ready" if len(want) <= 10 else f"{len(want)} nodes Ready"
        try:
            poll_until(all_ready, timeout, what, interval=0.05 if len(want) <= 100 else 1.0, abort=self._abort_reason)
        except PollTimeout as exc:
            if exc.aborted:
                raise ClusterError(f"{exc} (logs: {self.directory / 'logs'})") from None
            why = nodes_problem(kinds.list_objects(kube, "Node")[0], want)
            raise ClusterError(f"nodes not usable within {timeout:.0f}s: {why} (logs: {self.directory / 'logs'})") from None

    def down(self) -> None:
        """Stop every process and remove the directory; safe to call twice."""
        if self.kube is not None:
            self.kube.api.close()
            self.kube = None
        if self.state is None and (self.directory / "state.json").exists():
            self.state = ClusterState.load(self.directory)
        if self.state is not None:
            destroy(self.state)
            self.state = None
        elif self.directory.exists():
            shutil.rmtree(self.directory, ignore_errors=True)

    def _provisioner_description(self) -> dict[str, str]:
        """Which provisioner ran, and the sidecar versions when it was CSI."""
        if self.cfg.runs_csi:
            return {**csi.description(self.cfg.csi, PROVISIONER.version, ATTACHER.version, RESIZER.version),
                    "external-snapshotter": f"{SNAPSHOTTER_VERSION} (csi-snapshotter, snapshot-controller)"}
        if self.cfg.runs_test_double:
            return {"provisioner": f"test double pvchaos-provisioner ({ZONAL_PROVISIONER}, {LOCAL_PROVISIONER})"}
        return {"provisioner": "none"}

    def handle(self) -> ClusterHandle:
        zonal, local = ((csi.DRIVER_NAME, csi.DRIVER_NAME) if self.cfg.runs_csi
                        else (ZONAL_PROVISIONER, LOCAL_PROVISIONER) if self.cfg.runs_test_double else (None, None))
        return ClusterHandle(
            name=self.cfg.name, backend="local", kubeconfig=self.directory / "kubeconfig",
            context=None, k8s_version=self.cfg.k8s_version, capabilities=local_capabilities(self.cfg),
            feature_gates=self.cfg.effective_gates(),
            zonal_class_provisioner=zonal, local_class_provisioner=local,
            faults=self, directory=self.directory,
            description={
                **self._provisioner_description(),
                "disabled controllers": ",".join(self.cfg.disabled_controllers) or "none",
                "disabled scheduler plugins": ",".join(self.cfg.disabled_scheduler_plugins) or "none",
                "node-monitor-grace-period": f"{self.cfg.node_monitor_grace_seconds}s",
                "node lease": f"{self.cfg.node_lease_seconds}s",
                "node-monitor-period": f"{self.cfg.node_monitor_period_seconds}s",
                "node-eviction-rate": f"{self.cfg.node_eviction_rate:g}",
                "pvclaimbinder-sync-period": f"{self.cfg.pv_sync_seconds}s",
                "provisioner reschedule": (self.cfg.provisioner_reschedule if self.cfg.runs_test_double
                                           else "external-provisioner's" if self.cfg.runs_csi else "none"),
                "kcm and scheduler client qps/burst": f"{self.cfg.client_qps or 'default'}/{self.cfg.client_burst or 'default'}",
                "scheduler percentageOfNodesToScore": f"{self.cfg.nodes_to_score_percent or 'default (adaptive)'}",
            },
        )

    # ---- nodes that join (NodeJoins) ---------------------------------------------------

    def join_node(self, name: str, zone: str, labels: dict[str, str]) -> None:
        """A node joining the running cluster, the way a machine would: only its Node
        object, a KWOK node of `zone`'s controller shaped like the zone's first node. What
        a kubelet and node plugin write (CSINode, CSI annotations) comes from the CSI
        registrar (csi_registrar.py), as late as it comes on a real node."""
        assert self.kube is not None
        template = next((n for n in self.cfg.topology.nodes() if n.zone == zone), None)
        if template is None:
            raise ClusterError(f"cluster {self.cfg.name}: no zone {zone!r} (zones: {list(self.cfg.topology.zones)})")
        spec = NodeSpec(name, zone, {**template.labels, o.HOSTNAME_KEY: name, **labels}, dict(template.allocatable))
        index = len(self.cfg.topology.nodes()) + len(kinds.list_objects(self.kube, "Node")[0])
        kinds.create(self.kube, flags.node_object(spec, min(index, flags.MAX_NODES - 1), zone))

    def remove_node(self, name: str) -> None:
        """The joined node's Node and CSINode deleted (its pods go with the Node)."""
        assert self.kube is not None
        for kind in ("Node", "CSINode"):
            kinds.delete(self.kube, kind, name)  # already gone is fine

    # ---- faults (NodeFaults) ---------------------------------------------------------

    def _record(self, component: str) -> ProcessRecord:
        assert self.state is not None
        if component not in self.state.processes:
            raise KeyError(f"cluster {self.cfg.name} has no component {component!r}; "
                           f"known: {sorted(self.state.processes)}")
        return self.state.processes[component]

    def _zones(self) -> dict[str, str]:
        """Node name -> zone, which is also the name of its KWOK controller."""
        return {n.name: n.zone for n in self.cfg.topology.nodes()}

    def _zone_of(self, node: str) -> str:
        zone = self._zones().get(node)
        if zone is None:
            raise KeyError(f"cluster {self.cfg.name} has no node {node!r}")
        return zone

    def _unserved(self) -> set[str]:
        """Nodes taken out of every controller's selector (label `stopped`), from state.json."""
        assert self.state is not None
        return set(self.state.settings.get("stopped_nodes", []))

    def _set_unserved(self, nodes: set[str]) -> None:
        assert self.state is not None
        self.state.settings["stopped_nodes"] = sorted(nodes)
        self.state.save()

    def _relabel(self, nodes: list[str], controller: str) -> None:
        """Point nodes at a controller (or at `stopped`), all at once."""
        if not nodes:
            return
        assert self.kube is not None, "the cluster is not up"
        patch = self.kube.core.patch_node
        body = {"metadata": {"labels": {CONTROLLER_LABEL: controller}}}
        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as pool:
            list(pool.map(lambda n: patch(n, body), nodes))

    def _controller_alive(self, zone: str) -> bool:
        assert self.state is not None
        return is_ours(self._record(f"kwok-{zone}"), self.state.marker())

    def stop_node(self, node: str) -> None:
        """Stop the node's heartbeat: its Lease is no longer renewed, as with a dead kubelet."""
        self.stop_nodes([node])

    def stop_nodes(self, nodes: list[str]) -> None:
        """Stop several nodes' heartbeats at the same instant (a zone or cluster outage).

        A zone whose every running node is in the list loses its KWOK controller (one
        SIGKILL); the other nodes leave their controller's selector (one label patch each).
        """
        assert self.state is not None
        zones = self._zones()
        for n in nodes:
            self._zone_of(n)
        unserved = self._unserved()
        wanted = {n for n in nodes if not self.node_stopped(n)}
        whole = sorted({z for z in (zones[n] for n in wanted)
                        if {m for m, mz in zones.items() if mz == z} - unserved <= wanted})
        kill_all([self._record(f"kwok-{z}") for z in whole], self.state.marker())
        rest = sorted(n for n in wanted if zones[n] not in whole)
        self._set_unserved(unserved | set(rest))
        self._relabel(rest, STOPPED)

    def start_node(self, node: str) -> None:
        """Give the node back to its zone's controller, restarting that controller if a
        zone outage killed it (its other nodes stay stopped)."""
        assert self.state is not None
        zone = self._zone_of(node)
        if not self.node_stopped(node):
            return
        unserved = self._unserved()
        if self._controller_alive(zone):
            self._relabel([node], zone)
        else:
            keep_down = sorted(m for m, z in self._zones().items() if z == zone and m != node and m not in unserved)
            self._set_unserved(unserved | set(keep_down))
            self._relabel(keep_down, STOPPED)
            if node in unserved:
                self._relabel([node], zone)
            self._spawn_kwok(zone, list(self._record(f"kwok-{zone}").argv))
        self._set_unserved(self._unserved() - {node})

    def node_stopped(self, node: str) -> bool:
        return node in self._unserved() or not self._controller_alive(self._zone_of(node))

    def stop_component(self, component: str) -> None:
        assert self.state is not None
        stop(self._record(component), self.state.marker())

    def start_component(self, component: str) -> None:
        """Restart a stopped component with the exact command line it had."""
        assert self.state is not None
        rec = self._record(component)
        if is_ours(rec, self.state.marker()):
            return
        if component.startswith("kwok-"):  # the same environment as at start (its work directory)
            self._spawn_kwok(component.removeprefix("kwok-"), list(rec.argv))
            return
        self._spawn(component, list(rec.argv))


def _jsonable(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def local_capabilities(cfg: LocalClusterConfig) -> frozenset[Capability]:
    """What a local cluster of this configuration can do, known before it starts (so a
    test that needs more skips without starting one)."""
    caps = {Capability.ZONES, Capability.STATIC_PV, Capability.BLOCK, Capability.RWX,
            Capability.NODE_FAILURE, Capability.NODE_LABELS, Capability.COMPONENT_RESTART,
            Capability.OWNED, Capability.EPHEMERAL_STORAGE, Capability.IN_PLACE_UPGRADE}
    if len(cfg.topology.zones) < 2:
        caps.discard(Capability.ZONES)
    if cfg.provisioner:
        caps |= {Capability.DYNAMIC_ZONAL, Capability.DYNAMIC_LOCAL, Capability.PROVISIONING_FAILURES}
    if cfg.runs_csi:
        caps |= {Capability.HARNESS_DRIVER, Capability.CSI_PROXY, Capability.NODE_JOIN,
                 Capability.SNAPSHOTS, Capability.CLONES, Capability.INLINE_EPHEMERAL, Capability.EXPANSION,
                 Capability.MODIFY_VOLUME}
        if cfg.csi.attach_required:
            caps.add(Capability.ATTACH)
    if cfg.effective_gates().get(flags.MUTABLE_PV_GATE):
        caps.add(Capability.MUTABLE_PV_AFFINITY)
    return frozenset(caps)


def missing_details(cfg: LocalClusterConfig) -> dict[str, str]:
    """Why a local cluster of this configuration lacks a capability, where a version or a
    setting explains it (a skip then says so, not just "no mutable-pv-affinity")."""
    details: dict[str, str] = {}
    if cfg.runs_csi and not cfg.csi.attach_required:
        details[Capability.ATTACH] = csi.NO_ATTACH_ASKED
    first = flags.GATE_FIRST_MINOR[flags.MUTABLE_PV_GATE]
    if cfg.minor < first:
        details[Capability.MUTABLE_PV_AFFINITY] = (f"Kubernetes {cfg.k8s_version} has no {flags.MUTABLE_PV_GATE} "
                                                   f"gate; it is first in 1.{first}")
    elif not cfg.effective_gates().get(flags.MUTABLE_PV_GATE):
        details[Capability.MUTABLE_PV_AFFINITY] = f"feature gate {flags.MUTABLE_PV_GATE} is off"
    return details


def _log(msg: str) -> None:
    print(f"[pvchaos] {msg}", file=sys.stderr, flush=True)
