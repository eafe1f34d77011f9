"""What a node's CSINode says about a driver: registered or not, and with which
topology keys. The external-provisioner builds a volume's accessibility requirements
only from nodes whose CSINode lists the driver with its keys; with none it fails with
"no available topology found". Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pvchaos.conformance.types import KubeObject, dig


def _name(obj: KubeObject | None) -> str:
    return str(dig(obj, "metadata", "name", default=""))


def csinode_gaps(csinodes: Sequence[KubeObject], nodes: Sequence[KubeObject], driver: str,
                 keys: Sequence[str] = ()) -> Mapping[str, str]:
    """Per node, what its CSINode lacks for ``driver``: the driver itself, or topology
    keys (the external-provisioner builds accessibility requirements only from nodes
    whose CSINode lists the driver with its keys: "no available topology found")."""
    by_node = {_name(c): c for c in csinodes}
    gaps: dict[str, str] = {}
    for node in nodes:
        name = _name(node)
        entry = next((d for d in dig(by_node.get(name), "spec", "drivers", default=[]) or []
                      if d.get("name") == driver), None)
        if entry is None:
            gaps[name] = f"CSINode lists no driver {driver}" if name in by_node else "no CSINode"
            continue
        have = set(entry.get("topologyKeys") or [])
        missing = [k for k in keys if k not in have] if keys else ([] if have else ["any topology key"])
        if missing:
            gaps[name] = f"driver {driver} reports no {', '.join(missing)}"
    return gaps
