"""Records, once per cluster and process, what its control plane really runs with
(command lines read back from the processes or static pods), next to the Allure
results; the report's environment and summary.md show it, and a difference from what
the cluster declares becomes a warning line (pvchaos/report.py `what_ran`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvchaos.clusters.backend import ClusterHandle
from pvchaos.clusters.running import command_lines
from pvchaos.conformance import command_lines as cl
from pvchaos.kube.client import Kube

PREFIX = "pvchaos-ran-"  # <alluredir>/pvchaos-ran-<cluster>.json; Allure ignores such files
# Description rows of a cluster that say what provisioned its volumes (clusters/csi.py
# `description`, or the test double's): shown in the report's environment as well.
STORAGE_KEYS = ("provisioner", "external-attacher", "csi options", "csi volume limit", "csi capacity",
                "csi retry interval")
_recorded: set[str] = set()


def record(config: pytest.Config, handle: ClusterHandle, kube: Kube) -> Path | None:
    """Write the cluster's running command lines, gates and warnings (first use only)."""
    results = config.getoption("allure_report_dir", None)
    if not results or handle.name in _recorded:
        return None
    _recorded.add(handle.name)
    components = {}
    warnings: list[str] = []
    for component, argv in sorted(command_lines(handle, kube).items()):
        components[component] = {"flags": cl.configuration_flags(argv), "gates": cl.feature_gates(argv)}
        warnings += cl.warnings(component, argv, handle.description)
    path = Path(results) / f"{PREFIX}{handle.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    storage = {k: v for k, v in handle.description.items() if k in STORAGE_KEYS}  # which provisioner ran
    path.write_text(json.dumps({"cluster": handle.name, "backend": handle.backend, "kubernetes": handle.k8s_version,
                                "components": components, "warnings": warnings, "storage": storage}, indent=1),
                    encoding="utf-8")
    return path
