"""The volume-limit invariant catches a scheduler that ignores volume limits (issue 36).

A local cluster whose CSINode count is 1 and whose kube-scheduler runs without
NodeVolumeLimits (the `nodevolumelimits` breakage, as broken_cluster.py makes it) takes
two pods with two volumes of the driver on one node; once both volumes are attached, the
invariant the plugin checks after every test (conformance/invariants.py over
kube/snapshot.py) must report the node, and the same check on the healthy configuration's
outcome (one pod placed, the other Unschedulable) must not. About 20 s (a cluster start,
two provisions and attaches); tier `matrix`, on request, with the other breakage runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import allure
import pytest

from pvchaos.clusters.csi import CsiOptions
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.topology import Topology
from pvchaos.conformance import invariants
from pvchaos.kit import expect as x
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds, snapshot
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.client import connect
from pvchaos.kube.wait import wait_for_state

pytestmark = [allure.epic("Self-verification"), allure.feature("Invariants"), pytest.mark.slow]


@pytest.fixture
def ws(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Workspace]:
    mp = pytest.MonkeyPatch()
    mp.setenv("PVCHAOS_STATE_DIR", str(tmp_path_factory.mktemp("limits")))
    local = LocalCluster(LocalClusterConfig(name="nolimits", topology=Topology(zones=("zone-a",), nodes_per_zone=1),
                                            csi=CsiOptions(max_volumes_per_node=1),
                                            disabled_scheduler_plugins=("NodeVolumeLimits",)))
    try:
        handle = local.up()
        kube = connect(handle.kubeconfig)
        cleanup = Cleanup(f"cleanup of {request.node.name}")
        try:
            yield Workspace(kube, handle, request.node.name, cleanup)
        finally:
            cleanup.run()
            kube.api.close()
    finally:
        local.down()
        mp.undo()


def test_the_invariant_reports_a_node_given_more_volumes_than_its_csinode_count(ws: Workspace) -> None:
    node = ws.node()
    sc = ws.storage_class("limit", "Immediate")
    for name in ("first", "second"):
        ws.create(b.persistent_volume_claim(name, "1Gi", sc))
        ws.create(b.pod(name, (name,), node_selector=ws.pin(node)))
    for name in ("first", "second"):
        x.pod_runs(ws, name)  # NodeVolumeLimits would have kept the second Unschedulable
    wait_for_state(ws.kube, "VolumeAttachment",
                   lambda st: True if sum(1 for va in st.values() if (va.get("status") or {}).get("attached")) >= 2
                   else None, "both volumes attached", timeout=60)
    found = [v for v in invariants.check(snapshot.take(ws.kube)) if v.rule == "volume-limit"]
    assert len(found) == 1 and "2 volumes of driver csi.pvchaos.dev" in found[0].message, found
    # The healthy outcome (the second pod never placed) is not reported:
    ws.delete("Pod", "second")
    wait_for_state(ws.kube, "VolumeAttachment",
                   lambda st: True if sum(1 for va in st.values() if (va.get("status") or {}).get("attached")) == 1
                   else None, "the second volume detached", timeout=60)
    assert [v for v in invariants.check(snapshot.take(ws.kube)) if v.rule == "volume-limit"] == []
    assert kinds.get(ws.kube, "CSINode", str(node["metadata"]["name"])) is not None
