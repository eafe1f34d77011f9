"""The local backend's lifecycle on real clusters: up, down, provisioning, node and
component faults, teardown after failures and signals, bad input, the CLI.

Nothing here mocks Kubernetes. Every test points PVCHAOS_STATE_DIR at its own tmp dir,
so sweeps and listings only ever see this file's clusters. "No process left" is checked
by pid against /proc, and for failed starts by scanning /proc for any command line that
names the cluster's directory (every component has it in its flags).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterError, ClusterHandle
from pvchaos.clusters.csi import DRIVER_NAME
from pvchaos.clusters.local import cluster as cluster_module
from pvchaos.clusters.local import csi_registrar
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import CONTROLLER_LABEL, LocalClusterConfig
from pvchaos.clusters.local.registry import ClusterState, sweep_orphans
from pvchaos.clusters.topology import HOSTNAME_KEY, REGION_KEY, ZONE_KEY, Topology
from pvchaos.drivers.driver import DriverError, ProfileDriver
from pvchaos.drivers.profile import parse_profile
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders, kinds
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube, connect, name_of
from pvchaos.kube.kinds import Obj
from pvchaos.kube.poll import poll_until
from pvchaos.kube.wait import WaitTimeout, phase_is, pod_cannot_run, pod_running, wait_for, wait_for_state
from pvchaos.tools.build import REPO_ROOT, BuildError, ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

UNREACHABLE = "node.kubernetes.io/unreachable"
ONE_NODE = Topology(zones=("zone-a",), nodes_per_zone=1)


def _components(zones: tuple[str, ...]) -> list[str]:
    """Every process a default local cluster runs: the control plane, one KWOK per zone, the
    CSI controller service, its fault proxy, both sidecars and the node registrar."""
    return sorted(["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                   *(f"kwok-{z}" for z in zones), *csi.COMPONENTS, csi.PROXY, csi_registrar.COMPONENT])

# ---- helpers ---------------------------------------------------------------------------

def pid_alive(pid: int, marker: str) -> bool:
    """The pid runs (not a zombie) with `marker` on its command line; a pid reused by an
    unrelated process does not count as the cluster's."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return False
    return ") Z " not in stat and marker.encode() in cmdline


def processes_naming(marker: str) -> list[str]:
    """Every live process whose command line contains `marker`, as 'pid cmdline'."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() and pid_alive(int(entry.name), marker):
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name} {cmd[:160]}")
    return found


def recorded_pids(directory: Path) -> dict[str, int]:
    return {c: rec.pid for c, rec in ClusterState.load(directory).processes.items()}


def assert_nothing_left(directory: Path, pids: dict[str, int] | None = None) -> None:
    """No recorded pid alive, no process naming the directory, no directory."""
    marker = str(directory)
    alive = {c: p for c, p in (pids or {}).items() if pid_alive(p, marker)}
    assert not alive, f"processes of {directory.name} still alive: {alive}"
    assert not processes_naming(marker), f"processes naming {marker}: {processes_naming(marker)}"
    assert not directory.exists(), f"{directory} was left behind: {sorted(p.name for p in directory.iterdir())}"


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and len(text.splitlines()) == 1, f"want a one-line message, got:\n{text}"
    return text


def condition(node: Obj, kind: str) -> str | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c.get("status")
    return None


def taints(node: Obj) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in (node.get("spec") or {}).get("taints") or []}


def zone_of(node: Obj) -> str:
    return str((node["metadata"].get("labels") or {}).get(ZONE_KEY))


def scheduled(pod: Obj | None) -> bool:
    return pod is not None and bool((pod.get("spec") or {}).get("nodeName"))


@pytest.fixture(autouse=True)
def own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Clusters of this test live (and are swept) in its own tmp dir only."""
    root = tmp_path / "clusters"
    root.mkdir()
    monkeypatch.setenv("PVCHAOS_STATE_DIR", str(root))
    return root


@dataclass
class Running:
    """A module-shared cluster and a client for it."""

    local: LocalCluster
    handle: ClusterHandle
    kube: Kube


