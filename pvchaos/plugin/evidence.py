"""Evidence attached to Allure only when a test fails: the test's objects, its events,
the scheduler's messages, the nodes, and for every pod left Pending unscheduled the
`pvchaos explain` report (root cause, per-node reasons, fixes), so a reader needs no
cluster to debug."""

from __future__ import annotations

import allure
import yaml

from pvchaos.explain import explain_pod_text, is_unscheduled_pending
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import kinds
from pvchaos.kube import objects as o
from pvchaos.kube.kinds import event_lines
from pvchaos.kube.wait import describe


def attach(ws: Workspace) -> None:
    """Objects, events and scheduler messages of the failed test, as Allure attachments."""
    try:
        docs = []
        for kind in ("Pod", "PersistentVolumeClaim", "StatefulSet"):
            docs += [describe(obj) for obj in ws.list(kind)]
        for kind, name in ws.cluster_scoped:
            obj = ws.get(kind, name)
            if obj:
                docs.append(describe(obj))
        allure.attach("\n---\n".join(docs) or "(none)", "objects.yaml", allure.attachment_type.YAML)
        events = kinds.list_objects(ws.kube, "Event", ws.namespace)[0]
        allure.attach("\n".join(event_lines(events)) or "(none)", "events.txt", allure.attachment_type.TEXT)
        failed = [e for e in events if e.get("reason") == "FailedScheduling"]
        if failed:
            allure.attach("\n".join(event_lines(failed)), "FailedScheduling.txt", allure.attachment_type.TEXT)
        nodes = [{"name": o.name(n), "labels": o.labels(n), "taints": o.taints(n)} for n in ws.nodes()]
        allure.attach(yaml.safe_dump(nodes, sort_keys=False), "nodes.yaml", allure.attachment_type.YAML)
        attach_explanations(ws)
    except Exception as exc:  # noqa: BLE001 - evidence is best effort; the failure stands
        allure.attach(f"could not gather evidence: {exc}", "evidence-error.txt", allure.attachment_type.TEXT)


def attach_explanations(ws: Workspace) -> None:
    """`pvchaos explain` for each unscheduled Pending pod of the test, one attachment each."""
    for pod in ws.list("Pod"):
        if is_unscheduled_pending(pod):
            text = explain_pod_text(ws.kube, ws.namespace, o.name(pod))
            if text:
                allure.attach(text, f"explain-{o.name(pod)}.txt", allure.attachment_type.TEXT)
