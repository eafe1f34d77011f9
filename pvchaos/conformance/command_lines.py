"""What a component really runs with, read from its command line (pure): the effective
value of each flag (the last occurrence wins, as Go's flag package does), its feature
gates, and where that differs from what the cluster declares about itself.

The report used to show the configuration the harness meant; a flag appended behind
its back (a second `--node-monitor-grace-period`, a patched manifest on kind) changed
the behaviour while the report still showed the harness's value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Flags whose values are per cluster (ports, addresses, files): left out of the summary,
# which compares configurations, not instances.
_INSTANCE_FLAG_WORDS = ("port", "address", "servers", "file", "dir", "kubeconfig", "cert", "key", "ca", "url",
                        "secure", "path", "etcd-prefix", "master", "bind", "authorization-webhook", "token")


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
