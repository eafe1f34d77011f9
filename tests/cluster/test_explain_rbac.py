"""`pvchaos explain` needs nothing but reads: it runs as a ServiceAccount whose role
allows get/list/watch only, and a role missing one resource gets one line naming the
verb and the resource (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client

from pvchaos import cli
from pvchaos.kit import expect as x
from pvchaos.kit.workspace import Workspace
from pvchaos.kube import builders as b
from pvchaos.kube import objects as o

pytestmark = [pytest.mark.needs("zones", "static-pv")]
READ = ["get", "list", "watch"]
CORE = ["pods", "events", "persistentvolumeclaims", "persistentvolumes", "nodes"]


def reader_kubeconfig(ws: Workspace, tmp_path: Path, hint: str, core: list[str]) -> Path:
    """A kubeconfig for a fresh ServiceAccount bound to a get/list/watch-only ClusterRole."""
    name = ws.name(hint)
    rbac, core_api = client.RbacAuthorizationV1Api(ws.kube.api), client.CoreV1Api(ws.kube.api)
    core_api.create_namespaced_service_account(ws.namespace, {"metadata": {"name": name}})
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": [""], "resources": core, "verbs": READ},
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": READ}]})
    ws.cleanup.push(f"ClusterRole {name}", lambda: rbac.delete_cluster_role(name))
    rbac.create_cluster_role_binding({"metadata": {"name": name},
                                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                  "name": name},
                                      "subjects": [{"kind": "ServiceAccount", "name": name,
                                                    "namespace": ws.namespace}]})
    ws.cleanup.push(f"ClusterRoleBinding {name}", lambda: rbac.delete_cluster_role_binding(name))
    token = core_api.create_namespaced_service_account_token(
        name, ws.namespace, {"spec": {"expirationSeconds": 600}}).status.token
    path = tmp_path / f"{hint}.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "reader",
        "clusters": [{"name": "c", "cluster": {"server": ws.kube.api.configuration.host,
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "reader", "user": {"token": token}}],
        "contexts": [{"name": "reader", "context": {"cluster": "c", "user": "reader"}}]}))
    return path


def test_explain_with_read_only_permissions(ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x.bound_pair(ws, b.zone_affinity(ws.zones()[0]))
    ws.create(b.pod("app", ("data",), node_selector={o.ZONE_KEY: ws.zones()[1]}))
    x.pod_unschedulable(ws, "app", "NODE_AFFINITY_CONFLICT")

    reader = reader_kubeconfig(ws, tmp_path, "reader", CORE)
    assert cli.main(["explain", "app", "-n", ws.namespace, "--kubeconfig", str(reader)]) == 1
    out = capsys.readouterr().out
    assert "[IMMEDIATE_BINDING_WRONG_ZONE]" in out and "scheduler (agrees)" in out

    no_nodes = reader_kubeconfig(ws, tmp_path, "no-nodes", [r for r in CORE if r != "nodes"])
    assert cli.main(["explain", "app", "-n", ws.namespace, "--kubeconfig", str(no_nodes)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot list nodes at cluster scope (HTTP 403" in err[0], err


def test_bad_input_is_one_line(ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = str(ws.cluster.kubeconfig)
    x.bound_pair(ws, b.zone_affinity(ws.zones()[0]))
    ws.create(b.pod("runs", ("data",)))
    x.pod_runs(ws, "runs")
    cases = {
        "no such pod": (["explain", "ghost", "-n", ws.namespace, "--kubeconfig", kubeconfig], "no pod 'ghost'"),
        "not pending": (["explain", "runs", "-n", ws.namespace, "--kubeconfig", kubeconfig],
                        f"is not Pending (phase Running): it runs on node {x.node_of(ws, 'runs')['metadata']['name']}"),
        "unreachable": (["explain", "x", "--kubeconfig", str(unreachable_kubeconfig(tmp_path))],
                        "cannot reach the API server at https://127.0.0.1:1"),
        "no kubeconfig": (["explain", "x", "--kubeconfig", str(tmp_path / "none")],
                          "--kubeconfig: " + str(tmp_path / "none") + ": no such file"),
        "pod and --all-pending": (["explain", "x", "--all-pending", "--kubeconfig", kubeconfig], "name one POD"),
    }
    for what, (argv, wanted) in cases.items():
        assert cli.main(argv) == 2, what
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and wanted in err[0], (what, err)
    cli.main(["explain", "runs", "-n", ws.namespace, "--kubeconfig", kubeconfig])
    assert "its 1 PV(s)" in capsys.readouterr().err  # why the node it runs on fits


def unreachable_kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "unreachable.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    return path
