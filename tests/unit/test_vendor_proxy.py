"""The fault proxy wired into a vendor's manifests (issue 36): the kubelet's and the
sidecars' sockets go through it, without the vendor changing a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pvchaos.clusters import vendor_proxy as vp
from pvchaos.clusters.vendor_package import load_package

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
IMAGE = "pvchaos.dev/certify/pvchaos-csi-proxy:test"


def _objects(name: str) -> list[Any]:
    return [doc for _, doc in load_package(EXAMPLES / name, need_images=False).objects]


def _workload(docs: list[Any], kind: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def _containers(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["spec"]["template"]["spec"]["containers"]}


def test_example_package_is_wired_on_both_sides() -> None:
    original = _objects("vendor-driver")
    wiring = vp.wire(original, IMAGE)
    assert wiring.wired, wiring.refusal
    node = _containers(_workload(list(wiring.documents), "DaemonSet"))
    registrar = node["node-driver-registrar"]["args"]
    assert "--kubelet-registration-path=/var/lib/kubelet/plugins/vendor.csi.pvchaos.dev/pvchaos-proxy.sock" in registrar
    assert "--csi-address=/csi/csi.sock" in registrar  # the registrar itself still asks the driver
    proxy = node[vp.PROXY_CONTAINER]
    assert proxy["image"] == IMAGE and proxy["imagePullPolicy"] == "Never"
    assert proxy["args"][:3] == ["proxy", "--listen=unix:///csi/pvchaos-proxy.sock", "--target=unix:///csi/csi.sock"]
    assert {"name": "plugin-dir", "mountPath": "/csi"} in proxy["volumeMounts"]
    assert f"--rules={vp.NODE_PROXY_RULES}" in proxy["args"]
    ctrl = _containers(_workload(list(wiring.documents), "Deployment"))
    for sidecar in ("csi-provisioner", "csi-attacher"):
        assert "--csi-address=/csi/pvchaos-proxy.sock" in ctrl[sidecar]["args"], ctrl[sidecar]["args"]
    assert "--endpoint=unix:///csi/csi.sock" in ctrl["driver"]["args"]  # the driver serves where it did
    assert f"--rules={vp.CONTROLLER_RULES}" in ctrl[vp.PROXY_CONTAINER]["args"]
    assert len([c for c in ctrl if c.startswith(vp.PROXY_CONTAINER)]) == 1  # one proxy for both sidecars
    # the package itself is untouched
    assert vp.PROXY_CONTAINER not in _containers(_workload(original, "Deployment"))


def test_an_address_in_an_env_variable_is_rewritten_there() -> None:
    docs = _objects("vendor-driver")
    ctrl = _workload(docs, "Deployment")
    for c in ctrl["spec"]["template"]["spec"]["containers"][1:]:
        c["args"] = ["--csi-address=$(ADDRESS)", *c["args"][1:]]
        c["env"] = [{"name": "ADDRESS", "value": "/csi/csi.sock"}]
    wiring = vp.wire(docs, IMAGE)
    assert wiring.wired, wiring.refusal
    sidecar = _containers(_workload(list(wiring.documents), "Deployment"))["csi-provisioner"]
    assert sidecar["args"][0] == "--csi-address=$(ADDRESS)"
    assert sidecar["env"] == [{"name": "ADDRESS", "value": "/csi/pvchaos-proxy.sock"}]


def test_per_node_provisioning_is_refused_with_the_reason() -> None:
    wiring = vp.wire(_objects("vendor-node-local"), IMAGE)
    assert not wiring.wired
    assert "per-node provisioning has no one controller-side proxy" in wiring.refusal, wiring.refusal
    assert wiring.node_sockets  # its node side is wired all the same


def test_a_registration_path_for_another_socket_is_named() -> None:
    docs = _objects("vendor-driver")
    node = _workload(docs, "DaemonSet")
    registrar = _containers(node)["node-driver-registrar"]
    registrar["args"] = ["registrar", "--csi-address=/csi/csi.sock",
                         "--kubelet-registration-path=/var/lib/kubelet/plugins/x/other.sock"]
    wiring = vp.wire(docs, IMAGE)
    assert "name different sockets" in wiring.refusal, wiring.refusal
