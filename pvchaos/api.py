"""The public surface of pvchaos: what a suite, in this repository or another, may import.

Everything named here (and every public name of the modules in `PUBLIC_MODULES`) keeps
working across releases; a name that moves keeps an alias that warns for one release
(`pvchaos.moved` does that for the packages that moved under `pvchaos.` in 0.2).
docs/writing-suites.md documents each; tests/unit/test_public_api.py fails when one
disappears or is left undocumented. Anything else is internal and may change.

    from pvchaos.api import Workspace, b, x, o, measure
"""

from __future__ import annotations

from pvchaos.chaos import components as chaos_components
from pvchaos.chaos import csi_calls as chaos_csi_calls
from pvchaos.chaos import csi_capacity as chaos_csi_capacity
from pvchaos.chaos import labels as chaos_labels
from pvchaos.chaos import nodes as chaos_nodes
from pvchaos.chaos import pv_affinity as chaos_pv_affinity
from pvchaos.clusters.backend import Capability, CapabilityMissing, ClusterError, ClusterHandle
from pvchaos.conformance import affinity, claims, messages
from pvchaos.drivers.driver import Driver
from pvchaos.kit import expect as x
from pvchaos.kit import measure
from pvchaos.kit.node_health import wait_node_ready, wait_node_unreachable, wait_taint_gone
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.cleanup import Cleanup
from pvchaos.kube.errors import ApiError, ConditionNotReached, ExpectationFailed, WaitTimeout
from pvchaos.kube.kinds import Obj
from pvchaos.kube.wait import holds_for, pod_running, wait_for, wait_for_event, wait_for_state, wait_gone

# The modules whose every public name (no leading underscore) is part of the surface.
PUBLIC_MODULES = (
    "pvchaos.kit.workspace",
    "pvchaos.kit.expect",
    "pvchaos.kit.measure",
    "pvchaos.kit.node_health",
    "pvchaos.kube.builders",
    "pvchaos.kube.objects",
    "pvchaos.kube.kinds",
    "pvchaos.kube.wait",
    "pvchaos.kube.errors",
    "pvchaos.kube.cleanup",
    "pvchaos.chaos.nodes",
    "pvchaos.chaos.labels",
    "pvchaos.chaos.pv_affinity",
    "pvchaos.chaos.components",
    "pvchaos.chaos.csi_capacity",
    "pvchaos.chaos.csi_calls",
    "pvchaos.conformance.messages",
    "pvchaos.conformance.affinity",
    "pvchaos.conformance.claims",
    "pvchaos.clusters.backend",
    "pvchaos.drivers.driver",
)

__all__ = [
    "PUBLIC_MODULES",
    "ApiError", "Capability", "CapabilityMissing", "Cleanup", "ClusterError", "ClusterHandle",
    "ConditionNotReached", "Driver", "ExpectationFailed", "Obj", "WaitTimeout", "Workspace",
    "affinity", "b", "chaos_components", "chaos_csi_calls", "chaos_csi_capacity", "chaos_labels", "chaos_nodes",
    "chaos_pv_affinity", "claims",
    "holds_for", "kinds", "measure", "messages", "o", "pod_running", "wait_for", "wait_for_event",
    "wait_for_state", "wait_gone", "wait_node_ready", "wait_node_unreachable", "wait_taint_gone", "x",
]
