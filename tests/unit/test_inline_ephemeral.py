"""CSI inline ephemeral volumes (issue 37): who has the capability (pvchaos-csi's CSIDriver,
a vendor package's, an existing cluster's, a profile's InlineVolumes), what a pod with one
looks like, the evidence it leaves, and what certify makes of it."""

from __future__ import annotations

from pathlib import Path

from pvchaos import certify_package as pkg
from pvchaos.clusters import csi
from pvchaos.clusters.backend import Capability, ClusterHandle
from pvchaos.clusters.existing import inline_drivers
from pvchaos.clusters.kind import PROVIDER, KindBackend
from pvchaos.clusters.local.cluster import local_capabilities
from pvchaos.clusters.local.config import LocalClusterConfig
from pvchaos.clusters.provider import ProvideHooks
from pvchaos.clusters.request import ClusterRequest
from pvchaos.clusters.vendor_package import load_package
from pvchaos.conformance.volume_evidence import evidence
from pvchaos.drivers.driver import HarnessDriver, ProfileDriver, missing_for
from pvchaos.drivers.profile import parse_profile, skip_reason
from pvchaos.kube import builders as b
from tests.unit.test_kind_request import EXAMPLE, defaults

DRIVER = "vendor.csi.pvchaos.dev"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _profile(inline: list | None) -> object:
    data: dict = {"StorageClass": {"FromName": True}, "DriverInfo": {"Name": DRIVER}}
    if inline is not None:
        data["InlineVolumes"] = inline
    return parse_profile(data, "p.yaml", None)


def test_pvchaos_csi_lists_both_lifecycle_modes_and_its_clusters_declare_inline_volumes() -> None:
    assert csi.csi_driver_object(csi.CsiOptions())["spec"]["podInfoOnMount"] is True, "the kubelet's ephemeral mark"
    assert Capability.INLINE_EPHEMERAL in local_capabilities(LocalClusterConfig("t"))
    assert Capability.INLINE_EPHEMERAL not in local_capabilities(LocalClusterConfig("t", provisioner_kind="test-double"))
    assert Capability.INLINE_EPHEMERAL in KindBackend.for_request(ClusterRequest(), defaults(False), cluster="t").capabilities()


def test_a_vendor_package_has_inline_volumes_when_its_csidriver_lists_ephemeral() -> None:
    assert load_package(EXAMPLE, need_images=False).lifecycle_modes == ("Persistent", "Ephemeral")
    assert load_package(EXAMPLES / "vendor-node-local", need_images=False).lifecycle_modes == ("Persistent",)
    assert Capability.INLINE_EPHEMERAL in KindBackend.for_request(ClusterRequest(), defaults(True), cluster="t").capabilities()
    local = KindBackend.for_request(ClusterRequest(), defaults(True, EXAMPLES / "vendor-node-local"), cluster="t")
    assert Capability.INLINE_EPHEMERAL not in local.capabilities()
    details = PROVIDER.missing_details(ClusterRequest(), defaults(True, EXAMPLES / "vendor-node-local"), ProvideHooks())
    assert details[Capability.INLINE_EPHEMERAL].endswith("volumeLifecycleModes ['Persistent']: not supported")
    # the CSIDriver is the reason, before the profile's missing InlineVolumes
    profile = _profile(None)
    missing = missing_for(local.capabilities(), "kind", profile, Capability.INLINE_EPHEMERAL)  # type: ignore[arg-type]
    assert missing is not None and missing.source == "backend kind" and not missing.detail


def test_an_existing_cluster_names_the_drivers_with_the_ephemeral_mode() -> None:
    drivers = [{"metadata": {"name": "b.csi"}, "spec": {"volumeLifecycleModes": ["Persistent", "Ephemeral"]}},
               {"metadata": {"name": "a.csi"}, "spec": {}}, {"metadata": {"name": "c.csi"},
                                                            "spec": {"volumeLifecycleModes": ["Ephemeral"]}}]
    assert inline_drivers(drivers) == ["b.csi", "c.csi"], "no volumeLifecycleModes is Persistent only"


