"""A pytest plugin that breaks what the chaos suites check, for detection-power tests.

Loaded in a subprocess with `-p tests.selfcheck.chaos_breakage` and
`PVCHAOS_CHAOS_BREAK=<what>`:
- `node-lifecycle`: kube-controller-manager without node-lifecycle-controller (no node
  goes Unknown, no unreachable taints);
- `taint-eviction`: kube-controller-manager without taint-eviction-controller (nodes are
  tainted, pods are never evicted);
- `wrong-mutation-table`: the expectation table claims a mutated PV turns Available with
  its claimRef cleared, as the blog post says; the suite must fail and show the diff.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from clusters.backend import ClusterHandle
from clusters.local.cluster import LocalCluster
from conformance import expectations

ENV = "PVCHAOS_CHAOS_BREAK"
CONTROLLERS = {"node-lifecycle": "node-lifecycle-controller", "taint-eviction": "taint-eviction-controller"}
BLOG_TABLE = {35: {"pv phase": "Available", "claimRef": "cleared", "claim phase": "Pending", "running pod": "kept"}}


def pytest_configure(config: pytest.Config) -> None:
    what = os.environ.get(ENV, "")
    if not what:
        return
    if what not in (*CONTROLLERS, "wrong-mutation-table"):
        raise pytest.UsageError(f"{ENV}={what!r}: use one of {', '.join((*CONTROLLERS, 'wrong-mutation-table'))}")
    mp = pytest.MonkeyPatch()
    if what == "wrong-mutation-table":
        mp.setattr(expectations, "AFTER_PV_AFFINITY_MUTATION", BLOG_TABLE)
        return
    original_up = LocalCluster.up

    def up_then_break(self: LocalCluster) -> ClusterHandle:
        """Start healthy (node-lifecycle must lift the start-up not-ready taints), then
        restart kube-controller-manager without the controller: it dies mid-life."""
        handle = original_up(self)
        assert self.state is not None
        self.stop_component("kube-controller-manager")
        rec = self.state.processes["kube-controller-manager"]
        argv = tuple(f"{a},-{CONTROLLERS[what]}" if a.startswith("--controllers=") else a for a in rec.argv)
        self.state.processes["kube-controller-manager"] = replace(rec, argv=argv)
        self.start_component("kube-controller-manager")
        return handle

    mp.setattr(LocalCluster, "up", up_then_break)
