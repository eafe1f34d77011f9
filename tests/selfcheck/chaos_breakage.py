"""A pytest plugin that breaks what the chaos suites check, for detection-power tests.

Loaded in a subprocess with `-p tests.selfcheck.chaos_breakage` and
`PVCHAOS_CHAOS_BREAK=<what>`:
- `node-lifecycle`: kube-controller-manager without node-lifecycle-controller (no node
  goes Unknown, no unreachable taints);
- `taint-eviction`: kube-controller-manager without taint-eviction-controller (nodes are
  tainted, pods are never evicted);
- `wrong-mutation-table`: the expectation table claims a mutated PV turns Available with
  its claimRef cleared, as the blog post says; the suite must fail and show the diff;
- `wrong-kubelet-table`: the kubelet-half table (conformance/kubelet_admission.py) claims
  every version's kubelet refuses a pod whose volume no longer allows its node; on kind,
  where the kubelet starts it, suites/test_kubelet_volume_affinity.py must fail;
- `wrong-fs-group-change-table`: the fsGroupChangePolicy oracle
  (conformance/fs_group_change.py) claims the kubelet walks every volume whatever the
  policy, as if OnRootMismatch were ignored; on kind, where the kubelet skips a matching
  root, suites/test_fs_group.py's OnRootMismatch test must fail.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from pvchaos.clusters.backend import ClusterHandle
from pvchaos.clusters.local.cluster import LocalCluster
from pvchaos.conformance import expectations, fs_group_change, kubelet_admission

ENV = "PVCHAOS_CHAOS_BREAK"
CONTROLLERS = {"node-lifecycle": "node-lifecycle-controller", "taint-eviction": "taint-eviction-controller"}
BLOG_TABLE = {35: {"pv phase": "Available", "claimRef": "cleared", "claim phase": "Pending", "running pod": "kept"}}
TABLES = ("wrong-mutation-table", "wrong-kubelet-table", "wrong-fs-group-change-table")
REFUSING_KUBELET = {35: kubelet_admission.Admission(kubelet_admission.REFUSES,
                                                    "wrong-kubelet-table: every kubelet refuses (a breakage)")}


def _what() -> str:
    what = os.environ.get(ENV, "")
    if what and what not in (*CONTROLLERS, *TABLES):
        raise pytest.UsageError(f"{ENV}={what!r}: use one of {', '.join((*CONTROLLERS, *TABLES))}")
    return what


def pytest_configure(config: pytest.Config) -> None:
    if _what() == "wrong-mutation-table":  # the oracle's data, not the plugin: patched for this process
        mp = pytest.MonkeyPatch()
        mp.setattr(expectations, "AFTER_PV_AFFINITY_MUTATION", BLOG_TABLE)
    if _what() == "wrong-kubelet-table":
        pytest.MonkeyPatch().setattr(kubelet_admission, "ADMISSION", REFUSING_KUBELET)
    if _what() == "wrong-fs-group-change-table":  # before the suites import the oracle's function
        pytest.MonkeyPatch().setattr(fs_group_change, "walks_the_volume", lambda *_a, **_k: True)


def pytest_pvchaos_cluster_started(config: pytest.Config, local: LocalCluster, handle: ClusterHandle) -> None:
    """Start healthy (node-lifecycle must lift the start-up not-ready taints), then
    restart kube-controller-manager without the controller: it dies mid-life."""
    what = _what()
    if what not in CONTROLLERS:
        return
    assert local.state is not None
    local.stop_component("kube-controller-manager")
    rec = local.state.processes["kube-controller-manager"]
    argv = tuple(f"{a},-{CONTROLLERS[what]}" if a.startswith("--controllers=") else a for a in rec.argv)
    local.state.processes["kube-controller-manager"] = replace(rec, argv=argv)
    local.start_component("kube-controller-manager")