@contextmanager
def module_cluster(tmp_path_factory: pytest.TempPathFactory, cfg: LocalClusterConfig) -> Iterator[Running]:
    """Up a cluster in a tmp state dir of its own for a whole module; down it at the end."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PVCHAOS_STATE_DIR", str(tmp_path_factory.mktemp("module-clusters")))
    local = LocalCluster(cfg)
    try:
        handle = local.up()
        kube = connect(handle.kubeconfig)
        try:
            yield Running(local, handle, kube)
        finally:
            kube.api.close()
    finally:
        local.down()
        mp.undo()


@pytest.fixture(scope="module")
def zoned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """Three zones of one node with the zonal provisioner; tests only add namespaced
    objects and uniquely named classes, so they share it."""
    cfg = LocalClusterConfig(name="zoned", topology=Topology(nodes_per_zone=1))
    with module_cluster(tmp_path_factory, cfg) as running:
        yield running


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """Two nodes for node and component faults; each test restores what it broke."""
    cfg = LocalClusterConfig(name="faulty", provisioner=False,
                             topology=Topology(zones=("zone-a", "zone-b"), nodes_per_zone=1))
    with module_cluster(tmp_path_factory, cfg) as running:
        yield running


@contextmanager
def workspace(running: Running, test: str) -> Iterator[Workspace]:
    cleanup = Cleanup(f"cleanup of {test}")
    try:
        yield Workspace(running.kube, running.handle, test, cleanup)
    finally:
        cleanup.run()


# ---- up and down -----------------------------------------------------------------------

@pytest.mark.slow
def test_up_gives_ready_zoned_nodes_and_down_leaves_nothing() -> None:
    cfg = LocalClusterConfig(name="updown")
    local = LocalCluster(cfg)
    pids: dict[str, int] = {}
    try:
        handle = local.up()
        pids = recorded_pids(local.directory)
        kube = connect(handle.kubeconfig)
        try:
            nodes = kinds.list_objects(kube, "Node")[0]
            version = kube.version.get_code().git_version
        finally:
            kube.api.close()
        assert version == cfg.k8s_version == DEFAULT_K8S_VERSION
        assert sorted(name_of(n) for n in nodes) == sorted(n.name for n in cfg.topology.nodes())
        for n in nodes:
            assert condition(n, "Ready") == "True", f"{name_of(n)}: Ready={condition(n, 'Ready')}"
            labels = n["metadata"].get("labels") or {}
            for key in (ZONE_KEY, REGION_KEY, HOSTNAME_KEY, "storage"):
                assert labels.get(key), f"{name_of(n)} lacks label {key}: {labels}"
            assert {"cpu", "memory", "pods", "ephemeral-storage"} <= set(n["status"].get("allocatable") or {})
        assert {zone_of(n) for n in nodes} == {"zone-a", "zone-b", "zone-c"}
        assert sorted(pids) == _components(cfg.topology.zones)
        for n in nodes:  # each node has an address and pod range of its own
            assert (n["metadata"].get("labels") or {}).get(CONTROLLER_LABEL) == zone_of(n)
        assert len({n["status"]["addresses"][0]["address"] for n in nodes}) == len(nodes)
        assert len({n["spec"]["podCIDR"] for n in nodes}) == len(nodes)
        assert all(pid_alive(p, str(local.directory)) for p in pids.values())
    finally:
        local.down()
    assert_nothing_left(local.directory, pids)


# ---- provisioning ------------------------------------------------------------------------

@pytest.mark.slow
def test_profile_driver_copies_an_existing_class(zoned: Running) -> None:
    """FromExistingClassName, as upstream: the named class is read from the cluster and
    copied (provisioner, parameters, mount options) under the test's own name and mode;
    the vendor's class itself is left as it was."""
    with workspace(zoned, "existing-class") as ws:
        gold = ws.create(builders.storage_class(ws.name("gold"), "csi.example.com", "WaitForFirstConsumer",
                                                parameters={"tier": "gold"}))
        gold_name = gold["metadata"]["name"]
        profile = parse_profile({"StorageClass": {"FromExistingClassName": gold_name}, "DriverInfo": {
            "Name": "csi.example.com", "TopologyKeys": [ZONE_KEY],
            "Capabilities": {"persistence": True, "topology": True}}}, "driver.yaml")
        driver = ProfileDriver(profile, zoned.handle, zoned.kube)
        copy = ws.create(driver.storage_class(ws.name("copy"), "Immediate", allowed_zones=["zone-b"]))
        assert (copy["provisioner"], copy["parameters"], copy["volumeBindingMode"]) == (
            "csi.example.com", {"tier": "gold"}, "Immediate")
        assert copy["allowedTopologies"][0]["matchLabelExpressions"] == [{"key": ZONE_KEY, "values": ["zone-b"]}]
        original = kinds.get(zoned.kube, "StorageClass", gold_name) or {}
        assert original["volumeBindingMode"] == "WaitForFirstConsumer" and "allowedTopologies" not in original
        missing = ProfileDriver(parse_profile({"StorageClass": {"FromExistingClassName": "no-such-class"},
                                               "DriverInfo": {"Name": "csi.example.com"}}, "driver.yaml"),
                                zoned.handle, zoned.kube)
        with pytest.raises(DriverError, match="'no-such-class' does not exist in the cluster"):
            missing.storage_class("x")


