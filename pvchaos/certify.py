"""`pvchaos certify --driver-dir DIR`: a vendor's CSI driver installed, discovered, run
against the suites that apply, reported, and uninstalled.

Order (docs/certify.md): the directory is read and refused before anything starts
(pvchaos/certify_package.py); the kind cluster comes up with no storage of the
harness's; the images are loaded into every node, the manifests applied in name order,
and the driver waited for (bounded; pvchaos/clusters/vendor_install.py). Discovery reads
what the cluster shows; a profile in DIR is checked against it, and without one a
profile is generated from it. The suites run through `pvchaos run --backend existing`
against the cluster with that profile (so the driver's StorageClass reaches every
suite, and a suite needing a capability the driver lacks skips naming it). Then the
run's volumes must be gone, the manifests are deleted in reverse order, and the cluster
is removed unless --keep-cluster. certification.md and certification.json sit beside
the Allure report.

Exit codes: 0 every applicable suite passed and nothing disagreed or leaked; 1 a suite
failed, the profile disagreed with the cluster, or the run left volumes behind; 2 bad
input or an install that did not come up (one line), with the cluster removed.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import yaml

from pvchaos import certify_package as pkg
from pvchaos.certification import render_certification, results_from_allure
from pvchaos.clusters import arguments
from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.kind import KindBackend, default_gates
from pvchaos.clusters.options import Options, default_report_dir
from pvchaos.clusters.plugin_info import PluginChoice
from pvchaos.clusters.request import ClusterDefaults, ClusterRequest
from pvchaos.clusters.storage import VendorStorage
from pvchaos.clusters.topology import Topology
from pvchaos.clusters.vendor_install import (
    WAIT_TIMEOUT,
    Kubectl,
    cluster_objects,
    delete_manifests,
    leftovers,
    wait_installed,
)
from pvchaos.clusters.vendor_package import DriverPackage, MissingImage, load_package
from pvchaos.drivers.profile import DriverProfile, load_profile, parse_profile
from pvchaos.runner import run_request
from pvchaos.tools.shipped import builtin_suite
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

# The suites of each certification tier (docs/certify.md "Tiers"): core is what Kubernetes
# does with the driver's volumes when nothing breaks; disruption, what it does when nodes,
# zones and the driver's own node plugin fail; scale, many volumes at once. Every suite is
# driver-generic: a test that does not apply to the driver (its topology class, a
# capability it lacks) skips naming why.
TIERS: dict[str, tuple[str, ...]] = {
    "core": ("binding_modes", "csi_topology", "spreading", "capacity", "pv_affinity_mutation", "reclaim", "fs_group",
             "snapshots", "block_volumes", "expansion", "inline_ephemeral"),
    "disruption": ("node_failure", "attach_detach", "zone_outage", "real_kubelet", "csi_faults"),
    "scale": ("volume_stress",),
}
DEFAULT_TIERS = ("core", "disruption", "scale")
DEFAULT_SUITES = tuple(s for t in DEFAULT_TIERS for s in TIERS[t])
VERSION_LABELS = ("app.kubernetes.io/version", "version")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--driver-dir", required=True, type=arguments.existing_dir,
                   help="the vendor's package: *.yaml manifests, images/*.tar, an optional driver profile")
    p.add_argument("--backend", default="kind", choices=tuple(TARGETS),
                   help="kind: new clusters, the package installed into each (default); existing: a cluster with "
                        "the driver installed already (--kubeconfig)")
    p.add_argument("--kubeconfig", type=arguments.existing_file, help="the cluster of --backend existing")
    p.add_argument("--context", type=arguments.free_text)
    p.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION, type=arguments.k8s_version)
    p.add_argument("--zones", default="3", type=arguments.zones)
    # two per zone: the disruption tier moves a volume to another node of its zone after a node loss
    p.add_argument("--nodes-per-zone", type=arguments.nodes_per_zone, default=2)
    p.add_argument("--tiers", default=",".join(DEFAULT_TIERS), type=tier_list,
                   help="comma-separated tiers: core, disruption, scale (default: %(default)s)")
    p.add_argument("--suites", default=None, type=suite_list,
                   help="comma-separated suites instead of the tiers' (e.g. binding_modes,reclaim)")
    p.add_argument("--wait-timeout", type=wait_seconds, default=WAIT_TIMEOUT,
                   help="seconds the driver has to register and its pods to be Ready (default %(default)s)")
    p.add_argument("--report-dir", default=str(default_report_dir() / "certify"), type=arguments.writable_dir)
    p.add_argument("--keep-cluster", action="store_true", help="leave the kind cluster running afterwards")


def tier_list(text: str) -> str:
    """Comma-separated tier names."""
    names = str(text).split(",")
    unknown = [t for t in names if t not in TIERS]
    if not names or unknown:
        raise arguments.Bad(f"{text!r}: not tiers ({', '.join(repr(u) for u in unknown) or 'none given'}); "
                            f"use {', '.join(TIERS)}")
    return text


def chosen_suites(args: argparse.Namespace) -> tuple[str, ...]:
    """--suites where given, else the suites of --tiers in tier order."""
    if args.suites:
        return tuple(s for s in args.suites.split(",") if s)
    return tuple(dict.fromkeys(s for t in args.tiers.split(",") for s in TIERS[t]))


def tier_of(suite: str) -> str:
    """The tier a suite belongs to ("other" for one no tier names)."""
    return next((t for t, suites in TIERS.items() if suite in suites), "other")


def suite_list(text: str) -> str:
    """Comma-separated names of suites in suites/ (without `test_`)."""
    names = [s for s in str(text).split(",") if s]
    unknown = [s for s in names if not re.fullmatch(r"[a-z0-9_]+", s) or builtin_suite(s) is None]
    if not names or unknown:
        raise arguments.Bad(f"{text!r}: not suites of suites/ ({', '.join(repr(u) for u in unknown) or 'none given'})")
    return text


def wait_seconds(text: str) -> float:
    """Seconds from 5 to 3600."""
    if not re.fullmatch(r"[0-9]{1,4}(\.[0-9]+)?", str(text).strip()):
        raise arguments.Bad(f"{text!r} is not a number of seconds")
    value = float(text)
    if not 5 <= value <= 3600:
        raise arguments.Bad(f"{text} is out of range (5 to 3600 seconds)")
    return value


def reproduce_command(args: argparse.Namespace) -> str:
    argv = ["bin/pvchaos", "certify", "--driver-dir", str(args.driver_dir), "--backend", args.backend,
            *TARGETS[args.backend].reproduce_args(args)]
    if args.suites:
        argv += ["--suites", args.suites]
    elif args.tiers != ",".join(DEFAULT_TIERS):
        argv += ["--tiers", args.tiers]
    return shlex.join(argv)


def _label_version(objects: dict, package: DriverPackage, kubectl: Kubectl) -> tuple[str, str]:
    """The version a label states: a version label of the CSIDriver, else of a controller
    workload; the fallback where GetPluginInfo cannot be called."""
    labels = ((objects.get("csidriver") or {}).get("metadata") or {}).get("labels") or {}
    for key in VERSION_LABELS:
        if key in labels:
            return str(labels[key]), f"CSIDriver label {key}"
    for w in package.controllers:
        obj = kubectl.json(w.kind.lower(), w.name, "-n", w.namespace)
        wl = (obj.get("metadata") or {}).get("labels") or {}
        for key in VERSION_LABELS:
            if key in wl:
                return str(wl[key]), f"{w.ref} label {key}"
    return "unknown", "no version label on the CSIDriver or the controller"


def _first_registered(discovery: pkg.Discovery) -> str | None:
    """The worker certify asks the driver on: the first whose CSINode lists it."""
    return next((n.node for n in discovery.nodes if n.registered), None)


def _plugin_info(package: DriverPackage, discovery: pkg.Discovery,
                 target: Target) -> tuple[PluginChoice | None, str]:
    """GetPluginInfo of the node plugin on the first registered worker, or None and why it
    gave nothing: the target has no access to the nodes (--backend existing), no worker
    registers the driver, or the call failed or found no answer."""
    node = _first_registered(discovery)
    if node is None:
        return None, "GetPluginInfo not called: no worker registers the driver"
    try:
        choice = target.plugin_info(node, package.driver_name)
    except ClusterError as exc:
        return None, f"GetPluginInfo not called (node {node}): {exc}"
    return (choice, choice.source) if choice.info is not None else (None, choice.source)


def _version(objects: dict, package: DriverPackage, kubectl: Kubectl, discovery: pkg.Discovery,
             target: Target) -> tuple[str, str, str, list[str]]:
    """(version, where it was read, the name GetPluginInfo answered or "", findings): from
    GetPluginInfo where it answers, else the label, and the source says why."""
    choice, why = _plugin_info(package, discovery, target)
    if choice is None or choice.info is None:
        version, source = _label_version(objects, package, kubectl)
        return version, f"{source}; {why}", "", []
    findings = [choice.finding] if choice.finding else []
    return choice.info.vendor_version or "(empty vendor_version)", choice.source, choice.info.name, findings


def _driver_services(package: DriverPackage, discovery: pkg.Discovery, kubectl: Kubectl,
                     target: Target) -> pkg.Discovery:
    """Discovery with what the driver answers about its services: GetPluginCapabilities and
    NodeGetCapabilities from its node plugin on the first registered worker,
    ControllerGetCapabilities from whichever socket on that node or on a controller pod's
    node answers the driver's name (pvchaos-csi info). Where nothing can be asked, the
    table says why."""
    driver = package.driver_name
    node = _first_registered(discovery)
    if node is None:
        return replace(discovery, services_source="no worker registers the driver")
    try:
        choice = target.plugin_info(node, driver)
    except ClusterError as exc:
        return replace(discovery, services_source=str(exc))
    controller = choice.controller_capabilities(driver)
    asked = [node]
    for other in _controller_nodes(kubectl, package):
        if controller or other in asked:
            continue
        asked.append(other)
        try:
            controller = target.plugin_info(other, driver).controller_capabilities(driver)
        except ClusterError:
            continue
    info = choice.info
    return replace(discovery, plugin_capabilities=info.capabilities if info else None,
                   node_capabilities=info.node_capabilities if info else None,
                   controller_capabilities=controller if controller else (None if info is None else ()),
                   services_source=f"pvchaos-csi info on node {', '.join(asked)}")


def _controller_nodes(kubectl: Kubectl, package: DriverPackage) -> list[str]:
    """The nodes the package's controller pods run on (not its DaemonSets')."""
    nodes = []
    for ns in sorted({w.namespace for w in package.controllers}):
        for pod in kubectl.items("pods", "-n", ns):
            owners = (pod.get("metadata") or {}).get("ownerReferences") or []
            name = (pod.get("spec") or {}).get("nodeName")
            if name and not any(o.get("kind") == "DaemonSet" for o in owners) and name not in nodes:
                nodes.append(str(name))
    return nodes


def _profile(package: DriverPackage, discovery: pkg.Discovery, report_dir: Path) -> tuple[DriverProfile, Path, str]:
    if package.profile is not None:
        return load_profile(package.profile), package.profile, str(package.profile)
    data = pkg.generated_profile(discovery, package.storage_class)
    path = report_dir / "driver-profile.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return parse_profile(data, str(path), report_dir), path, f"generated from discovery ({path.name})"


def _load(directory: Path, need_images: bool) -> DriverPackage:
    """The package; a DIR that carries a `build.py` (the example packages do: their images
    are built here, not committed) has it run first, every time, so archives built from an
    older driver are never certified (the example's build.py does nothing when they are
    current)."""
    builder = directory / "build.py"
    try:
        if need_images and builder.is_file():
            raise MissingImage(f"{directory} builds its own images")
        return load_package(directory, need_images)
    except MissingImage as exc:
        if not builder.is_file():
            raise
        print(f"[pvchaos certify] {exc}; running {builder}", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, str(builder)], capture_output=True, text=True, timeout=3600, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()
            raise ClusterError(f"{builder}: exit {proc.returncode}: {tail[-1] if tail else ''}") from None
        return load_package(directory, need_images)


class Target(Protocol):
    """Where certify runs: a cluster with the package installed, how to reach it, how the
    suites reach it, and what is left to undo."""

    kubectl: Kubectl

    @staticmethod
    def check(args: argparse.Namespace) -> None:
        """Refuse arguments that do not fit this target (ClusterError, one line)."""
        ...

    def start(self) -> None:
        """Start the cluster and install the package (nothing where it is installed already)."""
        ...

    def run_options(self, base: Options) -> Options:
        """The suites' run options: where clusters come from and what storage they hold."""
        ...

    def plugin_info(self, node: str, driver: str) -> PluginChoice:
        """GetPluginInfo on a node; ClusterError where the target cannot reach nodes."""
        ...

    def finish(self, findings: list[str], keep: bool) -> None:
        """Uninstall what `start` installed (a manifest that cannot be deleted is a finding)
        and remove the cluster unless `keep`."""
        ...


