"""The pytest plugin: options, clusters per worker, a workspace per test, invariants
after every suite test, and evidence attached to Allure only when a test fails."""

from __future__ import annotations

import dataclasses
import signal
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import allure
import pytest
import yaml

from clusters.backend import ClusterError, ClusterHandle
from conformance import invariants
from kube import kinds, snapshot
from kube.cleanup import Cleanup
from kube.client import Kube, connect
from kube.errors import InvariantViolation
from pvchaos import faults
from clusters.existing import disruption_refusal
from clusters.local.registry import sweep_orphans
from pvchaos.profiles import DriverProfile, effective_capabilities, load_profile, skip_reason
from clusters.options import Options, add_options, from_values
from clusters.pool import CannotProvide, ClusterPool, ClusterRequest
from kube.kinds import event_lines
from kube.wait import describe
from pvchaos.workspace import Workspace
from tools.build import ensure_binaries
from tools.versions import DEFAULT_K8S_VERSION

WORKSPACE_KEY = pytest.StashKey[Workspace]()
EXEMPT_KEY = pytest.StashKey[set[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("pvchaos", "pvchaos cluster options").addoption, pytest_side=True)


def _options(config: pytest.Config) -> Options:
    return from_values(config.getoption, pytest_side=True)


def pytest_configure(config: pytest.Config) -> None:
    # SIGTERM (CI cancelling, `kill`) takes the same orderly path as Ctrl-C.
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def driver_profile(pytestconfig: pytest.Config) -> DriverProfile | None:
    """The driver profile of this run (--profile), read once per worker."""
    path = pytestconfig.getoption("profile")
    return load_profile(path) if path else None


@pytest.fixture(scope="session")
def cluster_pool(pytestconfig: pytest.Config) -> Iterator[ClusterPool]:
    pool = ClusterPool(_options(pytestconfig))
    if pool.options.backend == "local":
        for name in sweep_orphans():  # clusters of runs that were killed without teardown
            print(f"[pvchaos] removed orphaned cluster {name}")
    try:
        yield pool
    finally:
        pool.close()


def _request_of(item: pytest.Item) -> ClusterRequest:
    marker = item.get_closest_marker("cluster")
    return ClusterRequest.from_marker(dict(marker.kwargs)) if marker else ClusterRequest()


@pytest.fixture
def cluster(request: pytest.FixtureRequest, cluster_pool: ClusterPool,
            driver_profile: DriverProfile | None) -> Iterator[ClusterHandle]:
    """The cluster this test runs on, per the isolation model in clusters.pool."""
    item = request.node
    want = _request_of(item)
    disruptive = item.get_closest_marker("disruptive") is not None
    teardown = None
    try:
        if disruptive:
            handle, teardown = cluster_pool.fresh(want)
        else:
            handle = cluster_pool.shared(want)
    except CannotProvide as exc:
        pytest.skip(str(exc))
    except ClusterError as exc:
        pytest.fail(f"cluster could not be provided: {exc}", pytrace=False)
    try:
        if disruptive and not handle.has("owned"):
            refusal = disruption_refusal(handle, cluster_pool.options.allow_disruptive,
                                         cluster_pool.options.allow_contexts)
            if refusal:
                pytest.skip(f"{refusal} ({item.name})")
        profile = driver_profile
        if profile is not None:
            handle = _with_driver(handle, profile)
        needed = [c for mark in item.iter_markers("needs") for c in mark.args]  # module and test marks
        if needed:
            missing = handle.missing(*dict.fromkeys(needed))
            if missing:
                reasons = [(skip_reason(profile, m) if profile is not None else None) or
                           f"backend {handle.backend}: no {m}" for m in missing]
                pytest.skip("; ".join(reasons))
        _allure_environment(handle)
        yield handle
    finally:
        if teardown is not None:
            teardown()


def _with_driver(handle: ClusterHandle, profile: DriverProfile) -> ClusterHandle:
    """The cluster as this driver sees it: capabilities limited by the profile, and the
    driver's provisioner in place of the harness's zonal test driver."""
    provisioner = (profile.storage_class or {}).get("provisioner") or profile.name
    return dataclasses.replace(
        handle, capabilities=effective_capabilities(handle.capabilities, profile),
        zonal_class_provisioner=provisioner if profile.dynamic else None,
        description={**handle.description, "driver": profile.name})


def _allure_environment(handle: ClusterHandle) -> None:
    allure.dynamic.parameter("backend", handle.backend, excluded=True)
    allure.dynamic.parameter("kubernetes", handle.k8s_version, excluded=True)


@pytest.fixture
def kube(cluster: ClusterHandle) -> Iterator[Kube]:
    k = connect(cluster.kubeconfig, cluster.context)
    try:
        yield k
    finally:
        k.api.close()


@pytest.fixture
def ws(request: pytest.FixtureRequest, kube: Kube, cluster: ClusterHandle) -> Iterator[Workspace]:
    """A namespace and object factory for this test; everything is deleted afterwards."""
    cleanup = Cleanup(f"cleanup of {request.node.name}")
    disruptive = request.node.get_closest_marker("disruptive") is not None
    before = faults.node_state(kube) if disruptive else None
    try:
        workspace = Workspace(kube, cluster, request.node.name, cleanup)
        request.node.stash[WORKSPACE_KEY] = workspace
        yield workspace
    finally:
        cleanup.run()
    if before is not None:
        faults.assert_restored(kube, cluster, before)


@pytest.fixture(scope="session")
def kubectl() -> Path:
    """A kubectl built with the default version (what `kubectl patch` tests run)."""
    return ensure_binaries(DEFAULT_K8S_VERSION, only=["kubernetes"]).kubectl


@pytest.fixture
def exempt_from_invariants(request: pytest.FixtureRequest) -> set[str]:
    """Pods ("namespace/name") a test knowingly placed against an invariant."""
    exempt: set[str] = set()
    request.node.stash[EXEMPT_KEY] = exempt
    return exempt


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After a passing test body, the cluster invariants must hold too."""
    if item.path.parent.name == "suites":  # one line per suite on the report's overview
        allure.dynamic.parent_suite(item.path.stem.removeprefix("test_"))
    outcome = yield
    ws = item.stash.get(WORKSPACE_KEY, None)
    if outcome.excinfo is not None or ws is None:
        return
    exempt = ws.exempt_pods | item.stash.get(EXEMPT_KEY, set())
    violations = invariants.check(snapshot.take(ws.kube), exempt)
    if violations:
        outcome.force_exception(InvariantViolation(
            "cluster invariants violated after the test:\n" + "\n".join(f"- {v}" for v in violations)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        ws = item.stash.get(WORKSPACE_KEY, None)
        if ws is not None:
            _attach_evidence(ws)


def _attach_evidence(ws: Workspace) -> None:
    """Objects, events and scheduler messages of the failed test, as Allure attachments."""
    try:
        docs = []
        for kind in ("Pod", "PersistentVolumeClaim", "StatefulSet"):
            docs += [describe(o) for o in ws.list(kind)]
        for kind, name in ws.cluster_scoped:
            obj = ws.get(kind, name)
            if obj:
                docs.append(describe(obj))
        allure.attach("\n---\n".join(docs) or "(none)", "objects.yaml", allure.attachment_type.YAML)
        events = kinds.list_objects(ws.kube, "Event", ws.namespace)[0]
        allure.attach("\n".join(event_lines(events)) or "(none)", "events.txt", allure.attachment_type.TEXT)
        failed = [e for e in events if e.get("reason") == "FailedScheduling"]
        if failed:
            allure.attach("\n".join(event_lines(failed)), "FailedScheduling.txt", allure.attachment_type.TEXT)
        nodes = [{"name": n["metadata"]["name"], "labels": n["metadata"].get("labels"),
                  "taints": (n.get("spec") or {}).get("taints")} for n in kinds.list_objects(ws.kube, "Node")[0]]
        allure.attach(yaml.safe_dump(nodes, sort_keys=False), "nodes.yaml", allure.attachment_type.YAML)
    except Exception as exc:  # noqa: BLE001 - evidence is best effort; the failure stands
        allure.attach(f"could not gather evidence: {exc}", "evidence-error.txt", allure.attachment_type.TEXT)

