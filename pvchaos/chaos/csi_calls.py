"""Faults inside a CSI driver's calls, through the fault proxy in front of its socket
(`pvchaos-csi proxy`, docs/csi-fault-proxy.md): a rule in the proxy's rules file, which the
proxy re-reads when it changes, so nothing restarts and any driver works, ours or a
vendor's. Each fault is one rule with its own id; its undo (registered first, STYLE 5)
removes exactly that rule and attaches the calls it caught to the Allure result.

Where the proxy runs: the controller side (`where=None`, the host-side stack: external-
provisioner and external-attacher dial the proxy) or one node's (`where=<node>`, the
kubelet dials it; kind, through the node's shell).
"""

from __future__ import annotations

import fcntl
import json
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import allure

from pvchaos.chaos.fault import Fault, Target, apply
from pvchaos.clusters import csi
from pvchaos.clusters.backend import ClusterError, ClusterHandle, NodeStorageFaults
from pvchaos.clusters.kind_csi import NODE_PROXY_LOG, NODE_PROXY_RULES
from pvchaos.kube import naming

ACTIONS = ("error", "delay", "hang", "close", "fail_reply")
# The gRPC codes a rule may return (google.golang.org/grpc/codes, OK excluded).
CODES = ("Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
         "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
         "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated")


@dataclass(frozen=True)
class Rule:
    """One proxy rule, as the proxy reads it (proxy/rules.go); empty selectors match all."""

    id: str
    method: str
    action: str = "error"
    code: str = ""
    message: str = ""
    volume_id: str = ""
    snapshot_id: str = ""
    node_id: str = ""
    name: str = ""
    segment: Mapping[str, str] = field(default_factory=dict)
    nth: int = 0
    times: int = 0
    probability: float = 0.0
    seed: int = 0
    delay_ms: int = 0

    def __post_init__(self) -> None:
        if not self.method:
            raise ValueError("a CSI call fault needs a method, e.g. /csi.v1.Node/NodeStageVolume or NodeStageVolume")
        if self.action not in ACTIONS:
            raise ValueError(f"action {self.action!r}: want one of {', '.join(ACTIONS)}")
        if self.action in ("error", "fail_reply") and self.code not in CODES:
            raise ValueError(f"action {self.action}: code {self.code!r} is not one of {', '.join(CODES)}")
        if self.action == "delay" and self.delay_ms <= 0:
            raise ValueError("action delay: delay_ms must be > 0")
        if min(self.nth, self.times, self.delay_ms) < 0 or not 0 <= self.probability <= 1:
            raise ValueError("nth, times and delay_ms must be >= 0 and probability within 0..1")

    def to_json(self) -> dict[str, Any]:
        """Only the fields set: the proxy refuses unknown ones and defaults the rest."""
        return {k: v for k, v in asdict(self).items() if v or k in ("method", "action")}


class _Files:
    """One proxy's rules file and log, on the host or in a node."""

    def __init__(self, cluster: ClusterHandle, where: str | None):
        self.cluster, self.where = cluster, where
        if where is None:
            if cluster.directory is None:
                raise ClusterError(f"cluster {cluster.name}: no host-side CSI stack, so no controller-side proxy")
            paths = csi.paths_for(cluster.directory)
            if not paths.root.is_dir():
                raise ClusterError(f"cluster {cluster.name}: no host-side CSI stack at {paths.root}")
            self.rules, self.log = paths.proxy_rules, paths.proxy_log
        elif isinstance(cluster.faults, NodeStorageFaults):
            self.node: NodeStorageFaults = cluster.faults
        else:
            raise ClusterError(f"cluster {cluster.name}: backend {cluster.backend} runs no node-side CSI proxy "
                               f"(node {where}); node calls need real kubelets")

    def read_rules(self) -> list[dict[str, Any]]:
        text = (self.rules.read_text(encoding="utf-8") if self.where is None and self.rules.exists()
                else self.node.node_exec(self.where, f"cat {NODE_PROXY_RULES} 2>/dev/null || true")
                if self.where is not None else "")
        try:
            return list(json.loads(text).get("rules") or []) if text.strip() else []
        except ValueError:
            return []

    def write_rules(self, rules: list[dict[str, Any]]) -> None:
        """Whole (temp file + rename): the proxy never reads half a file."""
        text = json.dumps({"rules": rules})
        if self.where is None:
            tmp = self.rules.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(self.rules)
            return
        self.node.node_exec(self.where, f"printf %s {shlex.quote(text)} > {NODE_PROXY_RULES}.tmp && "
                                        f"mv {NODE_PROXY_RULES}.tmp {NODE_PROXY_RULES}")

    def read_log(self) -> list[dict[str, Any]]:
        if self.where is None:
            text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        else:
            text = self.node.node_exec(self.where, f"cat {NODE_PROXY_LOG} 2>/dev/null || true")
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def update(self, change: Any) -> None:
        """Read, change and write the rules under a lock (several faults at once)."""
        if self.where is None:
            with open(self.rules.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self.write_rules(change(self.read_rules()))
        else:
            self.write_rules(change(self.read_rules()))


def calls(cluster: ClusterHandle, where: str | None = None, rule: str | None = None) -> list[dict[str, Any]]:
    """The proxy's log, one dict per call (method, request, code, message, latency_ms,
    driver_ms, rule, action); only the calls `rule` (an id) caught, when given."""
    records = [r for r in _Files(cluster, where).read_log() if "method" in r]
    return [r for r in records if r.get("rule") == rule] if rule is not None else records


@allure.step("CSI call fault on {method}")
def csi_call_fault(ws: Target, method: str, *, action: str = "error", code: str = "", message: str = "",
                   where: str | None = None, volume_id: str = "", snapshot_id: str = "", node_id: str = "",
                   name: str = "", segment: Mapping[str, str] | None = None, nth: int = 0, times: int = 0,
                   probability: float = 0.0, seed: int = 0, delay_ms: int = 0, rule_id: str = "") -> Fault:
    """A rule in the proxy of `where` (None: the controller side; a node name: that node's)
    that makes matching calls of `method` fail, wait, hang, lose their connection, or lose
    their reply after the driver acted. The handle's `touched` is (rule id, method)."""
    rule = Rule(id=rule_id or naming.unique("csi-fault"), method=method, action=action,
                code=code, message=message or (f"pvchaos fault: {action} {code}".strip() if code else ""),
                volume_id=volume_id, snapshot_id=snapshot_id, node_id=node_id, name=name,
                segment=dict(segment or {}), nth=nth, times=times, probability=probability, seed=seed, delay_ms=delay_ms)
    files = _Files(ws.cluster, where)
    side = "controller side" if where is None else f"node {where}"

    def inject() -> None:
        files.update(lambda rules: [*(r for r in rules if r.get("id") != rule.id), rule.to_json()])

    def undo() -> None:
        files.update(lambda rules: [r for r in rules if r.get("id") != rule.id])
        caught = calls(ws.cluster, where, rule.id)
        allure.attach("\n".join(json.dumps(r) for r in caught) or "(no call matched)",
                      name=f"CSI calls caught by {rule.id} ({method}, {side})",
                      attachment_type=allure.attachment_type.TEXT)

    return apply(ws.cleanup, f"CSI {method} -> {action} {code} ({side})".replace("  ", " "),
                 (rule.id, method), inject, undo, f"lift the CSI fault {rule.id} on {method} ({side})")

