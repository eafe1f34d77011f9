"""The fixtures a suite uses: a cluster per the isolation model (clusters/pool.py), a
client, the run's driver, and a workspace whose objects are deleted afterwards.

Capabilities are decided before any cluster starts: a test that needs what the backend
or the driver lacks skips first, with a structured reason (capability and source as
Allure labels, for the report and the certification page), and a disruptive test that
would skip never costs a fresh cluster.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NoReturn

import allure
import pytest

from pvchaos.certification import EVIDENCE_LABEL, EXERCISED_LABEL, MISSING_LABEL, SOURCE_LABEL
from pvchaos.chaos import leaks
from pvchaos.clusters import providers
from pvchaos.clusters.backend import Capability, CapabilityMissing, ClusterError, ClusterHandle
from pvchaos.clusters.existing import disruption_refusal
from pvchaos.clusters.kind import KindBackend
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.local.registry import sweep_orphans
from pvchaos.clusters.options import Options, from_values
from pvchaos.clusters.pool import CannotProvide, ClusterPool, ClusterRequest, Teardown
from pvchaos.clusters.provider import Feature, ProvideHooks
from pvchaos.conformance import volume_evidence
from pvchaos.drivers.driver import Driver, driver_for, missing_for
from pvchaos.drivers.profile import DriverProfile
from pvchaos.kit.canaries import CANARIES, CanaryResult, first_failure, relied_on, run_canaries
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import kinds, spent
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.errors import CanaryFailed
from pvchaos.plugin import what_ran
from pvchaos.run_config import RunConfig, resolve
from pvchaos.tools.build import ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

WORKSPACE_KEY = pytest.StashKey[Workspace]()
CANARY_KEY = pytest.StashKey[CanaryResult]()  # the failed canary this test relies on, if any


def run_options(config: pytest.Config) -> Options:
    return from_values(config.getoption, pytest_side=True)


_RUN_CONFIG = pytest.StashKey[RunConfig]()


def run_config(config: pytest.Config) -> RunConfig:
    """This process's options, resolved once (topology, gates, version, profile, scale
    shape) and kept on the config: fixtures read it instead of parsing the strings again."""
    if _RUN_CONFIG not in config.stash:
        config.stash[_RUN_CONFIG] = resolve(run_options(config))
    return config.stash[_RUN_CONFIG]


def cluster_request(item: pytest.Item) -> ClusterRequest:
    marker = item.get_closest_marker("cluster")
    return ClusterRequest.from_marker(dict(marker.kwargs)) if marker else ClusterRequest()


def needed_capabilities(item: pytest.Item) -> list[str]:
    """Every `needs(...)` word of the test, its class and its module, once each."""
    return list(dict.fromkeys(c for mark in item.iter_markers("needs") for c in mark.args))


def declared_canaries(item: pytest.Item) -> list[str] | None:
    """The canaries a test names with `relies_on(...)` (closest marker wins), or None."""
    marker = item.get_closest_marker("relies_on")
    return list(marker.args) if marker is not None else None


def skip_for(missing: list[CapabilityMissing]) -> NoReturn:
    """Skip with the reasons a person reads and the labels a report reads."""
    for m in missing:
        allure.dynamic.label(MISSING_LABEL, m.capability)
        allure.dynamic.label(SOURCE_LABEL, m.source)
    pytest.skip("; ".join(map(str, missing)))


@pytest.fixture(scope="session")
def driver_profile(pytestconfig: pytest.Config) -> DriverProfile | None:
    """The driver profile of this run (--profile), read once per worker."""
    return run_config(pytestconfig).profile


@pytest.fixture(scope="session")
def cluster_pool(pytestconfig: pytest.Config) -> Iterator[ClusterPool]:
    hook = pytestconfig.hook

    def configure(cfg: LocalClusterConfig | KindBackend) -> LocalClusterConfig | KindBackend:
        if isinstance(cfg, KindBackend):
            return hook.pytest_pvchaos_kind_config(config=pytestconfig, backend=cfg) or cfg
        return hook.pytest_pvchaos_local_config(config=pytestconfig, cluster_config=cfg) or cfg

    def started(cluster: LocalCluster | KindBackend, handle: ClusterHandle) -> None:
        if isinstance(cluster, KindBackend):
            hook.pytest_pvchaos_kind_cluster_started(config=pytestconfig, backend=cluster, handle=handle)
        else:
            hook.pytest_pvchaos_cluster_started(config=pytestconfig, local=cluster, handle=handle)

    resolved = run_config(pytestconfig)
    pool = ClusterPool(resolved.options, hooks=ProvideHooks(configure, started), defaults=resolved.cluster_defaults)
    if providers.has(pool.options.backend, Feature.HOST_PROCESSES):
        removed = sweep_orphans()  # clusters of runs that were killed without teardown
        if removed:
            _tell_terminal(pytestconfig, f"[pvchaos] removed orphaned cluster(s) of a killed run: "
                                         f"{', '.join(removed)}")
    try:
        yield pool
    finally:
        pool.close()


def _tell_terminal(config: pytest.Config, line: str) -> None:
    """A line on the real terminal (stderr), not into a test's captured output."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    if capman is None:
        print(line, file=sys.stderr)
        return
    with capman.global_and_fixture_disabled():
        print(line, file=sys.stderr, flush=True)


