"""What a component really runs with, read from its command line (pure): the effective
value of each flag (the last occurrence wins, as Go's flag package does), its feature
gates, and where that differs from what the cluster declares about itself.

The report used to show the configuration the harness meant; a flag appended behind
its back (a second `--node-monitor-grace-period`, a patched manifest on kind) changed
the behaviour while the report still showed the harness's value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Flags whose values are per cluster (ports, addresses, files): left out of the summary,
# which compares configurations, not instances.
_INSTANCE_FLAG_WORDS = ("port", "address", "servers", "file", "dir", "kubeconfig", "cert", "key", "ca", "url",
                        "secure", "path", "etcd-prefix", "master", "bind", "authorization-webhook", "token", "endpoint")


def flag_occurrences(argv: Sequence[str]) -> list[tuple[str, str]]:
    """(name, value) of every `--name=value` and `--name value` in order; a bare
    `--name` is ("name", "true")."""
    out: list[tuple[str, str]] = []
    args = list(argv[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg[2:].partition("=")
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
                value, i = args[i + 1], i + 1
            elif not eq:
                value = "true"
            out.append((name, value))
        i += 1
    return out


def effective_flags(argv: Sequence[str]) -> dict[str, str]:
    """The value each flag takes effect with: the last occurrence."""
    return dict(flag_occurrences(argv))


def feature_gates(argv: Sequence[str]) -> dict[str, bool]:
    """The `--feature-gates` a component runs with (the last flag wins, as a whole)."""
    text = effective_flags(argv).get("feature-gates", "")
    gates = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = item.partition("=")
        gates[name] = value.lower() == "true"
    return gates


def configuration_flags(argv: Sequence[str]) -> dict[str, str]:
    """The effective flags that describe behaviour, without per-instance ones."""
    return {k: v for k, v in effective_flags(argv).items()
            if not any(w in k for w in _INSTANCE_FLAG_WORDS) and not v.startswith("/")}


def warnings(component: str, argv: Sequence[str], declared: Mapping[str, str]) -> list[str]:
    """Where the running command line contradicts itself or the cluster's declaration:
    a flag given twice with different values (the later one overrides what was set
    first), and a declared setting named like a flag whose effective value differs."""
    out = []
    seen: dict[str, str] = {}
    for name, value in flag_occurrences(argv):
        if name in seen and seen[name] != value:
            out.append(f"{component} gets --{name} twice: {seen[name]} then {value} (the last wins)")
        seen[name] = value
    effective = effective_flags(argv)
    for key, value in declared.items():
        if key in effective and value.split(" ", 1)[0] != effective[key]:
            out.append(f"{component} runs with --{key}={effective[key]}; the cluster declares {value}")
    return out


# ---- timing settings, read back -------------------------------------------------------

# The flags that set how fast a component notices and retries, with upstream's default
# when the flag is absent (v1.35; the sidecars' as of external-provisioner v5 and
# external-attacher v4). A bound in a suite holds for what ran, so the report shows
# these as they ran, default or not.
TIMING_FLAGS: dict[str, dict[str, str]] = {
    "kube-controller-manager": {"node-monitor-period": "5s", "node-monitor-grace-period": "50s",
                                "node-startup-grace-period": "1m0s", "pvclaimbinder-sync-period": "15s",
                                "attach-detach-reconcile-sync-period": "1m0s", "node-eviction-rate": "0.1",
                                "secondary-node-eviction-rate": "0.01", "unhealthy-zone-threshold": "0.55",
                                "large-cluster-size-threshold": "50"},
    "kube-apiserver": {"default-not-ready-toleration-seconds": "300",
                       "default-unreachable-toleration-seconds": "300"},
    "csi-provisioner": {"timeout": "10s", "retry-interval-start": "1s", "retry-interval-max": "5m",
                        "capacity-poll-interval": "1m"},
    "csi-attacher": {"timeout": "15s", "retry-interval-start": "1s", "retry-interval-max": "5m",
                     "resync": "10m"},
}
# KubeSchedulerConfiguration fields that time the scheduler's retries, with their defaults.
SCHEDULER_TIMING = {"podInitialBackoffSeconds": "1", "podMaxBackoffSeconds": "10",
                    "percentageOfNodesToScore": "adaptive"}
# kube-scheduler v1.35's default multiPoint plugins (pkg/scheduler/apis/config/v1/
# default_plugins.go), DynamicResources included (DynamicResourceAllocation is GA, on).
DEFAULT_SCHEDULER_PLUGINS = (
    "SchedulingGates", "PrioritySort", "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity",
    "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone",
    "PodTopologySpread", "InterPodAffinity", "DefaultPreemption", "NodeResourcesBalancedAllocation",
    "ImageLocality", "DefaultBinder", "DynamicResources")


def timing_settings(component: str, argv: Sequence[str]) -> dict[str, str]:
    """Each timing flag of the component as it takes effect: its value, or upstream's
    default marked as such when the command line does not set it."""
    effective = effective_flags(argv)
    return {flag: effective.get(flag, f"{default} (default)")
            for flag, default in TIMING_FLAGS.get(component, {}).items()}


def scheduler_profiles(config: Mapping[str, Any] | None) -> dict[str, dict[str, list[str]]]:
    """schedulerName -> the plugins that run ("enabled": the default multiPoint set minus
    what the profile disables, plus what it adds) and what it disables ("disabled", with
    "Name@point" for one extension point only). No config file: the default profile."""
    profiles = list((config or {}).get("profiles") or []) or [{"schedulerName": "default-scheduler"}]
    out: dict[str, dict[str, list[str]]] = {}
    for profile in profiles:
        plugins = profile.get("plugins") or {}
        multi = plugins.get("multiPoint") or {}
        off = [str(p.get("name")) for p in multi.get("disabled") or []]
        on = [str(p.get("name")) for p in multi.get("enabled") or []]
        enabled = [] if "*" in off else [p for p in DEFAULT_SCHEDULER_PLUGINS if p not in off]
        enabled += [p for p in on if p not in enabled]
        per_point = [f"{p.get('name')}@{point}" for point, spec in sorted(plugins.items()) if point != "multiPoint"
                     for p in (spec or {}).get("disabled") or []]
        out[str(profile.get("schedulerName") or "default-scheduler")] = {"enabled": enabled,
                                                                         "disabled": off + per_point}
    return out


def scheduler_timing(config: Mapping[str, Any] | None) -> dict[str, str]:
    """The scheduler's retry timing from its configuration, defaults marked."""
    return {k: str((config or {})[k]) if (config or {}).get(k) is not None else f"{d} (default)"
            for k, d in SCHEDULER_TIMING.items()}


def unset_flags(component: str, running: Sequence[str], harness: Sequence[str]) -> list[str]:
    """A warning for every flag a component runs with that the harness did not give it
    (absent from the harness's own command line, or with another value there)."""
    mine = effective_flags(harness)
    out = []
    for name, value in effective_flags(running).items():
        if name not in mine:
            out.append(f"{component} runs with --{name}={value}, which the harness did not set")
        elif mine[name] != value:
            out.append(f"{component} runs with --{name}={value}; the harness set {mine[name]}")
    return out
