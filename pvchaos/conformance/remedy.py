"""What fixes a root cause: plain words, each with the command or manifest change.

Keyed by ``Cause.code`` (conformance.causes); the facts fill in names. Fixes that lose
data say so: a claim bound to a PV holds the data of that PV, and deleting it (with a
Delete reclaim policy) deletes the volume.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pvchaos.conformance.causes import Cause


@dataclass(frozen=True)
class Fix:
    """One remedy: what to do, why, and the commands or manifest change that do it."""

    text: str
    commands: tuple[str, ...] = ()


def _ns(f: Mapping[str, Any]) -> str:
    return f"-n {f.get('namespace', 'default')}"


def _pod_name(f: Mapping[str, Any]) -> str:
    return str(f.get("pod", "/")).split("/", 1)[1]


def _recreate_claim(f: Mapping[str, Any], manifest_change: str, note: str = "") -> Fix:
    return Fix(f"recreate claim {f.get('claim')} with {manifest_change}{note} (a claim's class and binding are "
               "immutable; deleting it releases its PV and, with reclaimPolicy Delete, its data)",
               (f"kubectl get pvc {f.get('claim')} {_ns(f)} -o yaml > {f.get('claim')}.yaml   # edit: {manifest_change}",
                f"kubectl delete pod {_pod_name(f)} {_ns(f)} && kubectl delete pvc {f.get('claim')} {_ns(f)}",
                f"kubectl apply -f {f.get('claim')}.yaml   # then recreate the pod"))


def _json_arg(value: Any) -> str:
    """A JSON patch body as one shell word: single-quoted, no spaces to split on."""
    return "'" + json.dumps(value, separators=(",", ":")) + "'"


def _edit_pod(f: Mapping[str, Any], what: str) -> str:
    """Editing the pod's spec: most fields are immutable, so the owner's template is the place."""
    owner = f.get("owner")
    if owner and not str(owner).startswith("Node/"):
        kind, name = str(owner).split("/", 1)
        kind = {"ReplicaSet": "replicaset"}.get(kind, kind.lower())
        return f"kubectl edit {kind} {name} {_ns(f)}   # {what} in the pod template"
    return f"kubectl get pod {_pod_name(f)} {_ns(f)} -o yaml > {_pod_name(f)}.yaml   # {what}; then delete and apply"


def _class_missing(f: Mapping[str, Any]) -> list[Fix]:
    wanted = f.get("suggestion")
    out = [_recreate_claim(f, f"spec.storageClassName: {wanted}")] if wanted else []
    out.append(Fix(f"{'or ' if wanted else ''}create the class {f.get('storage_class')!r} the claim asks for "
                   "(a StorageClass manifest with that name and a provisioner)", ("kubectl get storageclass",)))
    return out


def _immediate_wrong_zone(f: Mapping[str, Any]) -> list[Fix]:
    """Point at the root: an existing PV bound statically (the PV is where the data is),
    or the class's Immediate binding mode (the class decides where new volumes go)."""
    where = f.get("volume_where", "its zone")
    out = []
    if f.get("static"):
        out.append(Fix(f"the claim bound to the existing PV {f.get('pv')} in {where}: bind it instead to a PV the "
                       f"pod can reach ({f.get('pod_where')}), by recreating the claim with that spec.volumeName",
                       (f"kubectl get pv {f.get('pv')} -o jsonpath='{{.spec.nodeAffinity}}'",)))
    elif f.get("storage_class"):
        out.append(Fix(f"class {f.get('storage_class')} binds Immediately, before the pod is scheduled: use a "
                       "WaitForFirstConsumer class, so the volume is created where the pod runs",
                       (f"kubectl get storageclass {f.get('storage_class')} -o yaml > wffc-class.yaml   # rename, "
                        "set volumeBindingMode: WaitForFirstConsumer", "kubectl apply -f wffc-class.yaml")))
    out.append(_recreate_claim(f, "spec.storageClassName: a WaitForFirstConsumer class",
                               f"; the data of PV {f.get('pv')} in {where} stays behind"))
    out.append(Fix(f"or let the pod run where the volume is ({where}): change the pod's nodeSelector/affinity",
                   (_edit_pod(f, "nodeSelector/affinity"),)))
    return out


