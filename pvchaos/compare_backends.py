"""Each test's verdict on several backends side by side, and whether every difference
is explained.

A difference between backends is either a harness bug, a Kubernetes behaviour that
depends on the cluster's shape, or a test the backend cannot provide a cluster for.
The last two are written down here, with the reason, so that the report can say "no
unexplained difference" and mean it; anything else fails the comparison.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pvchaos import report
from pvchaos.results import latest_by_test

# test (suite file stem :: pytest name) -> why its verdict differs between local and kind.
EXPLAINED: dict[str, str] = {
    # The gate-off mutation tests and the 2-zone x 4-node zone test run on kind too: it starts
    # a cluster of the shape and gates a test asks for (shaped-clusters, clusters/pool.py).
    "test_zone_outage::test_all_zones_down_evicts_nothing":
        "kind's control-plane node is in no zone and stays up, so the node-lifecycle controller never sees "
        "every zone down (no master disruption mode); on local clusters every node is in a zone",
    "test_real_kubelet::test_local_volume_data_survives_node_crash_and_return":
        "needs real kubelets: KWOK nodes run no containers and mount nothing",
    **{f"test_real_kubelet::{name}": "needs real kubelets: KWOK nodes run no containers, mount nothing and register "
                                      "no node plugin"
       for name in ("test_moved_volume_brings_the_pod_back_with_the_same_bytes",
                    "test_move_without_the_copy_fails_the_mount_and_is_explained",
                    "test_node_plugin_gone_leaves_the_pod_in_container_creating")},
    "test_real_kubelet::test_moved_volume_without_the_gate_leaves_the_pod_pending":
        "needs real kubelets and a cluster with MutablePVNodeAffinity off",
    "test_attach_detach::test_returning_node_clears_the_stale_volume_attachment":
        "needs real kubelets: only a kubelet reports the volume in use, and only a returning kubelet clears it",
    "test_attach_detach::test_lost_node_keeps_the_volume_until_the_out_of_service_taint":
        "needs real kubelets: only a kubelet reports the volume in use (volumesInUse); on KWOK nodes the "
        "attach/detach controller detaches at once",
    **{f"test_capacity::{name}": "needs a cluster with CSI capacity tracking; the kind backend runs one cluster per "
                                 "run, without it"
       for name in ("test_capacity_objects_follow_the_driver", "test_full_zone_is_filtered_out",
                    "test_every_zone_full_leaves_the_pod_pending", "test_stale_capacity_reschedules_to_another_zone")},
    "test_csi_topology::test_strict_topology_narrows_the_requisite[strict]":
        "needs a cluster whose external-provisioner runs --strict-topology; the kind backend runs one cluster per "
        "run, with upstream's default",
    "test_csi_topology::test_node_at_its_volume_limit_takes_no_more":
        "needs a cluster whose node plugins report max_volumes_per_node 1; the kind backend runs one cluster per "
        "run, with 64",
}


@dataclass(frozen=True)
class Row:
    """One test across backends."""

    test: str
    verdicts: dict[str, str]  # backend -> passed|failed|broken|skipped|absent

    @property
    def differs(self) -> bool:
        return len(set(self.verdicts.values())) > 1

    @property
    def explanation(self) -> str | None:
        return EXPLAINED.get(self.test)


def verdicts(results: list[dict[str, Any]]) -> dict[str, str]:
    """Test -> status of its last attempt."""
    return {k: str(v.get("status", "unknown")) for k, v in latest_by_test(results).items()}


def compare(by_backend: Mapping[str, Mapping[str, str]]) -> list[Row]:
    tests = sorted({t for v in by_backend.values() for t in v})
    return [Row(t, {b: v.get(t, "absent") for b, v in by_backend.items()}) for t in tests]


def unexplained(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.differs and r.explanation is None]


def render_markdown(rows: list[Row], backends: list[str]) -> str:
    """The verdict table: every test, one column per backend, differences explained."""
    lines = ["# Verdicts by backend", "",
             f"| test | {' | '.join(backends)} | difference |", f"|---|{'---|' * len(backends)}---|"]
    for r in rows:
        note = "" if not r.differs else (r.explanation or "**UNEXPLAINED**")
        lines.append(f"| {r.test} | {' | '.join(r.verdicts[b] for b in backends)} | {note} |")
    bad = unexplained(rows)
    lines += ["", f"{sum(r.differs for r in rows)} of {len(rows)} tests differ; "
              f"{len(bad)} unexplained" + (f": {', '.join(r.test for r in bad)}" if bad else ".")]
    return "\n".join(lines) + "\n"


def write_comparison_result(target: Path, rows: list[Row], backends: list[str]) -> Path:
    """An Allure result of its own: passed when every difference is explained, with the
    verdict table attached, so the HTML report carries the comparison."""
    bad = unexplained(rows)
    return report.write_synthetic_result(
        target, name=f"verdicts agree across {' and '.join(backends)}", full_name="pvchaos.compare_backends#verdicts",
        identity=f"compare:{','.join(backends)}",
        failure="unexplained differences: " + ", ".join(r.test for r in bad) if bad else None,
        labels={"suite": "backend comparison", "epic": "Backends"},
        attachment=("verdicts by backend", render_markdown(rows, backends)))