@dataclass
class NewKindClusters:
    """Kind clusters pvchaos starts with the vendor's package as their storage: certify's
    own (discovery, GetPluginInfo, the uninstall check), which the suites run on
    (`--kind-cluster`), and every cluster of another shape or gates a suite asks for,
    which the kind provider starts with the same package (`--driver-package`)."""

    args: argparse.Namespace
    package: DriverPackage
    logs_dir: Path
    backend: KindBackend = field(init=False)
    kubectl: Kubectl = field(init=False)
    _asked: dict[tuple[str, str], PluginChoice] = field(default_factory=dict, init=False)
    _up: bool = field(default=False, init=False)
    loads_images = True  # every image the manifests run must be in images/*.tar (no registry)

    @staticmethod
    def check(args: argparse.Namespace) -> None:
        if args.kubeconfig or args.context:
            raise ClusterError("certify: --kubeconfig and --context are for --backend existing")

    def __post_init__(self) -> None:
        version = self.args.k8s_version
        defaults = ClusterDefaults(Topology.parse(self.args.zones, self.args.nodes_per_zone),
                                   default_gates(version), version,
                                   VendorStorage(self.package, self.args.wait_timeout))
        self.backend = KindBackend.for_request(ClusterRequest(), defaults, cluster=f"certify-{secrets.token_hex(3)}",
                                               detached=self.args.keep_cluster)
        self.backend.logs_dir = self.logs_dir
        self.kubectl = self.backend.kubectl()

    @staticmethod
    def reproduce_args(args: argparse.Namespace) -> list[str]:
        return ["--k8s-version", args.k8s_version, "--zones", args.zones, "--nodes-per-zone", str(args.nodes_per_zone)]

    def start(self) -> None:
        self.backend.up()  # images loaded, manifests applied, registration and Ready waited for
        self._up = True  # a failed up() has removed its cluster itself: nothing left to finish

    def run_options(self, base: Options) -> Options:
        return replace(base, backend="kind", kind_cluster=self.backend.cluster,
                       driver_package=str(self.package.directory), zones=self.args.zones,
                       nodes_per_zone=self.args.nodes_per_zone, k8s_version=self.args.k8s_version)

    def plugin_info(self, node: str, driver: str) -> PluginChoice:
        if (node, driver) not in self._asked:  # each node is asked once (a copy and a few execs)
            self._asked[(node, driver)] = self.backend.plugin_info(node, driver)
        return self._asked[(node, driver)]

    def finish(self, findings: list[str], keep: bool) -> None:
        if not self._up:  # never started, or up() failed and tore its cluster down
            return
        findings += delete_manifests(self.kubectl, self.package.manifests)
        if keep:
            print(f"[pvchaos certify] kept kind cluster {self.backend.cluster}: export KUBECONFIG="
                  f"{self.backend.kubeconfig}", file=sys.stderr)
            return
        self.backend.down()


