"""The pvchaos pytest plugin, registered through the `pytest11` entry point: installing
pvchaos is enough for a suite in any repository to get its options, markers, fixtures
(`cluster`, `kube`, `driver`, `ws`, `kubectl`), hooks (hookspecs.py), the cluster
invariants after every test that used a workspace, evidence on failure, and the CSI calls
of a test's volumes on every test that had claims (csi_calls.py).
See docs/writing-suites.md.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import allure
import pluggy
import pytest

from pvchaos import moved
from pvchaos.clusters import providers
from pvchaos.clusters.backend import Capability
from pvchaos.clusters.options import add_options, check_feature_gates, check_options, from_values
from pvchaos.clusters.provider import Feature
from pvchaos.conformance import invariants
from pvchaos.kit.canaries import CANARIES
from pvchaos.kit.storm_plan import cluster_marker_options
from pvchaos.kube import snapshot
from pvchaos.kube.errors import CanaryFailed, InvariantViolation
from pvchaos.plugin import (
    csi_calls,
    evidence,
    hookspecs,
    interrupts,
    long_tests,
    quick,
    sharding,
    summary,
    upgrade_options,
)
from pvchaos.plugin.fixtures import (
    CANARY_KEY,
    WORKSPACE_KEY,
    canary_results,
    cluster,
    cluster_pool,
    cluster_request,
    declared_canaries,
    driver,
    driver_profile,
    kube,
    kubectl,
    needed_capabilities,
    run_config,
    ws,
)
from pvchaos.run_config import available_memory_mib, resolve, scale_problem
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

moved.install()  # suites written against the old top-level names still import, with a warning

__all__ = ["canary_results", "cluster", "cluster_pool", "driver", "driver_profile", "kube", "kubectl",  # the fixtures
           "scale_problem", "ws"]

MARKERS = (
    "disruptive: injects faults (nodes, zones, labels, component restarts); runs on a cluster of its own",
    "scale: a PVC storm at scale (suites/test_scale.py); deselected unless --scale is given, and its "
    "cluster is sized by --scale-size",
    "stress: many pods with a volume each on one node, timed (suites/test_volume_stress.py; --stress-pods); "
    "certify's scale tier",
    "needs(*capabilities): the capabilities a test requires (clusters.backend.Capability); "
    "it skips with a reason without them, and an unknown word is a collection error",
    "cluster(**options): the local cluster this test needs (feature gates, disabled controllers...)",
    "exercises(*capabilities): driver capabilities a passing test exercises beyond what its volumes show "
    "(capacity, volume-limits, expansion, fsgroup...): a certification counts it for them (docs/certify.md)",
    "relies_on(*canaries): the canaries this test relies on (pvchaos/kit/canaries.py), instead of those its "
    "needs(...) imply; a failed one fails the test at once with its diagnosis",
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    pluginmanager.register(summary, "pvchaos-summary")  # the session-end table (summary.py)
    pluginmanager.register(sharding, "pvchaos-sharding")  # --shard K/N, applied after every other deselection
    pluginmanager.register(long_tests, "pvchaos-long")  # tests marked long run only with --long
    pluginmanager.register(quick, "pvchaos-quick")  # --quick: each suite's core test only


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("pvchaos", "pvchaos cluster options").addoption, pytest_side=True)
    upgrade_options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    # SIGTERM (CI cancelling, `kill`) takes the same orderly path as Ctrl-C, once.
    interrupts.install(config)
    upgrade_options.configure(config, check=not interrupts.is_worker(config))
    if not interrupts.is_worker(config):
        _check_options(config)


@pytest.hookimpl(hookwrapper=True, trylast=True)  # inside xdist's wrapper: before it sends the outcome
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Iterator[None]:
    yield
    interrupts.worker_finished(session, exitstatus)


def _check_options(config: pytest.Config) -> None:
    """Input a cluster start would refuse is refused once, here, not by every test."""
    opts = from_values(config.getoption, pytest_side=True)
    try:
        check_options(opts)
        resolve(opts, read_profile=False)  # topology, gates, version, scale shape: parsed once, here
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if opts.scale:
        problem = scale_problem(opts, available_memory_mib())
        if problem:
            raise pytest.UsageError(problem)
    if providers.has(opts.backend, Feature.HOST_PROCESSES) and opts.feature_gates:
        try:
            check_feature_gates(opts.feature_gates, opts.k8s_version or DEFAULT_K8S_VERSION)
        except (ValueError, RuntimeError) as exc:
            raise pytest.UsageError(str(exc)) from None


def _select_scale(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked scale run only with --scale, each on a cluster sized by --scale-size."""
    opts = run_config(config).options
    scale = [i for i in items if i.get_closest_marker("scale") is not None]
    if not opts.scale:
        if scale:
            config.hook.pytest_deselected(items=scale)
            items[:] = [i for i in items if i.get_closest_marker("scale") is None]
        return
    shape = run_config(config).scale_shape if scale_problem(opts, float("inf")) is None else None
    if shape is not None:  # else the test reports the problem
        marker = pytest.mark.cluster(**cluster_marker_options(shape))
        for item in scale:
            item.add_marker(marker)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A typo in `needs(...)` or in a `cluster(...)` option fails the collection with one
    line, instead of silently skipping the test later. The upgrade suite is deselected
    unless an upgrade was asked for, the scale suite unless --scale."""
    upgrade_options.deselect(config, items)
    _select_scale(config, items)
    problems: list[str] = []
    for item in items:
        for word in needed_capabilities(item):
            try:
                Capability.parse(word)
            except ValueError as exc:
                problems.append(f"{item.nodeid}: needs({word!r}): {exc}")
        try:
            cluster_request(item)
        except ValueError as exc:
            problems.append(f"{item.nodeid}: {exc}")
        unknown = [w for w in declared_canaries(item) or () if w not in CANARIES]
        if unknown:
            problems.append(f"{item.nodeid}: relies_on({', '.join(map(repr, unknown))}): known: {', '.join(CANARIES)}")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise pytest.UsageError(problems[0] + more)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> None:
    """A test whose cluster failed a canary it relies on does not run: it fails with the
    canary's diagnosis, in seconds instead of after its own timeouts."""
    failed = pyfuncitem.stash.get(CANARY_KEY, None)
    if failed is not None:
        raise CanaryFailed(f"canary {failed.name} failed on this cluster, so the test did not run: {failed.diagnosis}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, pluggy.Result[None], None]:
    """After a passing test body, the cluster invariants must hold too."""
    if "cluster" in getattr(item, "fixturenames", ()):  # one line per suite module on the report's overview
        allure.dynamic.parent_suite(item.path.stem.removeprefix("test_"))
    outcome = yield
    workspace = item.stash.get(WORKSPACE_KEY, None)
    if outcome.excinfo is not None or workspace is None:
        return
    violations = invariants.check(snapshot.take(workspace.kube), workspace.exempt_pods)
    if violations:
        outcome.force_exception(InvariantViolation(
            "cluster invariants violated after the test:\n" + "\n".join(f"- {v}" for v in violations)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    workspace = item.stash.get(WORKSPACE_KEY, None)
    if report.when == "call" and workspace is not None:
        csi_calls.attach_csi_calls(workspace)  # passed or failed: what the driver was asked
        if report.failed:
            evidence.attach(workspace)
