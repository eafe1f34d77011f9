"""Volumes attached per node and driver against the driver's CSINode allocatable count
(pure). The scheduler's NodeVolumeLimits filter keeps a node from being given more of a
driver's volumes than its node plugin said it can attach (NodeGetInfo
max_volumes_per_node, which the kubelet writes into CSINode `allocatable.count`). When
it is off, or the driver is missing from CSINode for a while (kubernetes #126921), more
land there and a real attach then fails. Checked after every test (invariants.py).

What counts as attached on a node: VolumeAttachments of the driver to the node that say
attached and are not being deleted, and, where a real kubelet reports them, the node's
`status.volumesInUse` entries of the driver ("kubernetes.io/csi/<driver>^<handle>"); a
volume counts once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

KubeObject = Mapping[str, Any]
CSI_IN_USE_PREFIX = "kubernetes.io/csi/"


def limits(csi_nodes: Sequence[KubeObject]) -> dict[tuple[str, str], int]:
    """(node, driver) -> allocatable count, for the drivers that declare one."""
    out: dict[tuple[str, str], int] = {}
    for cn in csi_nodes:
        node = str((cn.get("metadata") or {}).get("name"))
        for drv in (cn.get("spec") or {}).get("drivers") or []:
            count = (drv.get("allocatable") or {}).get("count")
            if isinstance(count, int):
                out[(node, str(drv.get("name")))] = count
    return out


def attached(attachments: Sequence[KubeObject], volumes: Sequence[KubeObject],
             nodes: Sequence[KubeObject]) -> dict[tuple[str, str], set[str]]:
    """(node, driver) -> volume handles attached there."""
    handles = {str((pv.get("metadata") or {}).get("name")): ((pv.get("spec") or {}).get("csi") or {})
               for pv in volumes}
    out: dict[tuple[str, str], set[str]] = {}
    for va in attachments:
        spec, st = va.get("spec") or {}, va.get("status") or {}
        if (va.get("metadata") or {}).get("deletionTimestamp") or st.get("attached") is not True:
            continue
        pv_name = (spec.get("source") or {}).get("persistentVolumeName")
        handle = (handles.get(str(pv_name)) or {}).get("volumeHandle") or f"pv/{pv_name}"
        out.setdefault((str(spec.get("nodeName")), str(spec.get("attacher"))), set()).add(str(handle))
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name"))
        for entry in (node.get("status") or {}).get("volumesInUse") or []:
            if str(entry).startswith(CSI_IN_USE_PREFIX) and "^" in str(entry):
                driver, handle = str(entry).removeprefix(CSI_IN_USE_PREFIX).split("^", 1)
                out.setdefault((name, driver), set()).add(handle)
    return out


def over_limit(attachments: Sequence[KubeObject], volumes: Sequence[KubeObject], nodes: Sequence[KubeObject],
               csi_nodes: Sequence[KubeObject]) -> list[tuple[str, str, int, int, list[str]]]:
    """(node, driver, attached, allocatable, handles) wherever attached > allocatable;
    a driver missing from a node's CSINode has no known limit there and is not judged."""
    limit = limits(csi_nodes)
    return [(node, driver, len(handles), limit[(node, driver)], sorted(handles))
            for (node, driver), handles in sorted(attached(attachments, volumes, nodes).items())
            if (node, driver) in limit and len(handles) > limit[(node, driver)]]