@pytest.mark.slow
def test_wait_for_first_consumer_pv_follows_the_pods_zone(zoned: Running) -> None:
    with workspace(zoned, "wffc") as ws:
        provisioner = zoned.handle.zonal_class_provisioner
        assert provisioner == DRIVER_NAME  # CSI by default: tests/cluster/test_csi_local.py
        sc = ws.create(builders.storage_class(ws.name("wffc"), provisioner))["metadata"]["name"]
        ws.create(builders.persistent_volume_claim("data", "1Gi", sc))
        ws.create(builders.pod("app", claims=("data",)))
        pod = wait_for(ws.kube, "Pod", "app", pod_running, "Running", ws.namespace, timeout=60,
                       fail_if=pod_cannot_run)
        claim = wait_for(ws.kube, "PersistentVolumeClaim", "data", phase_is("Bound"), "Bound", ws.namespace)
        assert pod is not None and claim is not None
        node = kinds.get(zoned.kube, "Node", pod["spec"]["nodeName"])
        pv = ws.get("PersistentVolume", claim["spec"]["volumeName"])
        assert node is not None and pv is not None
        terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [zone_of(node)]}]}]
        assert pv["spec"]["csi"]["driver"] == DRIVER_NAME


@pytest.mark.slow
def test_immediate_claims_land_only_in_allowed_zones(zoned: Running) -> None:
    allowed = ["zone-a", "zone-c"]
    with workspace(zoned, "immediate") as ws:
        sc = ws.create(builders.storage_class(ws.name("imm"), DRIVER_NAME, binding_mode="Immediate",
                                              allowed_zones=allowed))["metadata"]["name"]
        claims = [f"c{i}" for i in range(6)]
        for c in claims:
            ws.create(builders.persistent_volume_claim(c, "1Gi", sc))

        def all_bound(state: dict[str, Obj]) -> list[str] | None:
            vols = [str(o["spec"]["volumeName"]) for o in state.values()
                    if (o.get("status") or {}).get("phase") == "Bound"]
            return vols if len(vols) == len(claims) else None

        volumes = wait_for_state(ws.kube, "PersistentVolumeClaim", all_bound, f"{len(claims)} claims Bound",
                                 ws.namespace, timeout=60)
        zones = []
        for name in volumes:
            pv = ws.get("PersistentVolume", name)
            assert pv is not None
            (term,) = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
            (expr,) = term["matchExpressions"]
            assert expr["key"] == ZONE_KEY and expr["operator"] == "In"
            zones += expr["values"]
        assert zones and set(zones) <= set(allowed), f"PV zones {zones}, allowed {allowed}"


# ---- faults --------------------------------------------------------------------------------

