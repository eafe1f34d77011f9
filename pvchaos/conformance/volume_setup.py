"""Why a placed pod is stuck in ContainerCreating: the volume steps after scheduling.

Once the scheduler has bound a pod to a node, what holds it is no longer a filter but
one of the volume steps between the node and the driver: the attach/detach controller
attaching the volume (a VolumeAttachment per CSI volume and node), the kubelet staging
and publishing it through the node plugin registered on that node. Each step reports
on the pod as an event, and the words are upstream's:

- ``FailedAttachVolume`` from attachdetach-controller: ``Multi-Attach error for volume
  "X" Volume is already exclusively attached to one node and can't be attached to
  another`` (or ``... already used by pod(s) ...``), reconciler.go
  ``reportMultiAttachError``; or ``AttachVolume.Attach failed for volume ...`` with the
  driver's error (the VolumeAttachment's ``status.attachError`` carries it too);
- ``FailedMount`` from the kubelet: ``MountVolume.MountDevice failed ...`` /
  ``MountVolume.SetUp failed ...`` with the node plugin's error, ``driver name X not
  found in the list of registered CSI drivers`` when the node plugin never registered
  (its CSINode lists no such driver), or ``Unable to attach or mount volumes: ...
  timed out waiting for the condition`` while an earlier step still waits.

Pure: the caller passes the pod, its events, the VolumeAttachments and CSINodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pvchaos.conformance.causes import Cause
from pvchaos.conformance.types import KubeObject, dig

MULTI_ATTACH = "Multi-Attach error"
NOT_REGISTERED = "not found in the list of registered CSI drivers"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


def _name(obj: KubeObject | None) -> str:
    return str(dig(obj, "metadata", "name", default=""))


def _pod_events(pod: KubeObject, events: Sequence[KubeObject], reason: str) -> list[KubeObject]:
    """The pod's events of one reason, newest last (same uid when the event names one)."""
    uid = dig(pod, "metadata", "uid")
    found = [e for e in events if dig(e, "reason") == reason and dig(e, "involvedObject", "kind") == "Pod"
             and dig(e, "involvedObject", "name") == _name(pod)
             and (not uid or not dig(e, "involvedObject", "uid") or dig(e, "involvedObject", "uid") == uid)]
    return sorted(found, key=lambda e: str(dig(e, "lastTimestamp") or dig(e, "eventTime") or ""))


def placed_and_waiting(pod: KubeObject, nodes: Sequence[KubeObject]) -> bool:
    """Pending, bound to a node that exists: the scheduler is done, the node's steps are not."""
    where = dig(pod, "spec", "nodeName")
    return dig(pod, "status", "phase") == "Pending" and bool(where) and where in {_name(n) for n in nodes}


def _facts(pod: KubeObject, **more: Any) -> dict[str, Any]:
    return {"pod": f"{dig(pod, 'metadata', 'namespace', default='default')}/{_name(pod)}",
            "namespace": dig(pod, "metadata", "namespace", default="default"),
            "node": dig(pod, "spec", "nodeName"), **more}


def _attached_elsewhere(pv: str | None, node: str, attachments: Sequence[KubeObject]) -> list[str]:
    """Nodes other than the pod's whose VolumeAttachment of this PV still stands."""
    return sorted({str(dig(a, "spec", "nodeName")) for a in attachments
                   if dig(a, "spec", "source", "persistentVolumeName") == pv and dig(a, "spec", "nodeName") != node})


def _volume_in(message: str) -> str | None:
    """The quoted volume of a kubelet or controller message: `for volume "pvc-1"`."""
    marker = 'for volume "'
    start = message.find(marker)
    if start < 0:
        return None
    rest = message[start + len(marker):]
    return rest.split('"', 1)[0] or None


def _node_state(nodes: Sequence[KubeObject], name: str) -> tuple[str, bool]:
    """(Ready status, out-of-service taint present) of a node; ("gone", False) if absent."""
    node = next((n for n in nodes if _name(n) == name), None)
    if node is None:
        return "gone", False
    ready = next((c.get("status") for c in dig(node, "status", "conditions", default=[]) or []
                  if c.get("type") == "Ready"), "Unknown")
    tainted = any(t.get("key") == OUT_OF_SERVICE for t in dig(node, "spec", "taints", default=[]) or [])
    return str(ready), tainted