@dataclass
class InstalledCluster:
    """A cluster the driver is installed in already (`--backend existing`): the suites run
    through the existing backend; pvchaos has no access to its nodes."""

    args: argparse.Namespace
    package: DriverPackage
    logs_dir: Path
    kubectl: Kubectl = field(init=False)
    loads_images = False  # the cluster pulls its own

    @staticmethod
    def check(args: argparse.Namespace) -> None:
        if not args.kubeconfig:
            raise ClusterError("certify --backend existing: give --kubeconfig of the cluster the driver is installed in")

    def __post_init__(self) -> None:
        self.kubectl = Kubectl(Path(self.args.kubeconfig), self.args.k8s_version, self.args.context)

    @staticmethod
    def reproduce_args(args: argparse.Namespace) -> list[str]:
        return ["--kubeconfig", str(args.kubeconfig)] + (["--context", args.context] if args.context else [])

    def start(self) -> None:
        workloads = [(w.kind, w.namespace, w.name) for w in self.package.workloads]
        waited = wait_installed(self.kubectl, self.package.driver_name, workloads, self.logs_dir,
                                self.args.wait_timeout)
        print(f"[pvchaos certify] {self.package.driver_name} registered and Ready in {waited:.0f}s", file=sys.stderr)

    def run_options(self, base: Options) -> Options:
        context = self.args.context or ""
        return replace(base, backend="existing", kubeconfig=str(self.kubectl.kubeconfig), context=context or None,
                       allow_disruptive=True, allow_contexts=(context,) if context else ())

    def plugin_info(self, node: str, driver: str) -> PluginChoice:
        raise ClusterError("--backend existing has no access to the nodes")

    def finish(self, findings: list[str], keep: bool) -> None:
        """The driver was installed by hand: it stays installed."""