@pytest.mark.slow
def test_stopped_node_turns_unreachable_and_recovers(faulty: Running) -> None:
    node = "zone-a-1"
    kube, local = faulty.kube, faulty.local
    grace = local.cfg.node_monitor_grace_seconds
    cleanup = Cleanup("restore node")
    try:
        cleanup.push(f"start node {node}", lambda: local.start_node(node))
        stopped_at = time.monotonic()
        local.stop_node(node)
        assert local.node_stopped(node)

        def lost(o: Obj | None) -> bool:
            return (o is not None and condition(o, "Ready") == "Unknown"
                    and {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")} <= taints(o))

        wait_for(kube, "Node", node, lost, "Ready=Unknown with unreachable NoSchedule and NoExecute taints",
                 timeout=grace + 20)
        lost_after = time.monotonic() - stopped_at

        started_at = time.monotonic()
        local.start_node(node)
        assert not local.node_stopped(node)

        def back(o: Obj | None) -> bool:
            return (o is not None and condition(o, "Ready") == "True"
                    and not any(key == UNREACHABLE for key, _ in taints(o)))

        wait_for(kube, "Node", node, back, "Ready=True without unreachable taints", timeout=30)
        back_after = time.monotonic() - started_at
    finally:
        cleanup.run()
    print(f"\nnode {node}: unreachable {lost_after:.1f}s after stop_node (grace {grace}s); "
          f"Ready again {back_after:.1f}s after start_node")
    # The lifecycle controller must have waited for the Lease to age, but not much longer.
    assert grace - local.cfg.node_lease_seconds <= lost_after <= grace + 5
    assert back_after <= 10


@pytest.mark.slow
def test_one_node_of_a_zone_and_then_the_zone_fail_and_return_alone(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One KWOK serves both nodes: one node leaves its selector and only it goes Unknown;
    then the whole zone loses its controller; then one node comes back alone. (With every
    node down the lifecycle controller is in master disruption mode and adds no NoExecute
    taint, so the second half looks at Ready only.)"""
    cfg = LocalClusterConfig(name="pair", provisioner=False, topology=Topology(zones=("zone-a",), nodes_per_zone=2))
    a, b = (n.name for n in cfg.topology.nodes())

    def lost(o: Obj | None) -> bool:
        return o is not None and condition(o, "Ready") == "Unknown" and (UNREACHABLE, "NoExecute") in taints(o)

    def back(o: Obj | None) -> bool:
        return o is not None and condition(o, "Ready") == "True" and (UNREACHABLE, "NoExecute") not in taints(o)

    def unknown(o: Obj | None) -> bool:
        return o is not None and condition(o, "Ready") == "Unknown"

    with module_cluster(tmp_path_factory, cfg) as pair:
        local, kube = pair.local, pair.kube
        cleanup = Cleanup("restore nodes")
        cleanup.push("start nodes", lambda: [local.start_node(n) for n in (a, b)])
        try:
            local.stop_node(a)
            assert local.node_stopped(a) and not local.node_stopped(b)
            wait_for(kube, "Node", a, lost, "Unknown and unreachable", timeout=cfg.node_monitor_grace_seconds + 20)
            assert back(kinds.get(kube, "Node", b)), "the other node stays Ready"
            local.start_node(a)
            wait_for(kube, "Node", a, back, "Ready again", timeout=30)

            local.stop_nodes([a, b])
            assert local.state is not None and "kwok-zone-a" not in local.state.alive_components()
            for n in (a, b):
                wait_for(kube, "Node", n, unknown, "Ready=Unknown", timeout=cfg.node_monitor_grace_seconds + 20)
            local.start_node(b)
            assert not local.node_stopped(b) and local.node_stopped(a)
            wait_for(kube, "Node", b, back, "Ready again", timeout=30)
            time.sleep(cfg.node_lease_seconds)  # a would be back by now if the restarted controller served it
            assert unknown(kinds.get(kube, "Node", a)), "only the node started comes back"
        finally:
            cleanup.run()


@pytest.mark.slow
def test_scheduler_restart_stops_and_resumes_scheduling(faulty: Running) -> None:
    local = faulty.local
    with workspace(faulty, "scheduler-restart") as ws:
        ws.create(builders.pod("before"))
        wait_for(ws.kube, "Pod", "before", scheduled, "scheduled", ws.namespace, timeout=30)

        ws.cleanup.push("start kube-scheduler", lambda: local.start_component("kube-scheduler"))
        local.stop_component("kube-scheduler")
        assert local.state is not None and "kube-scheduler" not in local.state.alive_components()
        ws.create(builders.pod("during"))
        with pytest.raises(WaitTimeout):
            wait_for(ws.kube, "Pod", "during", scheduled, "scheduled (it must not be)", ws.namespace, timeout=4)

        started = time.monotonic()
        local.start_component("kube-scheduler")
        pod = wait_for(ws.kube, "Pod", "during", scheduled, "scheduled after the restart", ws.namespace, timeout=30)
        print(f"\npod scheduled {time.monotonic() - started:.1f}s after start_component(kube-scheduler)")
        assert pod is not None and pod["spec"]["nodeName"] in {"zone-a-1", "zone-b-1"}


# ---- teardown after failures and signals -----------------------------------------------------

PROBE_TEST = '''
import faulthandler
import json
import os
import signal
import time
from pathlib import Path


def test_probe(cluster):
    """Report the cluster's processes (and which run, seen while the fixture holds them)."""
    # Probe.stacks(): where a hang is. A file of its own: pytest captures fd 2 during the test.
    global STACKS
    STACKS = open(os.environ["PROBE_OUT"] + ".stacks", "w")
    faulthandler.register(signal.SIGUSR1, file=STACKS, all_threads=True)
    state = json.loads((cluster.directory / "state.json").read_text())
    marker = str(cluster.directory).encode()
    alive = []
    for component, rec in state["processes"].items():
        try:
            if marker in Path(f"/proc/{rec['pid']}/cmdline").read_bytes():
                alive.append(component)
        except OSError:
            pass
    out = Path(os.environ["PROBE_OUT"])
    out.with_suffix(".tmp").write_text(json.dumps({"state": state, "alive": alive}))
    os.replace(out.with_suffix(".tmp"), out)
    if os.environ["PROBE_MODE"] == "fail":
        assert cluster.name == "a name no cluster has"
    time.sleep(600)
'''


@dataclass
class Probe:
    """A pytest run in a subprocess whose one test holds a `cluster` fixture."""

    proc: subprocess.Popen[bytes]
    out: Path
    log: Path
    state_dir: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stacks(self) -> str:
        """Every thread's stack of a pytest that does not exit (the probe test registered
        faulthandler on SIGUSR1), with the rest of its output."""
        self.proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        stacks = Path(f"{self.out}.stacks")
        return (stacks.read_text(errors="replace") if stacks.exists() else "(no stacks written)") + "\n" + self.output()

    def wait_for_cluster(self) -> tuple[Path, dict[str, int]]:
        """Process readiness (a file the test writes while it holds the cluster): polled."""
        def ready() -> bool | None:
            return True if self.out.exists() else None

        def exited() -> str | None:
            return None if self.proc.poll() is None else f"pytest exited {self.proc.returncode}:\n{self.output()}"

        poll_until(ready, 120, "the probe test to hold its cluster", interval=0.1, abort=exited)
        data = json.loads(self.out.read_text())
        directory = self.state_dir / data["state"]["name"]
        pids = {c: int(p["pid"]) for c, p in data["state"]["processes"].items()}
        assert sorted(data["alive"]) == sorted(pids), f"cluster not fully running: {data['alive']}"
        assert sorted(pids) == _components(("zone-a",))
        return directory, pids


def _as_from_a_terminal() -> None:
    """SIGINT at its default, as for a command typed in a terminal. A CI job or `cmd &`
    in a script may run these tests with SIGINT ignored; the pytest under test would
    inherit that, Python would then raise no KeyboardInterrupt, and the SIGINT case
    would wait out its 90 s (seen in fresh-clone CI launched in the background)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def probe(tmp_path: Path, state_dir: Path, mode: str) -> Iterator[Probe]:
    # no conftest: the plugin loads through its entry point, as in any user's project
    (tmp_path / "test_probe.py").write_text(PROBE_TEST)
    log = tmp_path / "pytest.log"
    env = dict(os.environ, PVCHAOS_STATE_DIR=str(state_dir), PROBE_OUT=str(tmp_path / "state-copy.json"),
               PROBE_MODE=mode)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", str(tmp_path / "test_probe.py"), "-p", "no:cacheprovider",
             "--rootdir", str(tmp_path), "-q", "--zones", "1", "--nodes-per-zone", "1"],
            cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_as_from_a_terminal)  # noqa: PLW1509  one signal() call, no locks
    try:
        yield Probe(proc, tmp_path / "state-copy.json", log, state_dir)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["assertion", "SIGINT", "SIGTERM"])
def test_cluster_fixture_tears_down_after_failure_or_signal(how: str, tmp_path: Path, own_state_dir: Path) -> None:
    with probe(tmp_path, own_state_dir, "fail" if how == "assertion" else "sleep") as p:
        directory, pids = p.wait_for_cluster()
        if how != "assertion":
            p.proc.send_signal(getattr(signal, how))
        try:
            code = p.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"pytest did not exit within 90 s of {how}; its threads and output:\n{p.stacks()}")
        want = 1 if how == "assertion" else 2  # pytest: tests failed / interrupted
        assert code == want, f"pytest exited {code}, want {want}:\n{p.output()}"
    assert_nothing_left(directory, pids)
    assert sorted(x.name for x in own_state_dir.iterdir() if not x.name.startswith(".")) == []


@pytest.mark.slow
def test_sigkilled_run_leaves_no_process_and_sweep_removes_its_directory(tmp_path: Path,
                                                                        own_state_dir: Path) -> None:
    with probe(tmp_path, own_state_dir, "sleep") as p:
        directory, pids = p.wait_for_cluster()
        p.proc.kill()
        p.proc.wait()  # reaped: a zombie owner would still look alive to the sweeper
    marker = str(directory)

    def all_dead() -> bool | None:
        return True if not any(pid_alive(pid, marker) for pid in pids.values()) else None

    poll_until(all_dead, 45, f"PR_SET_PDEATHSIG to end {sorted(pids)}", interval=0.1)
    assert directory.exists(), "nothing should have removed the directory of a SIGKILLed run"
    assert sweep_orphans() == [directory.name]
    assert_nothing_left(directory, pids)


# ---- bad input -------------------------------------------------------------------------------

@pytest.mark.slow
def test_component_that_exits_at_start_is_named_with_its_log(own_state_dir: Path) -> None:
    local = LocalCluster(LocalClusterConfig(name="badflag", topology=ONE_NODE, provisioner=False,
                                            extra_apiserver_flags=("--no-such-flag",)))
    with pytest.raises(ClusterError) as err:
        local.up()
    msg = one_line(err.value)
    assert "kube-apiserver exited at start" in msg
    assert "--no-such-flag" in msg
    log = Path(msg.rsplit("(log: ", 1)[1].rstrip(")"))
    assert log.name == "kube-apiserver.log" and "unknown flag" in log.read_text(), msg
    assert_nothing_left(local.directory)


@pytest.mark.slow
@pytest.mark.parametrize(("component", "index"), [("etcd", 0), ("kube-apiserver", 2), ("kube-scheduler", 4)])
def test_port_clash_names_the_component_that_could_not_bind(component: str, index: int, own_state_dir: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    real = cluster_module._free_ports

    def with_held_port(count: int, taken: set[int]) -> list[int]:
        ports = real(count, taken | {port})
        ports[index] = port
        return ports

    monkeypatch.setattr(cluster_module, "_free_ports", with_held_port)
    local = LocalCluster(LocalClusterConfig(name=f"clash-{index}", topology=ONE_NODE, provisioner=False))
    try:
        with pytest.raises(ClusterError) as err:
            local.up()
    finally:
        held.close()
    msg = one_line(err.value)
    assert f"{component} exited at start" in msg
    assert "address already in use" in msg
    assert_nothing_left(local.directory)


@pytest.mark.slow
def test_version_the_proxy_does_not_serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PVCHAOS_CACHE", str(cache))
    with pytest.raises(BuildError) as err:
        ensure_binaries("v1.99.0")
    msg = one_line(err.value)
    assert "k8s.io/kubernetes@v1.99.0" in msg
    assert not (cache / "bin" / "kubernetes-v1.99.0").exists()


def test_missing_go_toolchain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_state_dir: Path) -> None:
    monkeypatch.setenv("PVCHAOS_CACHE", str(tmp_path / "cache"))
    path = [d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "go").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    assert shutil.which("go") is None
    with pytest.raises(BuildError) as err:
        ensure_binaries(DEFAULT_K8S_VERSION)
    assert "Go" in one_line(err.value)
    local = LocalCluster(LocalClusterConfig(name="nogo"))
    with pytest.raises(ClusterError) as err2:
        local.up()
    assert "Go toolchain" in one_line(err2.value)
    assert not list(own_state_dir.iterdir())
    assert not list((tmp_path / "cache").glob("bin/*"))


# ---- the CLI ---------------------------------------------------------------------------------

def pvchaos_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO_ROOT / "bin" / "pvchaos"), *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_cli_cluster_up_list_down(own_state_dir: Path) -> None:
    directory = own_state_dir / "t1"
    try:
        up = pvchaos_cli("cluster", "up", "--name", "t1", "--zones", "2", "--nodes-per-zone", "1")
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"export KUBECONFIG={directory / 'kubeconfig'}"
        pids = recorded_pids(directory)
        assert all(pid_alive(p, str(directory)) for p in pids.values())  # outlived the CLI
        kube = connect(directory / "kubeconfig")
        try:
            zones = {zone_of(n) for n in kinds.list_objects(kube, "Node")[0]}
        finally:
            kube.api.close()
        assert zones == {"zone-a", "zone-b"}

        listed = pvchaos_cli("cluster", "list")
        assert listed.returncode == 0, listed.stderr
        (row,) = [ln for ln in listed.stdout.splitlines() if ln.startswith("t1\t")]
        assert "running" in row and "detached" in row

        down = pvchaos_cli("cluster", "down", "--name", "t1")
        assert down.returncode == 0, down.stderr
        assert "removed cluster t1" in down.stdout
        assert_nothing_left(directory, pids)
    finally:
        if directory.exists():
            from pvchaos.clusters.local.registry import destroy
            destroy(ClusterState.load(directory))


def test_cli_down_of_unknown_cluster_is_one_line_exit_2() -> None:
    res = pvchaos_cli("cluster", "down", "--name", "nope")
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "nope" in res.stderr


def test_cli_zero_zones_is_one_line_exit_2(own_state_dir: Path) -> None:
    res = pvchaos_cli("cluster", "up", "--name", "zero", "--zones", "0")
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "--zones" in res.stderr
    assert not list(own_state_dir.iterdir())


# ---- side by side ------------------------------------------------------------------------------

@pytest.mark.slow
def test_two_clusters_side_by_side() -> None:
    topo = Topology(zones=("zone-a", "zone-b"), nodes_per_zone=1)
    left = LocalCluster(LocalClusterConfig(name="left", topology=topo, provisioner=False))
    right = LocalCluster(LocalClusterConfig(name="right", topology=topo, provisioner=False))
    try:
        kubes = [connect(c.up().kubeconfig) for c in (left, right)]
        assert left.state is not None and right.state is not None
        assert not set(left.state.ports.values()) & set(right.state.ports.values())
        try:
            kinds.create(kubes[0], {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "only-left"}})
            assert kinds.get(kubes[0], "Node", "zone-a-1") is not None
            kubes[0].core.read_namespace("only-left")
            with pytest.raises(ApiException) as missing:  # separate etcds
                kubes[1].core.read_namespace("only-left")
            assert missing.value.status == 404
            for k in kubes:
                assert k.version.get_code().git_version == DEFAULT_K8S_VERSION
                assert [condition(n, "Ready") for n in kinds.list_objects(k, "Node")[0]] == ["True", "True"]
        finally:
            for k in kubes:
                k.api.close()
    finally:
        errors = []
        for c in (left, right):
            try:
                c.down()
            except Exception as exc:  # noqa: BLE001 - both must be downed; raised together
                errors.append(exc)
        if errors:
            raise ExceptionGroup("down failed", errors)
    assert not left.directory.exists() and not right.directory.exists()
