"""Rescheduling after a provisioning failure (upstream's TestRescheduleProvisioning).

With WaitForFirstConsumer the scheduler picks a node and writes
`volume.kubernetes.io/selected-node` on the claim; when the provisioner cannot provision
there, it removes the annotation (in 1.35, for an external provisioner, the provisioner
does this: upstream's external-provisioner, through sig-storage-lib-external-provisioner's
rescheduleProvisioning, when CreateVolume answers ResourceExhausted for a claim with a
selected node; the PV controller removes it only for in-tree plugins), the scheduler's PreBind sees the
claim given back ("provisioning failed for PVC"), and the same pod is scheduled again.
With Immediate there is no selected node to give back: the PV controller never sets
one, the scheduler keeps the pod Pending ("pod has unbound immediate
PersistentVolumeClaims"), and the provisioner simply retries until it succeeds.

The scheduler does not learn from the failure: in 1.35 it writes the pod's
`status.nominatedNodeName` before PreBind (NominatedNodeNameForExpectation, beta, on)
and tries that node first on the next attempt, so a pod whose volume cannot be made on
its node is sent back there again and again (docs/findings.md). Real drivers steer it
away with storage capacity (CSIStorageCapacity); here the failed node is tainted
NoSchedule once the claim has been given back, standing for "that node is full".

The failures come from the harness CSI driver's knob (`b.provisioning_failures`: the
gRPC code CreateVolume answers, docs/writing-suites.md#making-provisioning-fail); a
driver without it skips.
"""

from __future__ import annotations

import allure
import pytest

from pvchaos.chaos.labels import add_taint
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube.kinds import events_for
from pvchaos.kube.objects import SELECTED_NODE, annotation, node_name, uid

pytestmark = [allure.epic("Scheduling with volumes"), allure.feature("Rescheduling after provisioning failure"),
              pytest.mark.needs("dynamic-zonal", "provisioning-failures")]

REASON = "pvchaos suite: no space left on this node"
FULL = {"key": "pvchaos.dev/no-space", "value": "true", "effect": "NoSchedule"}
# After the taint: one PreBind poll (1 s) plus the pod's backoff (up to 10 s in 1.35).
RESCHEDULED_WITHIN = 60.0


@allure.story("WaitForFirstConsumer: the failed node is given back, the same pod is provisioned elsewhere")
@pytest.mark.disruptive
@pytest.mark.needs("node-labels")
def test_wait_for_first_consumer_failure_reschedules_the_same_pod_elsewhere(ws: Workspace) -> None:
    sc = ws.storage_class("fail-first-node", "WaitForFirstConsumer",
                          parameters=b.provisioning_failures(first_node=True, reason=REASON))
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    pod_uid = uid(ws.create(b.pod("app", ("data",))))

    failed = x.provisioning_failed(ws, "data", REASON)
    first = x.failed_on_node(failed) or ""
    x.expect(first != "", "the failure names the node the scheduler selected", failed, ws=ws)
    x.selected_node_released(ws, "data", first)
    x.event(ws, "Pod", "app", "PROVISIONING_RESCHEDULED", claim="data")
    add_taint(ws, first, FULL)

    pod = x.pod_runs(ws, "app", timeout=RESCHEDULED_WITHIN)
    x.expect(uid(pod) == pod_uid, "the same pod (same uid) is rescheduled, not a replacement", pod, ws=ws)
    x.expect(node_name(pod) != first, f"the pod runs elsewhere than {first}, where provisioning failed", pod, ws=ws)
    pvc = x.claim_bound(ws, "data")
    x.expect(annotation(pvc, SELECTED_NODE) == node_name(pod),
             f"{SELECTED_NODE} names the node of the second choice", pvc, pod, ws=ws)
    x.runs_where_its_volume_is(ws, "app", "data")
    failures = [e for e in events_for(ws.kube, pvc) if e.get("reason") == "ProvisioningFailed"]
    measure.note("provisioning failures before success", len(failures))


@allure.story("Immediate: no node to give back; the pod waits for the claim and the provisioner retries")
@pytest.mark.quick
def test_immediate_failure_is_retried_without_a_selected_node(ws: Workspace) -> None:
    # The failing attempt takes 5 s, so the scheduler has judged the pod before a retry can
    # bind the claim (a quick retry once bound it first and the pod was simply scheduled).
    sc = ws.storage_class("fail-once", "Immediate",
                          parameters=b.provisioning_failures(times=1, reason=REASON, delay="5s"))
    ws.create(b.persistent_volume_claim("data", "1Gi", sc))
    pod_uid = uid(ws.create(b.pod("app", ("data",))))
    x.pod_unschedulable(ws, "app", "UNBOUND_IMMEDIATE")

    failed = x.provisioning_failed(ws, "data", REASON)
    # The driver's message may still name a node: with --immediate-topology (upstream's
    # default) external-provisioner asks CreateVolume for an Immediate claim with every
    # node's topology as requisite, and as preferred sorted and shifted by a hash of the
    # claim's name (pkg/controller/topology.go); the driver names preferred[0]. That is no
    # scheduler's choice: the claim carries no selected node.
    claim = ws.get("PersistentVolumeClaim", "data")
    x.expect(annotation(claim, SELECTED_NODE) is None, "an Immediate claim is provisioned with no selected node",
             claim, failed, ws=ws)

    pvc = x.claim_bound(ws, "data")  # the sidecar's retry: ResourceExhausted with no node is final, retried with back-off
    x.expect(annotation(pvc, SELECTED_NODE) is None,
             f"nobody writes {SELECTED_NODE} on an Immediate claim, so there is nothing to reschedule", pvc, ws=ws)
    pod = x.pod_runs(ws, "app")
    x.expect(uid(pod) == pod_uid, "the same pod runs once its claim is bound", pod, ws=ws)
    x.runs_where_its_volume_is(ws, "app", "data")
