"""The declarative shape of a test cluster: zones, nodes per zone, labels, allocatable.

Pure data: backends turn it into Node objects (local), kind node entries (kind), or
compare it with what an existing cluster has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pvchaos.kube.naming import OWNED_LABEL as OWNER_LABEL
from pvchaos.kube.objects import HOSTNAME_KEY, REGION_KEY, ZONE_KEY

__all__ = ["HOSTNAME_KEY", "OWNER_LABEL", "REGION_KEY", "ZONE_KEY", "NodeSpec", "Topology"]
KWOK_ANNOTATION = "kwok.x-k8s.io/node"

_ZONE_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")

DEFAULT_ALLOCATABLE: dict[str, str] = {
    "cpu": "32",
    "memory": "128Gi",
    "pods": "110",
    "ephemeral-storage": "100Gi",
}


@dataclass(frozen=True)
class NodeSpec:
    """One node the cluster should have."""

    name: str
    zone: str
    labels: dict[str, str]
    allocatable: dict[str, str]

    def to_node_object(self) -> dict[str, Any]:
        """A Node as KWOK expects it: annotated fake, status filled in on create."""
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": dict(self.labels),
                "annotations": {KWOK_ANNOTATION: "fake"},
            },
            "status": {
                "allocatable": dict(self.allocatable),
                "capacity": dict(self.allocatable),
            },
        }


@dataclass(frozen=True)
class Topology:
    """Zones x nodes, with the well-known topology labels and free extra labels.

    `storage_labels` cycles through the nodes of each zone, so by default every zone has
    one `storage=ssd` and one `storage=standard` node.
    """

    zones: tuple[str, ...] = ("zone-a", "zone-b", "zone-c")
    nodes_per_zone: int = 2
    region: str = "region-1"
    storage_labels: tuple[str, ...] = ("ssd", "standard")
    extra_labels: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ALLOCATABLE))
    hostname_prefix: str = ""

    def __post_init__(self) -> None:
        if not self.zones:
            raise ValueError("topology: at least one zone is needed")
        if len(set(self.zones)) != len(self.zones):
            raise ValueError(f"topology: zone names repeat: {list(self.zones)}")
        bad = [z for z in self.zones if not _ZONE_NAME.match(z)]
        if bad:
            raise ValueError(f"topology: zone names {bad} must be lowercase letters, digits and '-' "
                             "(they become node names and label values)")
        if self.nodes_per_zone < 1:
            raise ValueError(f"topology: nodes_per_zone must be >= 1, got {self.nodes_per_zone}")

    @property
    def node_count(self) -> int:
        return len(self.zones) * self.nodes_per_zone

    def nodes(self) -> list[NodeSpec]:
        """Node names are `<zone>-<index>`; hostname labels differ from names on purpose
        when `hostname_prefix` is set, since upstream allows that and suites must cope."""
        out: list[NodeSpec] = []
        for zone in self.zones:
            for i in range(1, self.nodes_per_zone + 1):
                name = f"{zone}-{i}"
                labels = {
                    ZONE_KEY: zone,
                    REGION_KEY: self.region,
                    HOSTNAME_KEY: f"{self.hostname_prefix}{name}",
                    OWNER_LABEL: "true",
                    **self.extra_labels,
                }
                if self.storage_labels:
                    labels["storage"] = self.storage_labels[(i - 1) % len(self.storage_labels)]
                out.append(NodeSpec(name=name, zone=zone, labels=labels, allocatable=dict(self.allocatable)))
        return out

    @classmethod
    def parse(cls, zones: str | int | None = None, nodes_per_zone: int | None = None) -> Topology:
        """From CLI words: `--zones 3` or `--zones zone-a,zone-b`; `--nodes-per-zone 2`."""
        kwargs: dict[str, Any] = {}
        if isinstance(zones, int) or (isinstance(zones, str) and zones.isdigit()):
            n = int(zones)
            if not 1 <= n <= 26:
                raise ValueError(f"--zones: between 1 and 26 zones, got {n}")
            kwargs["zones"] = tuple(f"zone-{chr(ord('a') + i)}" for i in range(n))
        elif zones:
            kwargs["zones"] = tuple(z.strip() for z in zones.split(",") if z.strip())
        if nodes_per_zone is not None:
            kwargs["nodes_per_zone"] = nodes_per_zone
        return cls(**kwargs)