def _multi_attach(pod: KubeObject, message: str, nodes: Sequence[KubeObject],
                  attachments: Sequence[KubeObject]) -> Cause:
    volume = _volume_in(message)
    node = str(dig(pod, "spec", "nodeName"))
    holders = _attached_elsewhere(volume, node, attachments)
    states = {h: _node_state(nodes, h) for h in holders}
    shown = ", ".join(f"{h} (Ready {s[0]}{', out-of-service' if s[1] else ''})" for h, s in states.items())
    where = f"; its VolumeAttachment still names {shown}" if holders else ""
    return Cause("MULTI_ATTACH", f"volume {volume or '?'} is attached to another node and is ReadWriteOnce: the "
                 f"attach/detach controller will not attach it to {node} until it is detached there{where}",
                 (message,), _facts(pod, volume=volume, holders=holders,
                                    holders_down=[h for h, s in states.items() if s[0] != "True"],
                                    tainted=[h for h, s in states.items() if s[1]]))


def _attach_failed(pod: KubeObject, message: str, attachments: Sequence[KubeObject]) -> Cause:
    volume = _volume_in(message)
    node = str(dig(pod, "spec", "nodeName"))
    errors = [str(dig(a, "status", "attachError", "message")) for a in attachments
              if dig(a, "spec", "source", "persistentVolumeName") == volume and dig(a, "spec", "nodeName") == node
              and dig(a, "status", "attachError", "message")]
    details = (message, *(f"VolumeAttachment attachError: {e}" for e in errors))
    return Cause("ATTACH_FAILED", f"attaching volume {volume or '?'} to node {node} failed: {message}", details,
                 _facts(pod, volume=volume, error=errors[-1] if errors else message))


def _driver_of(message: str) -> str | None:
    """`driver name csi.example.com not found in the list of registered CSI drivers`."""
    before = message.split(NOT_REGISTERED, 1)[0].rstrip()
    return before.rsplit(" ", 1)[-1] if "driver name" in before else None


def _not_registered(pod: KubeObject, message: str, csinodes: Sequence[KubeObject]) -> Cause:
    node = str(dig(pod, "spec", "nodeName"))
    driver = _driver_of(message)
    csinode = next((c for c in csinodes if _name(c) == node), None)
    registered = sorted(str(d.get("name")) for d in dig(csinode, "spec", "drivers", default=[]) or [])
    seen = (f"CSINode {node} lists {', '.join(registered) or 'no drivers'}" if csinode is not None
            else f"node {node} has no CSINode")
    return Cause("CSI_DRIVER_NOT_REGISTERED", f"CSI driver {driver or '?'} is not registered with the kubelet of "
                 f"node {node} ({seen}): its node plugin is not running there, or its registration socket is not in "
                 "/var/lib/kubelet/plugins_registry", (message,),
                 _facts(pod, driver=driver, registered=registered))


def _mount_failed(pod: KubeObject, message: str) -> Cause:
    volume = _volume_in(message)
    return Cause("MOUNT_FAILED", f"the kubelet of node {dig(pod, 'spec', 'nodeName')} cannot mount volume "
                 f"{volume or '?'}: {message}", (message,), _facts(pod, volume=volume, error=message))


def _is_timeout_summary(message: str) -> bool:
    """The kubelet's roll-up ("Unable to attach or mount volumes: ... timed out") only
    repeats that an earlier step waits; the step's own event is the cause."""
    return message.startswith("Unable to attach or mount volumes")


def setup_causes(pod: KubeObject, nodes: Sequence[KubeObject], events: Sequence[KubeObject],
                 attachments: Sequence[KubeObject] = (), csinodes: Sequence[KubeObject] = ()) -> tuple[Cause, ...]:
    """Every volume step that holds a placed pod, attach before mount; () when no step
    has reported a failure (the kubelet may simply not be done yet)."""
    out: list[Cause] = []
    attach = _pod_events(pod, events, "FailedAttachVolume")
    if attach:
        message = str(dig(attach[-1], "message", default=""))
        out.append(_multi_attach(pod, message, nodes, attachments) if MULTI_ATTACH in message
                   else _attach_failed(pod, message, attachments))
    mounts = [str(dig(e, "message", default="")) for e in _pod_events(pod, events, "FailedMount")]
    specific = [m for m in mounts if not _is_timeout_summary(m)]
    if specific:
        message = specific[-1]
        out.append(_not_registered(pod, message, csinodes) if NOT_REGISTERED in message else _mount_failed(pod, message))
    elif mounts and not out:
        out.append(Cause("VOLUME_SETUP_TIMEOUT", f"the kubelet of node {dig(pod, 'spec', 'nodeName')} timed out "
                         "waiting for the pod's volumes, and no attach or mount step reported its own error",
                         (mounts[-1],), _facts(pod, error=mounts[-1])))
    return tuple(out)
