"""Records, once per cluster and process, what its control plane and the harness's CSI
sidecars really run with (command lines read back from the processes or static pods),
next to the Allure results; the report's environment and summary.md show it
(pvchaos/report.py `what_ran`). Read back, not declared: each component's timing flags
(upstream's default named where a flag is absent), kube-scheduler's effective plugin set
and retry timing from the `--config` it was started with, and a warning for a difference
from what the cluster declares and for every flag the harness did not set itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvchaos.clusters import running
from pvchaos.clusters.backend import ClusterHandle
from pvchaos.clusters.running import command_lines
from pvchaos.conformance import command_lines as cl
from pvchaos.kube.client import Kube

PREFIX = "pvchaos-ran-"  # <alluredir>/pvchaos-ran-<cluster>.json; Allure ignores such files
# Description rows of a cluster that say what provisioned its volumes (clusters/csi.py
# `description`, or the test double's): shown in the report's environment as well.
STORAGE_KEYS = ("provisioner", "external-attacher", "external-resizer", "csi options", "csi volume limit", "csi capacity",
                "csi retry interval")
_recorded: set[str] = set()


def record(config: pytest.Config, handle: ClusterHandle, kube: Kube) -> Path | None:
    """Write the cluster's running command lines, gates and warnings (first use only)."""
    results = config.getoption("allure_report_dir", None)
    if not results or handle.name in _recorded:
        return None
    _recorded.add(handle.name)
    components: dict[str, dict[str, object]] = {}
    warnings: list[str] = []
    mine = running.harness_command_lines(handle.directory)
    lines = {**command_lines(handle, kube), **running.csi_command_lines(handle.directory)}
    for component, argv in sorted(lines.items()):
        components[component] = {"flags": cl.configuration_flags(argv), "gates": cl.feature_gates(argv),
                                  "timing": cl.timing_settings(component, argv)}
        warnings += cl.warnings(component, argv, handle.description)
        if component in mine:
            warnings += cl.unset_flags(component, argv, mine[component])
    if "kube-scheduler" in lines:
        components["kube-scheduler"].update(_scheduler(lines["kube-scheduler"]))
    path = Path(results) / f"{PREFIX}{handle.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    storage = {k: v for k, v in handle.description.items() if k in STORAGE_KEYS}  # which provisioner ran
    path.write_text(json.dumps({"cluster": handle.name, "backend": handle.backend, "kubernetes": handle.k8s_version,
                                "components": components, "warnings": warnings, "storage": storage}, indent=1),
                    encoding="utf-8")
    return path


def _scheduler(argv: list[str]) -> dict[str, object]:
    """The scheduler's profiles as it loaded them (enabled and disabled plugins) and its
    retry timing; "unknown" where its --config file is not readable from here."""
    config, source = running.scheduler_config(argv)
    if config is None and source.startswith("--config"):  # a file named, not readable from here
        return {"config": source, "profiles": "unknown", "scheduler timing": "unknown"}
    return {"config": source, "profiles": cl.scheduler_profiles(config), "scheduler timing": cl.scheduler_timing(config)}
