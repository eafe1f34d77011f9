"""What the kubelet does with a pod whose volume's PV nodeAffinity no longer allows its
node, per Kubernetes version, as data (pure).

KEP-5381 makes a PV's nodeAffinity mutable (gate MutablePVNodeAffinity). Its kubelet half
(the kubelet refuses to start such a pod: the pod fails with reason VolumeNodeAffinity
and its controller recreates it where the volume is allowed) is an open upstream pull
request: no served version has it. `pvchaos.tools.message_sources.kubelet_refuses_in_source`
checks this table against each version's own pkg/kubelet (tests/unit/test_kubelet_admission.py).
"""

from __future__ import annotations

from dataclasses import dataclass

REASON = "VolumeNodeAffinity"  # the pod status reason the KEP gives a refused pod


@dataclass(frozen=True)
class Admission:
    """Whether a 1.MINOR kubelet refuses the pod, and where that is read."""

    refuses: bool
    evidence: str


_NO_CHECK = ("pkg/kubelet/lifecycle/predicate.go checks the pod's own required nodeAffinity only; "
             "no non-test file of pkg/kubelet names VolumeNodeAffinity")
# first minor of each row -> what the kubelet does from there on (the newest row at or below a minor counts)
ADMISSION: dict[int, Admission] = {
    35: Admission(False, f"v1.35.4 to v1.38.0-beta.0: {_NO_CHECK}"),
}


def admission(minor: int) -> Admission:
    """The expectation for a 1.`minor` kubelet; ValueError before 1.35 (no mutable affinity)."""
    rows = [m for m in ADMISSION if m <= minor]
    if not rows:
        raise ValueError(f"1.{minor}: a PV's nodeAffinity is immutable there, nothing to refuse")
    return ADMISSION[max(rows)]


def finding(version: str, pod: str, node: str, pv: str, when: str) -> str:
    """The one line a run records where the kubelet does not refuse."""
    return (f"Kubernetes {version}: the kubelet started pod {pod} on node {node} {when}, although PV {pv}'s "
            f"nodeAffinity no longer allows {node} (no {REASON} refusal: KEP-5381's kubelet half is not in this version)")