TARGETS: dict[str, type[NewKindClusters] | type[InstalledCluster]] = {
    "kind": NewKindClusters, "existing": InstalledCluster}


def run(args: argparse.Namespace) -> int:
    report_dir = Path(args.report_dir).resolve()
    suites = chosen_suites(args)
    target_type = TARGETS[args.backend]
    target_type.check(args)
    package = _load(Path(args.driver_dir), need_images=target_type.loads_images)
    if package.profile is not None:  # a bad profile is refused before the cluster starts
        for warning in load_profile(package.profile).warnings:
            print(f"[pvchaos certify] driver profile: {warning}", file=sys.stderr)
    report_dir.mkdir(parents=True, exist_ok=True)
    # a run that ends in exit 2 must not leave an earlier run's verdict or logs looking current
    shutil.rmtree(report_dir / "certify-logs", ignore_errors=True)
    for stale in ("certification.md", "certification.json", "certification-behaviours.md", "driver-profile.yaml"):
        (report_dir / stale).unlink(missing_ok=True)
    findings: list[str] = []
    target: Target = target_type(args, package, report_dir / "certify-logs")
    with ExitStack() as stack:
        stack.callback(target.finish, findings, args.keep_cluster)
        target.start()
        kubectl = target.kubectl
        objects = cluster_objects(kubectl, package.driver_name, package.storage_class)
        discovery = pkg.discover(package.driver_name, objects["csidriver"], objects["csinodes"], objects["nodes"],
                                 objects["storage_class"])
        version, version_source, plugin_name, name_findings = _version(objects, package, kubectl, discovery, target)
        discovery = _driver_services(package, discovery, kubectl, target)
        findings += name_findings
        print(f"[pvchaos certify] version {version} ({version_source})", file=sys.stderr)
        profile, profile_path, profile_source = _profile(package, discovery, report_dir)
        disagreements = pkg.compare(profile, discovery)
        for d in disagreements:
            print(f"[pvchaos certify] profile disagrees: {d.line()}", file=sys.stderr)
        base = Options(profile=str(profile_path), suites=suites, workers="0", report_dir=report_dir)
        code = run_request(target.run_options(base))
        if code == 2:
            raise ClusterError(f"certify: the suites refused to run (exit 2); see {report_dir}")
        findings += leftovers(kubectl, package.driver_name)
        results = [json.loads(p.read_text()) for p in sorted((report_dir / "allure-results").glob("*-result.json"))]
        allure_dir = report_dir / "allure-results"
        (report_dir / "certification-behaviours.md").write_text(
            render_certification(profile, results_from_allure(allure_dir)))
        rows = pkg.suite_rows(results, suites, tier_of)
        tiers = tuple(dict.fromkeys(tier_of(s) for s in suites))
        capabilities = pkg.capability_rows(pkg.driver_capabilities(discovery, profile), results, tiers, tier_of, rows)
        cert = pkg.Certification(
            driver=package.driver_name, driver_version=version, version_source=version_source, plugin_name=plugin_name,
            k8s_version=objects["k8s_version"], backend=args.backend, discovered=discovery.table(),
            declared=pkg.declared_table(profile if package.profile is not None else None),
            disagreements=disagreements, rows=rows, findings=findings,
            recovery=pkg.recovery_figures(results), command=reproduce_command(args), profile_source=profile_source,
            capabilities=capabilities, tiers=tiers)
    # the ExitStack has uninstalled (its findings are in `findings`, the list the report holds)
    md, js = pkg.write_report(report_dir, cert)
    print(md.read_text())
    print(f"certification: {md} and {js}; Allure report: {report_dir / 'html' / 'index.html'}")
    return cert.exit_code()
