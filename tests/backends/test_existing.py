"""The existing-cluster backend against real apiservers: the running dev cluster (gate on,
reached as a cluster the harness did not create) and a private gate-off local cluster."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from pvchaos.clusters.backend import Capability, ClusterError, ClusterHandle
from pvchaos.clusters.existing import PROBE_PREFIX, ExistingBackend, disruption_refusal, sweep
from pvchaos.kube.client import connect

NEVER = {Capability.OWNED, Capability.NODE_FAILURE, Capability.COMPONENT_RESTART}


def probe_pvs(kubeconfig: Path) -> list[str]:
    kube = connect(kubeconfig)
    try:
        return [pv.metadata.name for pv in kube.core.list_persistent_volume().items
                if pv.metadata.name.startswith(PROBE_PREFIX)]
    finally:
        kube.api.close()


def context_of(kubeconfig: Path) -> str:
    return yaml.safe_load(kubeconfig.read_text())["current-context"]


def test_discovers_zones_classes_and_the_gate(foreign_kubeconfig: Path) -> None:
    handle = ExistingBackend(foreign_kubeconfig).up()
    kube = connect(foreign_kubeconfig)
    zones = sorted({n.metadata.labels.get("topology.kubernetes.io/zone") for n in kube.core.list_node().items} - {None})
    classes = sorted(sc.metadata.name for sc in kube.storage.list_storage_class().items)
    kube.api.close()
    assert handle.backend == "existing" and handle.context == context_of(foreign_kubeconfig)
    assert handle.k8s_version.startswith("v1.")
    assert len(zones) >= 2 and handle.description["zones"] == ", ".join(zones)
    assert Capability.ZONES in handle.capabilities
    assert handle.feature_gates == {"MutablePVNodeAffinity": True}
    assert Capability.MUTABLE_PV_AFFINITY in handle.capabilities
    assert handle.description["MutablePVNodeAffinity"] == "on"
    assert Capability.STATIC_PV in handle.capabilities
    assert not handle.capabilities & NEVER and Capability.NODE_LABELS not in handle.capabilities
    assert handle.faults is None
    assert not handle.mountable_volumes, "a local cluster's KWOK nodes mount nothing: stand-in PVs stay as they are"
    for name in classes:
        assert f"{name} (" in handle.description["storage classes"]
    assert probe_pvs(foreign_kubeconfig) == [], "the probe PV was left behind"


def test_handle_carries_no_credentials(foreign_kubeconfig: Path) -> None:
    token = yaml.safe_load(foreign_kubeconfig.read_text())["users"][0]["user"]["token"]
    handle = ExistingBackend(foreign_kubeconfig).up()
    assert token not in repr(handle) and token not in str(handle.description)


def test_node_labels_need_both_flag_and_allow_list(foreign_kubeconfig: Path) -> None:
    ctx = context_of(foreign_kubeconfig)
    allowed = ExistingBackend(foreign_kubeconfig, allow_disruptive=True, allow_contexts=[ctx]).up()
    listed_only = ExistingBackend(foreign_kubeconfig, allow_disruptive=False, allow_contexts=[ctx]).up()
    other = ExistingBackend(foreign_kubeconfig, allow_disruptive=True, allow_contexts=["prod"]).up()
    assert Capability.NODE_LABELS in allowed.capabilities
    assert Capability.NODE_LABELS not in listed_only.capabilities
    assert Capability.NODE_LABELS not in other.capabilities
    assert not allowed.capabilities & NEVER
    assert probe_pvs(foreign_kubeconfig) == []


@pytest.mark.slow
def test_gate_off_is_detected_and_nothing_is_left(gate_off_cluster: Path) -> None:
    handle = ExistingBackend(gate_off_cluster).up()
    assert handle.feature_gates == {"MutablePVNodeAffinity": False}
    assert Capability.MUTABLE_PV_AFFINITY not in handle.capabilities
    assert "field is immutable" in handle.description["gate probe"]
    assert Capability.ZONES not in handle.capabilities, "one zone is not zones"
    kube = connect(gate_off_cluster)
    assert kube.core.list_persistent_volume().items == []
    kube.api.close()


# ---- bad input -----------------------------------------------------------------------

def one_line_error(backend: ExistingBackend) -> str:
    start = time.monotonic()
    with pytest.raises(ClusterError) as err:
        backend.up()
    assert time.monotonic() - start < 6, "an error must not wait out retries"
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_missing_kubeconfig(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "kubeconfig"
    assert one_line_error(ExistingBackend(missing)) == f"kubeconfig {missing} does not exist"


def test_context_not_in_kubeconfig(foreign_kubeconfig: Path) -> None:
    msg = one_line_error(ExistingBackend(foreign_kubeconfig, context="prod"))
    assert msg == f"kubeconfig {foreign_kubeconfig}: no context 'prod' (contexts: {context_of(foreign_kubeconfig)})"
    assert probe_pvs(foreign_kubeconfig) == []


def test_no_current_context(tmp_path: Path) -> None:
    cfg = tmp_path / "kubeconfig"
    cfg.write_text("apiVersion: v1\nkind: Config\ncontexts:\n- name: a\n  context: {cluster: a, user: a}\n")
    assert "no current-context; pass --context (contexts: a)" in one_line_error(ExistingBackend(cfg))


def test_unreachable_server(tmp_path: Path) -> None:
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "far",
        "clusters": [{"name": "far", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "far", "user": {"token": "s3cr3t-token-value"}}],
        "contexts": [{"name": "far", "context": {"cluster": "far", "user": "far"}}],
    }))
    msg = one_line_error(ExistingBackend(cfg))
    assert msg.startswith("context 'far': API server https://127.0.0.1:1 unreachable")
    assert "s3cr3t" not in msg


def test_wrong_credentials_are_one_line(foreign_kubeconfig: Path, tmp_path: Path) -> None:
    data = yaml.safe_load(foreign_kubeconfig.read_text())
    data["users"][0]["user"]["token"] = "not-the-token"
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(yaml.safe_dump(data))
    msg = one_line_error(ExistingBackend(cfg))
    assert msg.endswith("answered 401 Unauthorized") and "not-the-token" not in msg


# ---- the guard -----------------------------------------------------------------------

def handle(context: str, owned: bool = False) -> ClusterHandle:
    caps = frozenset({Capability.OWNED} if owned else set())
    return ClusterHandle(name=context, backend="existing", kubeconfig=Path("/k"), context=context,
                         k8s_version="v1.35.4", capabilities=caps)


def test_disruption_refusal_names_the_context_and_the_suites() -> None:
    suites = "node faults, zone outages, node label changes, component restarts"
    assert disruption_refusal(handle("prod"), True, ["staging"]) == (
        f"context 'prod' is not on the allow-list (--allow-context); disruptive suites skipped: {suites}")
    assert disruption_refusal(handle("prod"), False, ["prod"]) == (
        "context 'prod' is a cluster pvchaos did not create and --allow-disruptive was not given; "
        f"disruptive suites skipped: {suites}")
    assert disruption_refusal(handle("staging"), True, ["staging"]) is None
    assert disruption_refusal(handle("kind-pvchaos", owned=True), False, []) is None


# ---- the sweeper ---------------------------------------------------------------------

@pytest.mark.slow
def test_sweep_removes_only_what_the_harness_owns(gate_off_cluster: Path) -> None:
    kube = connect(gate_off_cluster)
    owned = {"pvchaos.dev/owned": "true"}

    def pv(name: str, labels: dict) -> dict:
        return {"metadata": {"name": name, "labels": labels}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "none",
            "csi": {"driver": "x.example.com", "volumeHandle": name}}}

    kube.core.create_persistent_volume(pv("pvchaos-left", owned))
    kube.core.create_persistent_volume(pv("theirs", {}))
    kube.storage.create_storage_class({"metadata": {"name": "pvchaos-sc", "labels": owned}, "provisioner": "x"})
    kube.storage.create_storage_class({"metadata": {"name": "their-sc"}, "provisioner": "x"})
    kube.core.create_namespace({"metadata": {"name": "pvchaos-ns", "labels": owned}})
    kube.core.create_namespace({"metadata": {"name": "team-ns", "labels": owned}})  # labelled, not ours by name
    kube.core.create_namespace({"metadata": {"name": "pvchaos-unlabelled"}})
    try:
        removed = sweep(kube)
        assert sorted(removed) == ["namespace/pvchaos-ns", "persistentvolume/pvchaos-left", "storageclass/pvchaos-sc"]
        assert sorted(p.metadata.name for p in kube.core.list_persistent_volume().items
                      if p.metadata.deletion_timestamp is None) == ["theirs"]
        assert [s.metadata.name for s in kube.storage.list_storage_class().items] == ["their-sc"]
        live = {n.metadata.name for n in kube.core.list_namespace().items if n.status.phase == "Active"}
        assert {"team-ns", "pvchaos-unlabelled"} <= live and "pvchaos-ns" not in live
    finally:
        for delete, name in ((kube.core.delete_persistent_volume, "theirs"), (kube.storage.delete_storage_class, "their-sc"),
                             (kube.core.delete_namespace, "team-ns"), (kube.core.delete_namespace, "pvchaos-unlabelled")):
            delete(name)
        kube.api.close()
