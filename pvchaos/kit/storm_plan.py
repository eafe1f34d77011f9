"""The shape of a PVC storm, and the objects it creates (pure: nothing is sent here).

A storm is P pods over N nodes in Z zones, each pod with one or more claims, mixed:
- WaitForFirstConsumer zonal dynamic claims (the driver's class): the pod's node
  decides the zone of its volume;
- Immediate claims of a class whose `allowedTopologies` is one zone: the volume is made
  first, then the pod must follow it to that zone;
- static `local` PVs pre-created on chosen nodes (more PVs than claims, so a node loss
  leaves somewhere else to go), bound by the scheduler's volume binder;
- StatefulSets (Parallel pod management) whose claim templates use the dynamic class.
The same number of pods without volumes is the baseline the storm is compared with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pvchaos.conformance.storm import Cost
from pvchaos.kube import builders as b

Obj = b.Obj
KINDS = ("wffc", "immediate", "local", "sts")
ROLE_LABEL = "pvchaos.dev/storm"  # "volumes": the storm's pods and claims; "bare": the baseline pods
STORM_QPS, STORM_BURST = 300, 500  # kcm and scheduler client QPS/burst for storms (ClusterLoader2: 100-500)
# The scheduler's percentageOfNodesToScore for storms, upstream's tuning for large clusters:
# it stops filtering once 10% of the nodes (at least 100) are feasible. With its adaptive
# default (42% at 1,000 nodes) a pod with an unbound static local claim is checked against
# every Available local PV on nearly every node (VolumeBinding's FindMatchingVolume), and
# 400 such pods in a 1,000-node storm were not all Bound after 600 s (docs/scale.md).
STORM_NODES_TO_SCORE = 10
_SIZE = re.compile(r"^\s*(\d+)\s*[x:]\s*(\d+)\s*$")


def parse_size(text: str) -> tuple[int, int]:
    """`1000x2000` (nodes x pods) -> (1000, 2000); ValueError with one line otherwise."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"storm size {text!r}: write NODESxPODS, e.g. 60x120")
    return int(m[1]), int(m[2])


def zone_names(count: int) -> tuple[str, ...]:
    """zone-a, zone-b... as `--zones N` names them (clusters.topology)."""
    if not 1 <= count <= 26:
        raise ValueError(f"storm: between 1 and 26 zones, got {count}")
    return tuple(f"zone-{chr(ord('a') + i)}" for i in range(count))


@dataclass(frozen=True)
class StormShape:
    """How big a storm is; checked before anything starts (bad input: one line)."""

    nodes: int
    zones: tuple[str, ...]
    pods: int
    extra_claim_every: int = 0  # every k-th WFFC pod gets a second claim (0: one claim per pod)
    sts_replicas: int = 10
    mix: tuple[float, float, float, float] = (0.4, 0.2, 0.2, 0.2)  # shares of KINDS
    local_pv_slack: float = 2.0  # static local PVs per local claim

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"storm: {self.nodes} nodes: a storm needs at least one node")
        if not self.zones:
            raise ValueError("storm: no zones")
        if len(self.zones) > self.nodes:
            raise ValueError(f"storm: {len(self.zones)} zones for {self.nodes} nodes: "
                             "every zone needs a node (use at most as many zones as nodes)")
        if self.pods < 1:
            raise ValueError(f"storm: {self.pods} pods: a storm needs at least one pod")
        if len(self.mix) != len(KINDS) or any(s < 0 for s in self.mix) or not math.isclose(sum(self.mix), 1.0):
            raise ValueError(f"storm mix {self.mix}: {len(KINDS)} non-negative shares summing to 1 ({', '.join(KINDS)})")
        if self.extra_claim_every < 0 or self.sts_replicas < 1 or self.local_pv_slack < 1:
            raise ValueError("storm: extra_claim_every >= 0, sts_replicas >= 1, local_pv_slack >= 1")

    @property
    def nodes_per_zone(self) -> int:
        """Zones are equal: N nodes over Z zones rounds up (1000 over 3: 334 each, 1002 nodes)."""
        return math.ceil(self.nodes / len(self.zones))

    @property
    def node_count(self) -> int:
        return self.nodes_per_zone * len(self.zones)

    def counts(self) -> dict[str, int]:
        """Pods of each kind; rounding leftovers go to the WFFC pods."""
        out = {k: int(self.pods * share) for k, share in zip(KINDS, self.mix, strict=True)}
        out["wffc"] += self.pods - sum(out.values())
        return out

    def describe(self) -> str:
        c = self.counts()
        return (f"{self.node_count} nodes in {len(self.zones)} zones, {self.pods} pods "
                f"({', '.join(f'{c[k]} {k}' for k in KINDS)})")


@dataclass(frozen=True)
class NodeRef:
    """A node as the plan needs it: name, hostname label, zone."""

    name: str
    hostname: str
    zone: str