def _local_node_gone(f: Mapping[str, Any]) -> list[Fix]:
    pv, claim = f.get("pv"), f.get("claim")
    return [
        Fix(f"bring node {', '.join(f.get('hosts', []))} back: the data of PV {pv} exists only there"),
        Fix("or give up the data: delete the claim and the PV, and let the pod get a new volume",
            (f"kubectl delete pvc {claim} {_ns(f)}", f"kubectl delete pv {pv}",
             f"kubectl delete pod {_pod_name(f)} {_ns(f)}   # its controller recreates pod and claim")),
        Fix("or, if the data really moved to another node and the MutablePVNodeAffinity gate is on, update the PV's "
            "affinity to that node's kubernetes.io/hostname label (kubectl get nodes -L kubernetes.io/hostname)",
            ("kubectl get nodes -L kubernetes.io/hostname",)),
    ]


def _hostname_is_node_name(f: Mapping[str, Any]) -> list[Fix]:
    """The PV must name the label's value; the node and the data are where they were."""
    pv, values = f.get("pv"), list(f.get("hostnames", []))
    patch = {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": values}]}]}}}}
    return [
        Fix(f"the PV must name the node's kubernetes.io/hostname label ({', '.join(values)}), not its name; with "
            "the MutablePVNodeAffinity gate on, patch the affinity",
            (f"kubectl patch pv {pv} --type merge -p {_json_arg(patch)}",)),
        Fix(f"or recreate PV {pv} with that value (keep the data: set reclaimPolicy Retain first, then clear the "
            "new PV's claimRef if it is Released)",
            (f"kubectl patch pv {pv} --type merge -p " + _json_arg({"spec": {"persistentVolumeReclaimPolicy": "Retain"}}),
             f"kubectl get pv {pv} -o yaml > {pv}.yaml   # edit: values: [{', '.join(values)}]",
             f"kubectl delete pv {pv} && kubectl apply -f {pv}.yaml")),
    ]


def _zone_without_nodes(f: Mapping[str, Any]) -> list[Fix]:
    zones = ", ".join(f.get("zones", []))
    out = []
    if f.get("class_root"):
        out.append(Fix(f"class {f.get('storage_class')} may provision only in {zones}, where there are no nodes: "
                       f"recreate it with allowedTopologies naming zones with nodes ({', '.join(f.get('node_zones', []))})"
                       " (a class is immutable), then recreate the claim",
                       (f"kubectl get storageclass {f.get('storage_class')} -o yaml > {f.get('storage_class')}.yaml"
                        "   # edit allowedTopologies",
                        f"kubectl delete storageclass {f.get('storage_class')} && kubectl apply -f "
                        f"{f.get('storage_class')}.yaml",
                        f"kubectl delete pvc {f.get('claim')} {_ns(f)}   # loses PV {f.get('pv')}'s data")))
    out += [Fix(f"{'or ' if out else ''}add nodes to zone {zones}, or wait for the zone to come back (the PV's "
                "data is in that zone only)"),
            Fix("or restore the data elsewhere and recreate the claim",
                (f"kubectl delete pvc {f.get('claim')} {_ns(f)}",))]
    return out


def _provisioner(f: Mapping[str, Any]) -> list[Fix]:
    p = f.get("provisioner")
    return [Fix(f"check that provisioner {p} runs and is registered (a CSI driver's external-provisioner "
                "sidecar watches claims of its class)",
                (f"kubectl get csidriver {p}", "kubectl get pods -A -o wide",
                 f"kubectl describe pvc {f.get('claim')} {_ns(f)}")),
            Fix(f"or check the class's provisioner name for a typo (class {f.get('storage_class')})",
                (f"kubectl get storageclass {f.get('storage_class')} -o jsonpath='{{.provisioner}}'",))]


HINTS = (("quota", "raise the quota in the storage backend, or request less"),
         ("exceed", "raise the backend's limit, or request less"),
         ("parameter", "fix the class's parameters (a class is immutable: recreate it)"),
         ("not found", "create what the message names, or fix the class's parameters"),
         ("permission", "give the provisioner's service account the permission it names"),
         ("forbidden", "give the provisioner's service account the permission it names"),
         ("capacity", "free space in the backend, or request less"),
         ("topology", "provision where the backend has capacity: check the class's allowedTopologies"))


def _provisioning_failed(f: Mapping[str, Any]) -> list[Fix]:
    """The provisioner's own error says what to fix; it retries by itself once fixed."""
    error = str(f.get("error", ""))
    hint = next((h for word, h in HINTS if word in error.lower()), "fix what the error names")
    claim = f.get("claim")
    return [Fix(f"provisioner {f.get('provisioner')} says: {error!r}; {hint}. It retries on its own",
                (f"kubectl get events {_ns(f)} --field-selector involvedObject.name={claim},reason=ProvisioningFailed",
                 f"kubectl get storageclass {f.get('storage_class')} -o yaml")),
            _recreate_claim(f, "a smaller request or another class", " if the backend cannot be changed")]


def _released(f: Mapping[str, Any]) -> list[Fix]:
    pv = f.get("pv")
    return [Fix(f"make PV {pv} Available again by clearing its claimRef (its old data is still on it; the claim "
                "then binds to it)",
                (f"kubectl patch pv {pv} --type json -p " + _json_arg([{"op": "remove", "path": "/spec/claimRef"}]),)),
            Fix("or create another PersistentVolume that fits the claim", ("kubectl get pv",))]


def _no_pv(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("create a PersistentVolume that fits the claim (size, access modes, volumeMode, class, "
                "selector labels, and a node affinity the pod's nodes satisfy)", ("kubectl get pv",)),
            _recreate_claim(f, "a request the existing PVs satisfy, or a class with a provisioner")]


def _taint_text(t: Mapping[str, str]) -> str:
    return f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"


def _toleration_patch(f: Mapping[str, Any], taint: Mapping[str, str]) -> str:
    """Adding a toleration is one of the few changes a running pod's spec accepts."""
    tol = {"key": taint["key"], "operator": "Equal", "value": taint.get("value", ""), "effect": taint["effect"]}
    if not tol["value"]:
        tol = {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}
    op = ([{"op": "add", "path": "/spec/tolerations/-", "value": tol}] if f.get("tolerations")
          else [{"op": "add", "path": "/spec/tolerations", "value": [tol]}])
    return f"kubectl patch pod {_pod_name(f)} {_ns(f)} --type json -p {_json_arg(op)}"


NOT_READY = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _taints(f: Mapping[str, Any]) -> list[Fix]:
    fixes = []
    if f.get("cordoned"):
        fixes.append(Fix("uncordon the node(s), if they are healthy (cordoned by someone: spec.unschedulable)",
                         tuple(f"kubectl uncordon {n}" for n in f["cordoned"])))
    taints = list(f.get("taints", []))
    down = sorted({t["node"] for t in taints if t["key"] in NOT_READY})
    if down:
        fixes.append(Fix(f"node(s) {', '.join(down)} are not ready (taints set by the node lifecycle controller): "
                         "bring them back; with a volume tied to them, the pod must wait for them",
                         tuple(f"kubectl describe node {n}" for n in down)))
    placed = [t for t in taints if t["key"] not in NOT_READY]
    if placed:
        fixes.append(Fix(f"{'or ' if fixes else ''}remove the taint(s), if the node(s) should take this pod",
                         tuple(f"kubectl taint nodes {t['node']} {_taint_text(t)}-" for t in placed)))
    unique = list({(t["key"], t.get("value", ""), t["effect"]): t for t in taints}.values())
    if unique:
        fixes.append(Fix("or tolerate " + ", ".join(_taint_text(t) for t in unique) + " in the pod (the same key, "
                         "value and effect; a toleration with another effect does not count)",
                         tuple(_toleration_patch(f, t) for t in unique)))
    return fixes


def _resources(f: Mapping[str, Any]) -> list[Fix]:
    what = ", ".join(f.get("resources") or ["resources"])
    return [Fix(f"lower the pod's {what} requests to what a node can hold",
                ("kubectl describe nodes",
                 _edit_pod(f, f"resources.requests ({what})"))),
            Fix("or add nodes with more allocatable, or free the nodes (other pods' requests count too)",
                ("kubectl get pods -A -o wide",))]


def _unmodeled(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix(f"the scheduler's {f.get('plugin')} filter rejects the nodes explain finds fitting; read its "
                "words above and the pod's constraints for that filter",
                (f"kubectl describe pod {_pod_name(f)} {_ns(f)}",))]


def _scheduler_events(f: Mapping[str, Any]) -> str:
    return f"kubectl get events {_ns(f)} --field-selector involvedObject.name={_pod_name(f)},reason=FailedScheduling"


def _disagrees(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("explain cannot confirm the nodes it finds fitting: compare the scheduler's words with the "
                "pod, its claims and the nodes it names (a taint, a cordon or a claim the scheduler saw)",
                (f"kubectl describe pod {_pod_name(f)} {_ns(f)}", _scheduler_events(f))),
            Fix("if nothing differs, the scheduler reads something explain does not model: report the scheduler's "
                "message with the pod's YAML")]


def _stale(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("the scheduler retries a pod after a change to it or its claims (within seconds, at most 5 "
                "minutes from its unschedulable queue): run explain again, and read its newer message",
                (_scheduler_events(f), f"kubectl get pod {_pod_name(f)} {_ns(f)} -o wide"))]


def _inter_pod(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("the pod's required podAffinity/podAntiAffinity (or another pod's anti-affinity) rules out every "
                "node: make sure pods its affinity selects exist in the right topology, or relax the rule "
                "(preferredDuringScheduling)",
                ("kubectl get pods -A --show-labels -o wide", _edit_pod(f, "spec.affinity.podAffinity/podAntiAffinity")))]


def _volume_limit(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("the nodes it could run on already hold as many volumes of the CSI driver as their CSINode "
                "allows (allocatable.count, from the driver's NodeGetInfo max_volumes_per_node): free a volume "
                "there (move or delete a pod using one), add nodes, or raise the driver's limit",
                ("kubectl get csinode -o custom-columns=NODE:.metadata.name,"
                 "LIMITS:.spec.drivers[*].allocatable.count", "kubectl get volumeattachments"))]


def _rwop_in_use(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("a ReadWriteOncePod claim of the pod is used by another pod, anywhere in the cluster: delete or "
                "finish that pod, or give this pod a higher priorityClassName (the scheduler then preempts the "
                "holder)",
                (f"kubectl get pods {_ns(f)} -o wide",))]


def _spread(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("the pod's topologySpreadConstraints (DoNotSchedule) cannot be met: raise maxSkew, use "
                "whenUnsatisfiable: ScheduleAnyway, or add nodes in the missing domains; nodes without the "
                "topology key label are not counted",
                ("kubectl get nodes --show-labels", _edit_pod(f, "spec.topologySpreadConstraints")))]


def _node_name_missing(f: Mapping[str, Any]) -> list[Fix]:
    nodes = f.get("fitting") or []
    to = f" (e.g. {nodes[0]})" if nodes else ""
    return [Fix(f"spec.nodeName is immutable: recreate the pod without nodeName (let the scheduler choose) or with "
                f"an existing node{to}",
                (f"kubectl get pod {_pod_name(f)} {_ns(f)} -o yaml > {_pod_name(f)}.yaml   # remove spec.nodeName",
                 f"kubectl delete pod {_pod_name(f)} {_ns(f)} && kubectl apply -f {_pod_name(f)}.yaml")),
            Fix(f"or bring node {f.get('node')} back", ("kubectl get nodes",))]


def _no_scheduler(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix(f"run the scheduler named {f.get('scheduler')!r}, or recreate the pod with schedulerName "
                "default-scheduler (immutable in a pod)",
                ("kubectl get pods -A -o wide", _edit_pod(f, "spec.schedulerName: default-scheduler")))]


def _gated(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("the controller that added the scheduling gates removes them when ready; remove them yourself "
                "only if that controller is gone",
                (f"kubectl patch pod {_pod_name(f)} {_ns(f)} --type json -p "
                 + _json_arg([{"op": "remove", "path": "/spec/schedulingGates"}]),))]


def _no_topology(f: Mapping[str, Any]) -> list[Fix]:
    p = f.get("provisioner")
    return [Fix(f"start driver {p}'s node plugin on the nodes (its registration with the kubelet writes the CSINode "
                "entry with the topology keys from NodeGetInfo); the provisioner retries by itself",
                ("kubectl get csinode -o custom-columns=NODE:.metadata.name,DRIVERS:.spec.drivers[*].name,"
                 "KEYS:.spec.drivers[*].topologyKeys", "kubectl get pods -A -o wide")),
            Fix("if the driver's NodeGetInfo returns no accessible_topology, it must (or the external-provisioner "
                "must run without --feature-gates=Topology=true)", (f"kubectl get csidriver {p} -o yaml",))]


def _capacity(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix("the driver's CSIStorageCapacity objects say no node has room for the request: free space in the "
                "storage system, request less, or add capacity; if the objects are stale, check that the "
                "external-provisioner (it publishes them, --enable-capacity) runs",
                ("kubectl get csistoragecapacities -A -o custom-columns=CLASS:.storageClassName,"
                 "TOPOLOGY:.nodeTopology.matchLabels,CAPACITY:.capacity,MAX:.maximumVolumeSize",))]


def _multi_attach(f: Mapping[str, Any]) -> list[Fix]:
    holders = f.get("holders") or []
    down = f.get("holders_down") or []
    tainted = set(f.get("tainted") or [])
    out = []
    for node in down:
        if node not in tainted:
            out.append(Fix(f"node {node} holds the volume and is not Ready: if it is really shut down, taint it "
                           "out-of-service so the attach/detach controller detaches at once (non-graceful node "
                           "shutdown); without it, the controller force-detaches after 6 minutes",
                           (f"kubectl taint nodes {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",)))
    live = [n for n in holders if n not in down]
    if live:
        out.append(Fix(f"a pod on {', '.join(live)} still uses the ReadWriteOnce volume: delete that pod (or use a "
                       "Recreate rollout) so the volume detaches there", (f"kubectl get pods {_ns(f)} -o wide",)))
    return out or [Fix("wait for the volume to detach from the other node", ("kubectl get volumeattachments",))]


def _attach_failed(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix(f"the driver's ControllerPublishVolume failed: {f.get('error')!r}; fix what it names (the "
                "external-attacher retries by itself)", ("kubectl get volumeattachments -o yaml",))]


def _not_registered(f: Mapping[str, Any]) -> list[Fix]:
    node = f.get("node")
    return [Fix(f"run driver {f.get('driver')}'s node plugin on node {node} (a DaemonSet that tolerates the node's "
                "taints) and check its registration (node-driver-registrar or the plugin's own socket)",
                (f"kubectl get csinode {node} -o yaml", f"kubectl get pods -A -o wide --field-selector spec.nodeName={node}"))]


def _mount_failed(f: Mapping[str, Any]) -> list[Fix]:
    return [Fix(f"the node plugin on {f.get('node')} failed to stage or publish the volume: {f.get('error')!r}; "
                "fix what it names (the kubelet retries by itself)",
                (f"kubectl describe pod {_pod_name(f)} {_ns(f)}",))]


FIXES: Mapping[str, Callable[[Mapping[str, Any]], list[Fix]]] = {
    "NO_AVAILABLE_TOPOLOGY": _no_topology,
    "INSUFFICIENT_CAPACITY": _capacity,
    "MULTI_ATTACH": _multi_attach,
    "ATTACH_FAILED": _attach_failed,
    "CSI_DRIVER_NOT_REGISTERED": _not_registered,
    "MOUNT_FAILED": _mount_failed,
    "VOLUME_SETUP_TIMEOUT": lambda f: [Fix("look at the node's kubelet log and the driver's node plugin log for the "
                                           "volume", (f"kubectl describe pod {_pod_name(f)} {_ns(f)}",))],
    "CLAIM_MISSING": lambda f: [Fix(f"create claim {f.get('claim')}, or fix the claimName in the pod's volumes",
                                    (f"kubectl get pvc {_ns(f)}",))],
    "CLAIM_TERMINATING": lambda f: [Fix("wait for the deletion to finish (a pod still using it keeps it: "
                                        "kubernetes.io/pvc-protection), then recreate the claim",
                                        (f"kubectl get pods {_ns(f)} -o wide",))],
    "CLASS_MISSING": _class_missing,
    "VOLUME_NAME_MISFIT": lambda f: [_recreate_claim(f, f"a spec.volumeName that fits, or none (PV {f.get('pv')} "
                                                        "does not fit; see the reason above)")],
    "PROVISIONING_PENDING": _provisioner,
    "PROVISIONING_FAILED": _provisioning_failed,
    "PV_RELEASED": _released,
    "PV_HOSTNAME_IS_NODE_NAME": _hostname_is_node_name,
    "INSUFFICIENT_RESOURCES": _resources,
    "INTER_POD_AFFINITY": _inter_pod,
    "TOPOLOGY_SPREAD": _spread,
    "VOLUME_LIMIT_EXCEEDED": _volume_limit,
    "RWOP_CLAIM_IN_USE": _rwop_in_use,
    "UNMODELED_FILTER": _unmodeled,
    "SCHEDULER_DISAGREES": _disagrees,
    "SCHEDULER_MESSAGE_STALE": _stale,
    "NODE_NAME_MISSING": _node_name_missing,
    "NO_SCHEDULER": _no_scheduler,
    "SCHEDULING_GATED": _gated,
    "PROVISIONER_SILENT": _provisioner,
    "NO_PV_FOR_CLAIM": _no_pv,
    "PV_GONE": lambda f: [Fix(f"restore PV {f.get('pv')} (same name, claimRef to the claim) from a backup or the "
                              "storage system", (f"kubectl get pvc {f.get('claim')} {_ns(f)} -o yaml",)),
                          Fix("or delete the Lost claim and recreate it (the data of the lost PV is not in the "
                              "cluster any more)", (f"kubectl delete pvc {f.get('claim')} {_ns(f)}",))],
    "LOCAL_PV_NODE_GONE": _local_node_gone,
    "ZONE_WITHOUT_NODES": _zone_without_nodes,
    "PV_AFFINITY_MATCHES_NO_NODE": lambda f: [
        Fix("label a node as the PV's affinity asks, or (MutablePVNodeAffinity on, data reachable there) update "
            "the PV's affinity", (f"kubectl get pv {f.get('pv')} -o jsonpath='{{.spec.nodeAffinity}}'",))],
    "CLASS_TOPOLOGY_MATCHES_NO_NODE": lambda f: [
        Fix(f"fix class {f.get('storage_class')}'s allowedTopologies (a class is immutable: recreate it) to name "
            "labels nodes have", (f"kubectl get storageclass {f.get('storage_class')} -o yaml",
                                  "kubectl get nodes --show-labels"))],
    "IMMEDIATE_BINDING_WRONG_ZONE": _immediate_wrong_zone,
    "POD_PINNED_AWAY_FROM_VOLUME": lambda f: [
        Fix(f"let the pod run where its volume is ({f.get('volume_where')}): change its nodeSelector/affinity",
            (_edit_pod(f, "nodeSelector/affinity"),)),
        _recreate_claim(f, "spec.storageClassName: a WaitForFirstConsumer class", ", if the data need not be kept")],
    "PINNED_OUTSIDE_ALLOWED_TOPOLOGIES": lambda f: [
        Fix(f"class {f.get('storage_class')} provisions only in {f.get('volume_where')}: use a class whose "
            f"allowedTopologies include {f.get('pod_where')} (recreate the claim with it)",
            ("kubectl get storageclass -o custom-columns=NAME:.metadata.name,TOPOLOGIES:.allowedTopologies",)),
        Fix(f"or let the pod run where the class provisions ({f.get('volume_where')}): change its "
            "nodeSelector/affinity", (_edit_pod(f, "nodeSelector/affinity"),))],
    "VOLUMES_DISJOINT": lambda f: [Fix("the pod's volumes are reachable from disjoint nodes: keep them in one "
                                       "zone (one WaitForFirstConsumer class for all), or split the pod")],
    "POD_SELECTOR_MATCHES_NO_NODE": lambda f: [
        Fix("fix the pod's nodeSelector/affinity, or label a node to match",
            ("kubectl get nodes --show-labels", _edit_pod(f, "nodeSelector/affinity")))],
    "VOLUME_NODES_UNAVAILABLE": _taints,
    "NODES_UNAVAILABLE": _taints,
    "NO_NODES": lambda f: [Fix("add nodes")],
    "SCHEDULABLE": lambda f: [],
}


def fixes(cause: Cause) -> list[Fix]:
    """The fixes for a cause, most direct first; [] when nothing needs fixing."""
    make = FIXES.get(cause.code)
    return make(cause.facts) if make else []
