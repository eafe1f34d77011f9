"""What only a real kubelet shows (kind): a pod really writes to its node-local volume,
the node crashes and boots again, and the pod runs again on the same data.

KWOK nodes mount nothing and run no container, so this suite skips on the local backend
("backend local: no real-kubelet").
"""

from __future__ import annotations

from datetime import UTC, datetime

import allure
import pytest

from pvchaos.chaos import nodes as chaos_nodes
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.node_health import wait_node_ready, wait_node_unreachable
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import wait_for

pytestmark = [allure.epic("Real kubelets"), pytest.mark.disruptive,
              pytest.mark.needs("real-kubelet", "node-failure", "dynamic-local")]

TEST_IMAGE = "pvchaos.local/busybox:1"  # built into the kind node image (tools/nodeimage)
# Writes a marker once (the first start), keeps it afterwards, and prints what it found.
WRITER = ("test -f /data/0/marker || (cat /proc/sys/kernel/random/uuid > /data/0/marker); "
          "cat /data/0/marker; exec sleep 3600")


def _running_since(o: Obj | None) -> datetime | None:
    """When the pod's container last started, if it runs now."""
    statuses = ((o or {}).get("status") or {}).get("containerStatuses") or []
    started = ((statuses[0].get("state") or {}).get("running") or {}).get("startedAt") if statuses else None
    return datetime.fromisoformat(started.replace("Z", "+00:00")) if started else None


@allure.feature("Node-local data across a node crash")
@allure.story("The file a pod wrote is there when the pod runs again after its node crashed and returned")
def test_local_volume_data_survives_node_crash_and_return(ws: Workspace) -> None:
    sc = ws.local_class()
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    writer = b.pod("writer", ("data",))
    writer["spec"]["containers"][0].update({"image": TEST_IMAGE, "command": ["sh", "-c", WRITER]})
    ws.create(writer)
    pod = x.pod_runs(ws, "writer", timeout=120)
    node = pod["spec"]["nodeName"]
    claim = ws.get("PersistentVolumeClaim", "data") or {}
    pv = ws.get("PersistentVolume", claim["spec"]["volumeName"]) or {}
    faults = ws.cluster.faults
    assert faults is not None and hasattr(faults, "node_exec") and hasattr(faults, "volume_dir")
    path = faults.volume_dir(pv)  # kind: the CSI driver's node-local directory inside the node
    x.expect(path, "the provisioned PV's data is a directory on the node", pv, ws=ws)
    written = faults.node_exec(node, f"cat {path}/marker")
    x.expect(len(written) == 36, f"the pod wrote its marker into {path} on {node}", pod, ws=ws)

    crashed_at = datetime.now(UTC).replace(microsecond=0)
    crashed = chaos_nodes.crash_node(ws, node)
    wait_node_unreachable(ws, node)
    crashed.restore()
    wait_node_ready(ws, node, timeout=120)
    again = wait_for(ws.kube, "Pod", "writer", lambda o: (_running_since(o) or crashed_at) > crashed_at,
                     "its container started again after the crash", ws.namespace, 120)
    x.expect(again["spec"]["nodeName"] == node, f"the pod stays on {node}, where its data is", again, ws=ws)
    x.expect(faults.node_exec(node, f"cat {path}/marker") == written,
             "the marker the pod wrote before the crash is still on the node's volume", again, ws=ws)
    measure.note("restarts", again["status"]["containerStatuses"][0]["restartCount"])