@dataclass
class StormObjects:
    """Everything one storm creates, in creation order, and what to expect of it."""

    classes: list[Obj] = field(default_factory=list)
    local_volumes: list[Obj] = field(default_factory=list)
    claims: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    statefulsets: list[Obj] = field(default_factory=list)
    baseline_pods: list[Obj] = field(default_factory=list)
    kind_of_pod: dict[str, str] = field(default_factory=dict)  # pod name -> wffc|immediate:<zone>|local|sts
    expected_claims: int = 0
    expected_pods: int = 0

    def batches(self, parts: int) -> list[tuple[list[Obj], list[Obj], list[Obj]]]:
        """(claims, pods, statefulsets) in `parts` slices: pod i's claims are in the slice
        of pod i, so a slice can be created while the next waits (a storm under chaos)."""
        def cut(items: list[Obj], k: int) -> list[Obj]:
            n = len(items)
            return items[n * k // parts: n * (k + 1) // parts]

        out = []
        for k in range(parts):
            pods = cut(self.pods, k)
            wanted = {c for p in pods for c in _claims_of(p)}
            out.append(([c for c in self.claims if c["metadata"]["name"] in wanted], pods, cut(self.statefulsets, k)))
        return out


def _claims_of(pod: Obj) -> list[str]:
    return [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"].get("volumes") or []
            if "persistentVolumeClaim" in v]


def build(shape: StormShape, nodes: Sequence[NodeRef], wffc_class: Obj, immediate_classes: dict[str, Obj],
          local_class: str, labels: dict[str, str], prefix: str = "s") -> StormObjects:
    """The storm's objects. `wffc_class` and `immediate_classes` (zone -> class body)
    come from the driver; `local_class` is the no-provisioner class's name. PV names
    start with `prefix` plus a per-storm label value, so storms in one cluster never clash."""
    if not nodes:
        raise ValueError("storm: the cluster has no nodes")
    bare = {**labels, ROLE_LABEL: "bare"}
    labels = {**labels, ROLE_LABEL: "volumes"}
    zones = sorted(immediate_classes)
    objs = StormObjects()
    objs.classes = [wffc_class, *(immediate_classes[z] for z in zones),
                    b.storage_class(local_class, "kubernetes.io/no-provisioner", "WaitForFirstConsumer",
                                    reclaim="Retain", labels=labels)]
    counts = shape.counts()
    n_local_pv = math.ceil(counts["local"] * shape.local_pv_slack)
    for i in range(n_local_pv):
        node = nodes[i % len(nodes)]
        objs.local_volumes.append(b.persistent_volume(
            f"{local_class}-{i}", "1Gi", local_class, affinity=b.hostname_affinity(node.hostname),
            local_path=f"/mnt/storm/{i}", labels=labels))
    wffc = wffc_class["metadata"]["name"]
    index = 0

    def add_pod(kind: str, claim_class: str, claims: int) -> None:
        nonlocal index
        name = f"{prefix}-{index}"
        index += 1
        names = tuple(f"{name}-{c}" for c in range(claims))
        for c in names:
            objs.claims.append(b.persistent_volume_claim(c, "1Gi", claim_class, labels=labels))
        objs.pods.append(b.pod(name, claims=names, labels=labels))
        objs.kind_of_pod[name] = kind

    for i in range(counts["wffc"]):
        extra = shape.extra_claim_every and (i + 1) % shape.extra_claim_every == 0
        add_pod("wffc", wffc, 2 if extra else 1)
    for i in range(counts["immediate"]):
        zone = zones[i % len(zones)]
        add_pod(f"immediate:{zone}", immediate_classes[zone]["metadata"]["name"], 1)
    for _ in range(counts["local"]):
        add_pod("local", local_class, 1)
    remaining, k = counts["sts"], 0
    while remaining > 0:
        replicas = min(shape.sts_replicas, remaining)
        objs.statefulsets.append(b.statefulset(f"{prefix}-set-{k}", replicas, wffc, labels=labels))
        remaining -= replicas
        k += 1
    objs.baseline_pods = [b.pod(f"{prefix}-bare-{i}", labels=bare) for i in range(shape.pods)]
    objs.expected_claims = len(objs.claims) + counts["sts"]
    objs.expected_pods = len(objs.pods) + counts["sts"]
    return objs


# Fitted to bench/storm.py's peak resident memory of all cluster processes on the per-zone
# KWOK layout (docs/scale.md; the points are in docs/findings.md).
COST = Cost(base_mib=700.0, per_node_mib=0.55, per_pod_mib=0.25)
HEADROOM = 1.25  # the estimate is a fit; keep a quarter spare, and the harness itself needs some


def memory_refusal(shape: StormShape, available_mib: float, cost: Cost = COST) -> str | None:
    """One line saying why this machine cannot hold the storm's cluster, or None."""
    need = cost.estimate(shape.node_count, shape.pods * 2) * HEADROOM  # the baseline's pods live alongside
    if need <= available_mib:
        return None
    return (f"storm {shape.node_count} nodes x {shape.pods} pods needs about {need:.0f} MiB "
            f"({cost.base_mib:.0f} + {cost.per_node_mib:g}/node + {cost.per_pod_mib:g}/pod, x{HEADROOM}), "
            f"this machine has {available_mib:.0f} MiB available (/proc/meminfo MemAvailable)")


def suite_shape(size: str, zones: tuple[str, ...], extra_claim_every: int = 4) -> StormShape:
    """The scale suite's storm from `--scale-size` and the run's zones; every 4th WFFC pod
    has a second claim, so pods with several claims are covered too."""
    nodes, pods = parse_size(size)
    return StormShape(nodes=nodes, zones=zones, pods=pods, extra_claim_every=extra_claim_every)


def cluster_marker_options(shape: StormShape) -> dict[str, object]:
    """The `cluster(...)` marker options of a cluster sized and tuned for this storm."""
    return {"zones": shape.zones, "nodes_per_zone": shape.nodes_per_zone,
            "client_qps": STORM_QPS, "client_burst": STORM_BURST, "nodes_to_score_percent": STORM_NODES_TO_SCORE}
