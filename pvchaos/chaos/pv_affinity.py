"""PV spec.nodeAffinity mutation (KEP-5381, gate MutablePVNodeAffinity): replace,
relax and tighten. The PVs belong to the test, so the undo is the test's cleanup."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import allure

from pvchaos.clusters.backend import ClusterHandle
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube.client import Kube
from pvchaos.kube.objects import REGION_KEY

Affinity = dict[str, Any]


@allure.step("set nodeAffinity of PV {pv} to {affinity}")
def replace_affinity(kube: Kube, pv: str, affinity: Affinity | None, dry_run: bool = False) -> dict[str, Any]:
    """A merge patch of spec.nodeAffinity; the server's answer (the updated PV) is returned,
    an ApiException (422 when the gate is off) propagates to the caller."""
    return kinds.patch(kube, "PersistentVolume", pv, {"spec": {"nodeAffinity": affinity}}, dry_run=dry_run)


def relax_to_region(kube: Kube, pv: str, region: str) -> dict[str, Any]:
    """Zone -> region: every zone of the region becomes allowed."""
    return replace_affinity(kube, pv, b.label_affinity(REGION_KEY, region))


def allow_zones(kube: Kube, pv: str, *zones: str) -> dict[str, Any]:
    """Add zones (or tighten to fewer): the affinity becomes exactly these zones."""
    return replace_affinity(kube, pv, b.zone_affinity(*zones))


@allure.step("kubectl patch pv {pv} --type merge -p {body}")
def kubectl_merge_patch(cluster: ClusterHandle, kubectl: Path, pv: str, body: str) -> subprocess.CompletedProcess[str]:
    """Exactly what a user types; returns the completed process (stdout, stderr, code)."""
    argv = [str(kubectl), "--kubeconfig", str(cluster.kubeconfig)]
    if cluster.context:
        argv += ["--context", cluster.context]
    argv += ["patch", "pv", pv, "--type", "merge", "-p", body]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)

