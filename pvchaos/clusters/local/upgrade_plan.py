"""What an in-place upgrade of a local cluster does, in order, and the command lines it
ends with (pure, so the order and the flags are unit-tested without starting anything).

The order is the version-skew policy's: kube-apiserver first (etcd keeps its data and
its process), then kube-controller-manager and kube-scheduler, which must never be newer
than the apiserver, then the kubelets (KWOK nodes: the version they report), which may
lag behind but never lead. Every component keeps its flags, ports and data; only the
binary and the feature-gate list (recomputed for the new version) change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from pvchaos.clusters.local.config import LocalClusterConfig, gates_flag
from pvchaos.tools.versions import release, skew_refusal

CONTROL_PLANE_ORDER = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
NODES = "nodes"  # the last step: every node reports the new kubelet version
GATES_PREFIX = "--feature-gates="
CONTROLLERS_PREFIX = "--controllers="


@dataclass(frozen=True)
class UpgradePlan:
    """One upgrade: versions, the steps in order, and (for self-checks) controllers the
    new controller-manager leaves out, as a broken upgrade would."""

    from_version: str
    to_version: str
    steps: tuple[str, ...] = (*CONTROL_PLANE_ORDER, NODES)
    new_gates: tuple[tuple[str, bool], ...] = ()
    kcm_disabled_controllers: tuple[str, ...] = ()
    forced: bool = False

    def describe(self) -> str:
        """One line: what happens, in order."""
        broken = (f"; kube-controller-manager without {', '.join(self.kcm_disabled_controllers)}"
                  if self.kcm_disabled_controllers else "")
        forced = " (forced past the version-skew policy)" if self.forced else ""
        return f"{self.from_version} -> {self.to_version}{forced}: etcd kept, then {' -> '.join(self.steps)}{broken}"


def plan_upgrade(cfg: LocalClusterConfig, to_version: str, force_skew: bool = False) -> UpgradePlan:
    """The plan for a cluster of `cfg`; ValueError in one line for a malformed version or
    a skew the policy forbids (unless `force_skew`, for a test of exactly that)."""
    release(to_version)
    refusal = skew_refusal(cfg.k8s_version, to_version)
    if refusal and not (force_skew and release(to_version) != release(cfg.k8s_version)):
        raise ValueError(refusal + ("" if force_skew else " (--force-skew to do it anyway)"))
    new_cfg = replace(cfg, k8s_version=to_version)  # re-validates the gates against the new minor
    return UpgradePlan(cfg.k8s_version, to_version, new_gates=tuple(sorted(new_cfg.effective_gates().items())),
                       forced=bool(refusal))


def unknown_gates(plan: UpgradePlan, known: frozenset[str]) -> list[str]:
    """Gates the new version's binaries would refuse to start with."""
    return sorted(g for g, _ in plan.new_gates if g not in known)


def upgraded_argv(component: str, argv: tuple[str, ...], binary: Path, plan: UpgradePlan) -> tuple[str, ...]:
    """The same command line with the new binary and the new version's gate list; the
    controller-manager also drops the plan's disabled controllers."""
    gates = gates_flag(dict(plan.new_gates))
    out: list[str] = [str(binary)]
    had_gates = False
    for arg in argv[1:]:
        if arg.startswith(GATES_PREFIX):
            had_gates = True
            out.extend(gates)
        elif arg.startswith(CONTROLLERS_PREFIX) and component == "kube-controller-manager":
            current = arg.removeprefix(CONTROLLERS_PREFIX).split(",")
            extra = [f"-{c}" for c in plan.kcm_disabled_controllers if f"-{c}" not in current]
            out.append(CONTROLLERS_PREFIX + ",".join([*current, *extra]))
        else:
            out.append(arg)
    if not had_gates:
        out.extend(gates)
    return tuple(out)
