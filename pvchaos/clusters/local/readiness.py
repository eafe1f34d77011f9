"""Why nodes are not usable yet: the stuck condition or taint, and who should have fixed it.

A start that times out with "nodes [...] Ready: not reached" tells a person nothing; the
Node objects say exactly what is missing, and each missing thing has one owner.
"""

from __future__ import annotations

from collections.abc import Iterable

from pvchaos.kube import objects as o
from pvchaos.kube.kinds import Obj

# Who removes what on a local cluster (KWOK plays the kubelet).
_OWNER = {
    o.NOT_READY: "the node-lifecycle controller in kube-controller-manager lifts it once Ready=True is seen",
    o.UNREACHABLE: "the node-lifecycle controller in kube-controller-manager lifts it once the node's Lease is renewed",
    "node.kubernetes.io/network-unavailable": "the route controller or the network plugin lifts it",
    "node.cloudprovider.kubernetes.io/uninitialized": "a cloud controller manager lifts it",
}


def node_problem(node: Obj | None, name: str) -> str | None:
    """What keeps one node from being usable, or None when it is Ready and untainted at start."""
    if node is None:
        return f"node {name} does not exist (it was never created, or was deleted)"
    ready = o.condition(node, "Ready")
    if ready is None:
        return f"node {name} has no Ready condition: its KWOK controller (the kubelet's stand-in) never reported status"
    if ready.get("status") != "True":
        return (f"node {name} Ready={ready.get('status')} ({ready.get('reason') or 'no reason'}: "
                f"{ready.get('message') or 'no message'}): its KWOK controller does not report it Ready")
    stuck = [t for t in o.taints(node) if t.get("key") in _OWNER]
    if stuck:
        return "; ".join(f"node {name} keeps taint {t['key']}:{t.get('effect')} ({_OWNER[t['key']]})" for t in stuck)
    return None


def nodes_problem(nodes: Iterable[Obj], want: Iterable[str], shown: int = 5) -> str:
    """One line naming the wanted nodes that are not usable, and why; past `shown` of
    them only a count, so a 1,000-node cluster still gives a readable line."""
    by_name = {o.name(n): n for n in nodes}
    problems = [p for name in sorted(want) if (p := node_problem(by_name.get(name), name))]
    if not problems:
        return "every node is Ready and untainted now (it happened after the deadline)"
    more = f"; and {len(problems) - shown} more nodes not usable" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more
