"""`pvchaos explain POD`: why a pod is Pending and what fixes it, on any cluster.

Reads through ``kube.explain_read`` (list calls only), reasons through
``conformance.explain`` (pure), and renders a short report for people or JSON for tools
(schema ``pvchaos.explain/v2``, docs/explain.md). Exit codes: 0 every pod explained is
schedulable, 1 a cause was found, 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pvchaos.clusters import arguments
from pvchaos.conformance.explain import Cause, Exclusion, Explanation, explain, explain_placed
from pvchaos.conformance.remedy import fixes
from pvchaos.conformance.verdicts import claim_states, node_verdict
from pvchaos.conformance.volume_setup import placed_and_waiting
from pvchaos.kube.client import Kube, connect
from pvchaos.kube.explain_read import ClusterView, read_view
from pvchaos.kube.kinds import Obj

SCHEMA = "pvchaos.explain/v2"  # v2: "causes" lists every cause (v1 had the first only)
NODES_SHOWN = 12  # above this many nodes, the text report groups nodes by their reason


class ExplainInputError(ValueError):
    """Bad input: no such pod, a pod that is not Pending, a missing kubeconfig."""


def _meta(obj: Obj) -> dict[str, Any]:
    return obj.get("metadata") or {}


def is_unscheduled_pending(pod: Obj, nodes: Sequence[Obj] | None = None) -> bool:
    """Pending and not placed: no nodeName, or (given ``nodes``) a nodeName of a node that
    does not exist, which no kubelet will ever start."""
    if (pod.get("status") or {}).get("phase") != "Pending":
        return False
    where = (pod.get("spec") or {}).get("nodeName")
    return not where or (nodes is not None and where not in {_meta(n).get("name") for n in nodes})


def why_it_fits(view: ClusterView, pod: Obj) -> str:
    """For a pod that is not Pending: where it runs, and why that node satisfies it."""
    where = (pod.get("spec") or {}).get("nodeName")
    phase = (pod.get("status") or {}).get("phase")
    key = f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}"
    if not where:
        return f"pod {key} is not Pending (phase {phase}) and was never scheduled"
    node = next((n for n in view.nodes if _meta(n).get("name") == where), None)
    if node is None:
        return f"pod {key} is not Pending (phase {phase}): it was scheduled to node {where}, which no longer exists"
    if phase == "Pending":
        return (f"pod {key} is scheduled, not waiting for the scheduler: it is bound to node {where} and waits for "
                "that node's kubelet to start it (phase Pending)")
    scene = view.scene(pod)
    claims = claim_states(scene)
    verdict = node_verdict(scene, node, claims)
    zone = f" (zone {verdict.zone})" if verdict.zone else ""
    bound = [c for c in claims if c.pv]
    if verdict.fits:
        volumes = f"its {len(bound)} PV(s) ({', '.join(str(c.pv) for c in bound)}) allow that node, " if bound else ""
        return (f"pod {key} is not Pending (phase {phase}): it runs on node {where}{zone}; {volumes}its "
                "nodeSelector/affinity match the node's labels and it tolerates the node's taints")
    return (f"pod {key} is not Pending (phase {phase}): it runs on node {where}{zone}, although now "
            f"{verdict.first.detail if verdict.first else ''} (constraints are IgnoredDuringExecution)")


# ---- rendering -----------------------------------------------------------------------------

def _exclusion_json(e: Exclusion | None) -> dict[str, Any] | None:
    return asdict(e) if e is not None else None


def _cause_json(cause: Cause, with_fixes: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"code": cause.code, "summary": cause.summary, "details": list(cause.details)}
    if with_fixes:
        out["fixes"] = [{"text": f.text, "commands": list(f.commands)} for f in fixes(cause)]
    return out


def to_json(e: Explanation) -> dict[str, Any]:
    """One pod's explanation in the stable schema (docs/explain.md)."""
    agreement = e.scheduler
    return {
        "pod": e.pod,
        "schedulable": e.schedulable,
        "cause": _cause_json(e.cause, False),
        "fixes": [{"text": f.text, "commands": list(f.commands)} for f in fixes(e.cause)],
        "causes": [_cause_json(c, True) for c in e.causes],
        "fitting_nodes": list(e.fitting),
        "pod_wide": _exclusion_json(e.pod_wide),
        "claims": [asdict(c) for c in e.claims],
        "nodes": [{"node": v.node, "zone": v.zone, "fits": v.fits, "excluded_by": _exclusion_json(v.first),
                   "also": [asdict(x) for x in v.exclusions[1:]]} for v in e.nodes],
        "scheduler": {
            "message": agreement.message,
            "agrees": agreement.agrees,
            "predicted": dict(agreement.predicted),
            "predicted_pod_wide": agreement.predicted_pod_wide,
            "reported": dict(agreement.parsed.counts) if agreement.parsed else {},
            "reported_pod_wide": agreement.parsed.pod_wide if agreement.parsed else None,
            "differences": list(agreement.differences),
            "stale": agreement.stale,
        },
    }


def _node_lines(e: Explanation) -> list[str]:
    if e.pod_wide is not None:
        return [f"  every node: {e.pod_wide.detail}"]
    if len(e.nodes) <= NODES_SHOWN:
        width = max(len(v.node) for v in e.nodes) if e.nodes else 0
        return [f"  {v.node:<{width}}  {v.zone or '-':<8} "
                + ("fits" if v.fits or v.first is None else f"{v.first.filter}: {v.first.detail}")
                for v in e.nodes if v.first or v.fits]
    groups: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for v in e.nodes:
        text = "fits" if v.fits or v.first is None else f"{v.first.filter}: {v.first.detail}"
        groups[text] += 1
        examples.setdefault(text, []).append(v.node)
    return [f"  {count} node(s), e.g. {', '.join(examples[text][:3])}: {text}" for text, count in groups.most_common()]