def test_a_profile_needs_inline_volumes_as_upstream_does() -> None:
    without, with_one = _profile(None), _profile([{"Attributes": {"size": "1Mi"}, "ReadOnly": True}])
    assert "profile lists no InlineVolumes" in str(skip_reason(without, Capability.INLINE_EPHEMERAL))  # type: ignore[arg-type]
    assert skip_reason(with_one, Capability.INLINE_EPHEMERAL) is None  # type: ignore[arg-type]
    cluster = ClusterHandle("c", "kind", Path("k"), None, "1.35.4", frozenset({Capability.INLINE_EPHEMERAL}))
    source = ProfileDriver(with_one, cluster).inline_volume()  # type: ignore[arg-type]
    assert source == {"driver": DRIVER, "volumeAttributes": {"size": "1Mi"}, "readOnly": True}
    bare = ClusterHandle("c", "kind", Path("k"), None, "1.35.4", frozenset())
    missing = missing_for(bare.capabilities, "kind", with_one, Capability.INLINE_EPHEMERAL)  # type: ignore[arg-type]
    assert missing is not None and missing.source == "backend kind", "the driver's CSIDriver must list Ephemeral too"


def test_a_pod_with_inline_volumes_mounts_them_after_its_claims() -> None:
    cluster = ClusterHandle("c", "local", Path("k"), None, "1.35.4", frozenset({Capability.INLINE_EPHEMERAL}),
                            zonal_class_provisioner=csi.DRIVER_NAME)
    source = HarnessDriver(cluster).inline_volume()
    assert source == {"driver": csi.DRIVER_NAME, "volumeAttributes": {csi.INLINE_SIZE_ATTRIBUTE: "16Mi"}}
    pod = b.pod("p", ("data",), inline=[source])
    assert [v.get("csi") or v.get("persistentVolumeClaim") for v in pod["spec"]["volumes"]] == [
        {"claimName": "data"}, source]
    assert [m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]] == ["/data/0", "/data/1"]


def test_inline_volumes_of_pods_that_ran_are_evidence_on_real_kubelets_only() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v0", "csi": {"driver": DRIVER}},
                                                           {"name": "v1", "csi": {"driver": "other.csi"}}]},
           "status": {"containerStatuses": [{"state": {"running": {}}}]}}
    seen = evidence(DRIVER, [], [], [], [pod], True)
    assert seen.inline == 1 and "inline-ephemeral" in seen.exercised() and seen.line().endswith(", inline 1")
    assert evidence(DRIVER, [], [], [], [pod], False).inline == 0, "KWOK publishes nothing"
    result = {"labels": [{"name": pkg.EVIDENCE_LABEL, "value": seen.line()}]}
    assert pkg.volume_counts(result) == (0, 0, 0), "the suite table still reads the label"


def test_certify_discovers_inline_volumes_and_a_profile_that_claims_them_without_the_mode_disagrees() -> None:
    modes = pkg.Discovery(DRIVER, volume_lifecycle_modes=("Persistent", "Ephemeral"))
    assert pkg.driver_capabilities(modes, None)["inline-ephemeral"] == "CSIDriver volumeLifecycleModes Ephemeral"
    assert pkg.generated_profile(modes, "sc")["InlineVolumes"] == [{"Attributes": {}}]
    persistent = pkg.Discovery(DRIVER, volume_lifecycle_modes=("Persistent",))
    assert "inline-ephemeral" not in pkg.driver_capabilities(persistent, None)
    assert "InlineVolumes" not in pkg.generated_profile(persistent, "sc")
    lines = [d.line() for d in pkg.compare(_profile([{}]), persistent)]  # type: ignore[arg-type]
    assert any(line.startswith("InlineVolumes:") and "no Ephemeral" in line for line in lines), lines
    assert persistent.table()["volumeLifecycleModes"] == "Persistent"