@pytest.fixture
def cluster(request: pytest.FixtureRequest, cluster_pool: ClusterPool,
            driver_profile: DriverProfile | None) -> Iterator[ClusterHandle]:
    """The cluster this test runs on, per the isolation model in clusters.pool."""
    item = request.node
    want = cluster_request(item)
    disruptive = item.get_closest_marker("disruptive") is not None
    try:
        capabilities = cluster_pool.capabilities(want)  # known without starting a new cluster
        if disruptive and Capability.OWNED not in capabilities:  # a cluster we did not create: safety first
            _refuse_disruption(cluster_pool, cluster_pool.shared(want), item)
        details = cluster_pool.missing_details(want)
        missing = [m if m.detail or m.capability not in details else replace(m, detail=details[m.capability])
                   for c in needed_capabilities(item)
                   if (m := missing_for(capabilities, cluster_pool.options.backend, driver_profile, c))]
        if missing:
            skip_for(missing)
        teardown: Teardown | None = None
        if disruptive and (known := _known_canary_failure(request, want)) is not None:
            raise known  # an error at set-up: no fresh cluster is started to learn it again
        with spent.charged(spent.CLUSTERS):  # the run's summary splits this out of the tests' time
            if disruptive:
                handle, teardown = cluster_pool.fresh(want)
            else:
                handle = cluster_pool.shared(want)
    except CannotProvide as exc:
        pytest.skip(str(exc))
    except ClusterError as exc:
        pytest.fail(f"cluster could not be provided: {exc}", pytrace=False)
    try:
        allure.dynamic.parameter("backend", handle.backend, excluded=True)
        allure.dynamic.parameter("kubernetes", handle.k8s_version, excluded=True)
        if driver_profile is not None:
            allure.dynamic.parameter("driver", driver_profile.name, excluded=True)
        yield handle
    finally:
        if teardown is not None:
            with spent.charged(spent.CLUSTERS):
                teardown()


def _refuse_disruption(pool: ClusterPool, handle: ClusterHandle, item: pytest.Item) -> None:
    """Skip a disruptive test on a cluster pvchaos did not create, unless allowed."""
    refusal = disruption_refusal(handle, pool.options.allow_disruptive, pool.options.allow_contexts)
    if refusal:
        pytest.skip(f"{refusal} ({item.name})")


@pytest.fixture
def kube(request: pytest.FixtureRequest, cluster: ClusterHandle) -> Iterator[Kube]:
    k = connect(cluster.kubeconfig, cluster.context)
    what_ran.record(request.config, cluster, k)  # once per cluster: its real command lines, for the report
    try:
        yield k
    finally:
        k.api.close()


@pytest.fixture
def driver(cluster: ClusterHandle, kube: Kube, driver_profile: DriverProfile | None) -> Driver:
    """The storage driver of this run: the profile's, or the backend's own test provisioners."""
    return driver_for(cluster, driver_profile, kube)


@pytest.fixture
def ws(request: pytest.FixtureRequest, kube: Kube, cluster: ClusterHandle, driver: Driver) -> Iterator[Workspace]:
    """A namespace and object factory for this test; everything is deleted afterwards."""
    cleanup = Cleanup(f"cleanup of {request.node.name}")
    disruptive = request.node.get_closest_marker("disruptive") is not None
    before = leaks.node_state(kube) if disruptive else None
    failed = _canary_verdict(request, kube, cluster, driver)
    if failed is not None:
        request.node.stash[CANARY_KEY] = failed  # the test body is replaced by this verdict
    workspace: Workspace | None = None
    readings = EvidenceReadings()
    try:
        workspace = Workspace(kube, cluster, request.node.name, cleanup, driver)
        workspace.before_delete.append(functools.partial(readings.read, workspace))
        request.node.stash[WORKSPACE_KEY] = workspace
        yield workspace
    finally:
        if workspace is not None:
            _record_evidence(request.node, workspace, readings)
        cleanup.run()
    if before is not None:
        leaks.assert_restored(kube, cluster, before)


