"""PVC storms at scale (issue 12): hundreds of claims and pods at once, mixed
(WaitForFirstConsumer zonal, Immediate with allowedTopologies, static local PVs,
StatefulSets), measured and judged from one snapshot at the end (conformance.storm).

Marked `scale`: deselected unless `--scale` (`pvchaos run --scale --suites scale`);
`--scale-size NODESxPODS` sizes the storms (default 60x120 so it fits CI; bench/storm.py
runs the issue's 1000x2000). Each test gets a fresh cluster of that size with the
controller-manager's and scheduler's client QPS/burst raised (storm_plan.STORM_QPS) and the
scheduler's percentageOfNodesToScore lowered (storm_plan.STORM_NODES_TO_SCORE).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import allure
import pytest

from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.pool import ClusterPool, ClusterRequest
from pvchaos.clusters.topology import Topology
from pvchaos.drivers.driver import HarnessDriver
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.growth import growth_line, plot
from pvchaos.kit.storm import StormResult, run_storm
from pvchaos.kit.storm_plan import StormShape, cluster_marker_options, suite_shape
from pvchaos.kit.workspace import Workspace
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import connect

pytestmark = [allure.epic("Scale"), allure.feature("PVC storms"), pytest.mark.scale, pytest.mark.disruptive,
              pytest.mark.needs("zones", "dynamic-zonal", "static-pv", "owned")]
TIMEOUT = 600.0
GROWTH = (0.25, 0.5, 1.0)  # the growth curve's sizes, as fractions of --scale-size


def _shape(config: pytest.Config, zones: list[str]) -> StormShape:
    return suite_shape(config.getoption("scale_size"), tuple(zones))


def _record(result: StormResult, name: str = "storm") -> None:
    """Measurements on the result, the full text attached, then the verdict."""
    measure.seconds(f"{name}: all Bound and Running", result.storm_seconds)
    measure.note(f"{name}: pods/s with volumes", f"{result.pods_per_second:.1f}")
    if result.ratio is not None:
        measure.note(f"{name}: with/without volumes ratio", f"{result.ratio:.2f}")
    measure.note(f"{name}: PV binding rate (claims/s)", f"{result.bind_rate:.1f}")
    measure.note(f"{name}: peak memory MiB", f"{result.peak_mib:.0f}")
    measure.note(f"{name}: load average", " ".join(f"{v:.2f}" for v in result.load))
    text = "\n".join(result.lines())
    allure.attach(text, name=f"{name} measurements", attachment_type=allure.attachment_type.TEXT)
    print(text)


@allure.story("a storm of claims and pods: every claim Bound, every pod Running where its volumes allow")
@pytest.mark.relies_on("binder", "scheduler", "volume-binding", "provisioner")
def test_storm(ws: Workspace, request: pytest.FixtureRequest) -> None:
    result = run_storm(ws, _shape(request.config, ws.zones()), timeout=TIMEOUT)
    _record(result)
    x.expect(not result.violations, "after the storm:\n" + "\n".join(result.violations))


@allure.story("a zone outage and a scheduler restart mid-storm: invariants hold, undecided pods go to surviving zones")
@pytest.mark.needs("node-failure", "component-restart")
@pytest.mark.relies_on("binder", "scheduler", "volume-binding", "provisioner", "node-lifecycle")
def test_storm_under_chaos(ws: Workspace, request: pytest.FixtureRequest) -> None:
    result = run_storm(ws, _shape(request.config, ws.zones()), chaos=True, timeout=TIMEOUT, baseline=False)
    _record(result, "storm under chaos")
    x.expect(not result.violations, "after the storm with a zone down and a scheduler restart:\n"
             + "\n".join(result.violations))


@allure.story("the storm at three sizes: throughput and memory against size, and how cost grows")
def test_growth_curve(cluster_pool: ClusterPool, request: pytest.FixtureRequest) -> None:
    if not cluster_pool.per_request:
        pytest.skip(f"backend {cluster_pool.options.backend}: the growth curve starts local clusters of its own")
    full = suite_shape(request.config.getoption("scale_size"), Topology.parse(cluster_pool.options.zones).zones)
    results = []
    for fraction in GROWTH:
        shape = StormShape(nodes=max(len(full.zones), round(full.nodes * fraction)), zones=full.zones,
                           pods=max(1, round(full.pods * fraction)), extra_claim_every=full.extra_claim_every)
        with allure.step(f"storm of {shape.describe()}"):
            results.append(_storm_on_fresh_cluster(cluster_pool, shape, request.node.name))
            _record(results[-1], f"{shape.node_count} nodes")
    line = growth_line(results)
    measure.note("growth", line)
    with tempfile.TemporaryDirectory() as tmp:
        png = plot(results, Path(tmp) / "storm-growth.png")
        allure.attach.file(str(png), name="storm growth", attachment_type=allure.attachment_type.PNG)
    print(line)
    for r in results:
        x.expect(not r.violations, f"after the storm of {r.shape}:\n" + "\n".join(r.violations))


def _storm_on_fresh_cluster(pool: ClusterPool, shape: StormShape, test: str) -> StormResult:
    """One storm on a cluster of its own size, downed right after."""
    try:
        handle, teardown = pool.fresh(ClusterRequest.from_marker(cluster_marker_options(shape)))
    except ClusterError as exc:
        pytest.fail(f"cluster for {shape.describe()} could not be provided: {exc}", pytrace=False)
    kube = connect(handle.kubeconfig, handle.context)
    try:  # the cluster is removed whole right after: no object-by-object cleanup
        return run_storm(Workspace(kube, handle, test, Cleanup(test), HarnessDriver(handle)), shape, timeout=TIMEOUT)
    finally:
        kube.api.close()
        if teardown is not None:
            teardown()
