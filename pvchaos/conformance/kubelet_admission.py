"""What the kubelet does with a pod whose volume's PV nodeAffinity no longer allows its
node, per Kubernetes version, as data (pure).

KEP-5381 makes a PV's nodeAffinity mutable (gate MutablePVNodeAffinity). Its kubelet half
(the kubelet refuses such a pod: it fails with reason VolumeNodeAffinity and its
controller recreates it where the volume is allowed) is an open upstream pull request:
no served version has it. What served versions do instead is the volume manager's check
at mount time (pkg/volume/util/operationexecutor, `checkNodeAffinity`): MountVolume fails
with "MountVolume.NodeAffinity check failed", the pod stays ContainerCreating with
FailedMount events, and nothing fails or recreates it.
`pvchaos.tools.message_sources.kubelet_outcome_in_source` reads the outcome from each
version's source (tests/unit/test_kubelet_admission.py compares it with this table).
"""

from __future__ import annotations

from dataclasses import dataclass

REASON = "VolumeNodeAffinity"  # the pod status reason the KEP gives a refused pod
MOUNT_CHECK = "MountVolume.NodeAffinity check failed"  # operation_generator.go, the FailedMount event's text

REFUSES = "refuses"  # the pod fails (VolumeNodeAffinity); its controller recreates it on an allowed node
MOUNT_BLOCKED = "mount-blocked"  # not refused, never started: ContainerCreating, FailedMount, nothing recreates it
STARTS = "starts"  # the pod runs on the node its volume no longer allows
OUTCOMES = (REFUSES, MOUNT_BLOCKED, STARTS)


@dataclass(frozen=True)
class Admission:
    """What a 1.MINOR kubelet does with the pod, and where that is read."""

    outcome: str
    evidence: str

    @property
    def refuses(self) -> bool:
        return self.outcome == REFUSES


# first minor of each row -> what the kubelet does from there on (the newest row at or below a minor counts)
ADMISSION: dict[int, Admission] = {
    35: Admission(MOUNT_BLOCKED, "v1.35.4 to v1.38.0-beta.0: no non-test file of pkg/kubelet names "
                  "VolumeNodeAffinity (the admission in pkg/kubelet/lifecycle/predicate.go checks the pod's own "
                  "nodeAffinity only); pkg/volume/util/operationexecutor/operation_generator.go fails MountVolume "
                  f"with \"{MOUNT_CHECK}\" (checkNodeAffinity), retried with FailedMount events"),
}


def admission(minor: int) -> Admission:
    """The expectation for a 1.`minor` kubelet; ValueError before 1.35 (no mutable affinity)."""
    rows = [m for m in ADMISSION if m <= minor]
    if not rows:
        raise ValueError(f"1.{minor}: a PV's nodeAffinity is immutable there, nothing to refuse")
    return ADMISSION[max(rows)]


def finding(version: str, outcome: str, pod: str, node: str, pv: str, when: str) -> str:
    """The one line a run records where the kubelet does not refuse."""
    if outcome == MOUNT_BLOCKED:
        return (f"Kubernetes {version}: the kubelet of {node} neither refused nor started pod {pod} {when}: PV {pv}'s "
                f"nodeAffinity no longer allows {node}, the mount fails (\"{MOUNT_CHECK}\") and the pod stays "
                f"ContainerCreating; no {REASON} failure, so its controller never recreates it elsewhere")
    return (f"Kubernetes {version}: the kubelet started pod {pod} on node {node} {when}, although PV {pv}'s "
            f"nodeAffinity no longer allows {node} (no {REASON} refusal)")