@dataclass
class EvidenceReadings:
    """The readings of one test's driver volumes; a failed read is kept for the label, never
    raised (evidence is a reading, not a check)."""

    taken: list[volume_evidence.Evidence] = field(default_factory=list)
    error: str = ""

    def read(self, ws: Workspace, _kind: str = "") -> None:
        try:
            self.taken.append(volume_evidence.evidence(
                ws.driver.name, ws.list("PersistentVolumeClaim"), kinds.list_objects(ws.kube, "PersistentVolume")[0],
                kinds.list_objects(ws.kube, "VolumeAttachment")[0], ws.list("Pod"),
                ws.cluster.has(Capability.REAL_KUBELET)))
        except Exception as exc:  # noqa: BLE001 - a reading that failed is said, not raised
            self.error = f"not read: {type(exc).__name__}: {exc}"


def _record_evidence(item: pytest.Item, ws: Workspace, readings: EvidenceReadings) -> None:
    """What the test did with the driver's volumes: the readings taken before it deleted its
    claims or pods, and one now, before teardown deletes the rest; as Allure labels a
    certification counts (pvchaos/conformance/volume_evidence.py). The test's
    `exercises(...)` words join them."""
    readings.read(ws)
    if not readings.taken:
        allure.dynamic.label(EVIDENCE_LABEL, readings.error or "not read")
        return
    found = functools.reduce(volume_evidence.Evidence.merge, readings.taken)
    allure.dynamic.label(EVIDENCE_LABEL, found.line())
    declared = [w for mark in item.iter_markers("exercises") for w in mark.args]
    for word in dict.fromkeys([*found.exercised(), *(declared if found.provisioned else [])]):
        allure.dynamic.label(EXERCISED_LABEL, word)


@dataclass
class CanaryBook:
    """This worker's canary verdicts: per cluster (each is checked once), and the failures
    per cluster configuration, so a disruptive test does not start a fresh cluster of a
    configuration already seen broken in the way it relies on."""

    by_cluster: dict[str, dict[str, CanaryResult]] = field(default_factory=dict)
    failed_by_request: dict[ClusterRequest, dict[str, CanaryResult]] = field(default_factory=dict)

    def record(self, request: ClusterRequest, cluster: str, results: dict[str, CanaryResult]) -> None:
        self.by_cluster[cluster] = results
        failed = {name: r for name, r in results.items() if not r.ok}
        if failed:
            self.failed_by_request.setdefault(request, {}).update(failed)


@pytest.fixture(scope="session")
def canary_results() -> CanaryBook:
    return CanaryBook()


def _canaries_relied_on(item: pytest.Item) -> tuple[str, ...]:
    return relied_on(needed_capabilities(item), declared_canaries(item))


def _known_canary_failure(request: pytest.FixtureRequest, want: ClusterRequest) -> CanaryFailed | None:
    """A failure already seen on a cluster of this configuration, before a new one is started."""
    if request.config.getoption("no_canaries"):
        return None
    book: CanaryBook = request.getfixturevalue("canary_results")
    failed = first_failure(book.failed_by_request.get(want, {}), _canaries_relied_on(request.node))
    if failed is None:
        return None
    return CanaryFailed(f"canary {failed.name} failed on an earlier cluster of this configuration "
                        f"({want.describe()}), so no cluster was started for this test: {failed.diagnosis}")


def _canary_verdict(request: pytest.FixtureRequest, kube: Kube, cluster: ClusterHandle,
                    driver: Driver) -> CanaryResult | None:
    """Run the cluster's canaries the first time a test uses it; the failed one this test relies on."""
    if request.config.getoption("no_canaries"):
        return None
    book: CanaryBook = request.getfixturevalue("canary_results")
    if cluster.name not in book.by_cluster:
        with allure.step(f"canaries on cluster {cluster.name}"):
            results = run_canaries(kube, cluster, driver, CANARIES)
            book.record(cluster_request(request.node), cluster.name, results)
            allure.attach("\n".join(f"{r.name}: {'ok' if r.ok else 'FAILED'} after {r.seconds:.2f}s"
                                     + (f": {r.diagnosis}" if r.diagnosis else "") for r in results.values()),
                          name="canaries", attachment_type=allure.attachment_type.TEXT)
    return first_failure(book.by_cluster[cluster.name], _canaries_relied_on(request.node))


@pytest.fixture(scope="session")
def kubectl() -> Path:
    """A kubectl built with the default version (what `kubectl patch` tests run)."""
    return ensure_binaries(DEFAULT_K8S_VERSION, only=["kubernetes"]).kubectl