def to_text(e: Explanation) -> str:
    """A short report: cause, claims, nodes, the scheduler's word, fixes."""
    lines = [f"pod {e.pod}", f"cause: {e.cause.summary}  [{e.cause.code}]"]
    lines += [f"  {d}" for d in e.cause.details if d and d not in e.cause.summary]
    if len(e.causes) > 1:
        lines.append(f"also ({len(e.causes) - 1} more, fix after the first):")
        lines += [f"  {c.summary}  [{c.code}]" for c in e.causes[1:]]
    if e.claims:
        lines.append("claims:")
        for c in e.claims:
            pv = f" -> PV {c.pv}" if c.pv else ""
            mode = f", {c.binding_mode}" if c.binding_mode else ""
            shown_class = c.storage_class or '""'
            lines.append(f"  {c.key}: {c.status}{pv} (class {shown_class}{mode})")
    placed = not e.nodes and e.pod_wide is None  # explain_placed: the scheduler is done
    if not placed:
        lines.append(f"nodes ({len(e.fitting)} of {len(e.nodes)} fit):")
        lines += _node_lines(e)
    s = e.scheduler
    if s.message is None:
        lines.append(f"scheduler: {s.differences[0]}" if placed and s.differences else
                     "scheduler: no FailedScheduling event yet")
    else:
        verdict = {True: "agrees", False: "DISAGREES", None: "not comparable"}[s.agrees]
        lines.append(f"scheduler ({verdict}): {s.message}")
        lines += [f"  - {d}" for d in s.differences]
    for n, cause in enumerate(e.causes):
        found = fixes(cause)
        if found:
            lines.append("fixes:" if n == 0 else f"fixes for [{cause.code}]:")
            for i, f in enumerate(found, 1):
                lines.append(f"  {i}. {f.text}")
                lines += [f"     $ {c}" for c in f.commands]
    return "\n".join(lines)


# ---- the command ---------------------------------------------------------------------------

def explain_view(view: ClusterView, pod_name: str | None, namespace: str | None) -> list[Explanation]:
    """Explanations of the pod (bad input unless it is Pending) or of every Pending pod that is
    unscheduled or held by a volume step on its node."""
    if pod_name is not None:
        if not view.pods:
            raise ExplainInputError(f"no pod {pod_name!r} in namespace {namespace}")
        pod = view.pods[0]
        if not is_unscheduled_pending(pod, view.nodes):
            placed = _placed(view, pod)
            if placed is None:
                raise ExplainInputError(why_it_fits(view, pod))
            return [placed]
        return [explain(view.scene(pod))]
    pending = sorted((p for p in view.pods if is_unscheduled_pending(p, view.nodes) or placed_and_waiting(p, view.nodes)),
                     key=lambda p: (_meta(p).get("namespace", ""), _meta(p).get("name", "")))
    found = [explain(view.scene(p)) if is_unscheduled_pending(p, view.nodes) else _placed(view, p) for p in pending]
    return [e for e in found if e is not None]


def _placed(view: ClusterView, pod: Obj) -> Explanation | None:
    """A pod placed on a node and still Pending: the volume step that holds it, if one reported."""
    return explain_placed(view.scene(pod)) if placed_and_waiting(pod, view.nodes) else None


def explain_pod_text(kube: Kube, namespace: str, pod_name: str) -> str | None:
    """The text report for one unscheduled Pending pod, None for any other pod (the plugin's use)."""
    view = read_view(kube, namespace, pod_name)
    if not view.pods:
        return None
    if not is_unscheduled_pending(view.pods[0], view.nodes):
        placed = _placed(view, view.pods[0])
        return to_text(placed) if placed else None
    return to_text(explain(view.scene(view.pods[0])))


def _kubeconfig(given: str | None) -> Path:
    path = Path(given or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or Path.home() / ".kube" / "config")
    if not path.is_file():
        raise ExplainInputError(f"kubeconfig {path} does not exist (give --kubeconfig or set KUBECONFIG)")
    return path


def run(args: argparse.Namespace) -> int:
    if bool(args.pod) == bool(args.all_pending):
        raise ExplainInputError("explain: name one POD, or give --all-pending")
    namespace = None if args.all_pending and args.all_namespaces else args.namespace
    try:
        kube = connect(_kubeconfig(args.kubeconfig), args.context)
    except ExplainInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the kubeconfig loader raises many kinds; one line for all
        raise ExplainInputError(f"cannot use the kubeconfig: {exc}") from None
    explanations = explain_view(read_view(kube, namespace, args.pod), args.pod, namespace)
    if args.output == "json":
        print(explanations_json(explanations))
    elif not explanations:
        print(f"no unscheduled Pending pods {'in namespace ' + namespace if namespace else 'in the cluster'}")
    else:
        print("\n\n".join(to_text(e) for e in explanations))
    return 1 if any(not e.schedulable for e in explanations) else 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pod", nargs="?", type=arguments.kube_name, help="the Pending pod to explain")
    p.add_argument("-n", "--namespace", default="default", type=arguments.kube_name)
    p.add_argument("--all-pending", action="store_true", help="every unscheduled Pending pod of the namespace")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="with --all-pending: of the whole cluster")
    p.add_argument("--kubeconfig", type=arguments.existing_file, help="default: $KUBECONFIG, then ~/.kube/config")
    p.add_argument("--context", type=arguments.free_text)
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")


def explanations_json(explanations: Sequence[Explanation]) -> str:
    return json.dumps({"schema": SCHEMA, "pods": [to_json(e) for e in explanations]}, indent=2)
