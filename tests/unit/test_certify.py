"""`pvchaos certify`'s pure parts: the driver directory read and refused before any
cluster, discovery from the cluster's objects, the profile checked against it, one row
per suite from Allure results, and the report."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from pvchaos import certify_package as pkg
from pvchaos.cli import main
from pvchaos.clusters import vendor_package as vp
from pvchaos.drivers.profile import DriverProfile, parse_profile
from tests.unit.package_fixtures import image_archive

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "vendor-driver"
DRIVER = "vendor.csi.pvchaos.dev"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """The example package's manifests and profile, with stand-in archives of its images."""
    root = tmp_path / "pkg"
    root.mkdir()
    for f in EXAMPLE.glob("*.yaml"):
        shutil.copy(f, root / f.name)
    image_archive(root / "images" / "all.tar", ["pvchaos.dev/vendor/pvchaos-csi:0.1.0",
                                                "pvchaos.dev/vendor/csi-provisioner:v6.4.0",
                                                "pvchaos.dev/vendor/csi-attacher:v4.13.0",
                                                "pvchaos.dev/vendor/csi-snapshotter:v8.7.0",
                                                "pvchaos.dev/vendor/csi-resizer:v2.3.0"])
    return root


# ---- the directory ------------------------------------------------------------------------

def test_the_example_package_reads(package: Path) -> None:
    p = vp.load_package(package)
    assert p.driver_name == DRIVER and p.storage_class == "vendor-zonal"
    assert [m.name for m in p.manifests] == sorted(m.name for m in p.manifests)
    assert p.profile is not None and p.profile.name == "profile.yaml"
    assert p.profile not in p.manifests
    assert {w.kind for w in p.workloads} == {"Deployment", "DaemonSet"}
    assert p.runs_snapshotter, "its controller runs upstream's csi-snapshotter"
    assert p.runs_resizer, "and upstream's csi-resizer"


def test_no_manifests_is_refused(tmp_path: Path) -> None:
    with pytest.raises(vp.PackageError, match="no manifests"):
        vp.load_package(tmp_path)


def test_an_archive_that_is_not_an_image_is_refused(package: Path) -> None:
    (package / "images" / "bad.tar").write_text("not a tar at all")
    with pytest.raises(vp.PackageError, match=r"bad\.tar: not an image archive"):
        vp.load_package(package)


def test_a_tar_without_a_manifest_is_refused(package: Path) -> None:
    with tarfile.open(package / "images" / "plain.tar", "w") as tar:
        tar.addfile(tarfile.TarInfo("hello"), io.BytesIO(b""))
    with pytest.raises(vp.PackageError, match="no manifest.json or index.json"):
        vp.load_package(package)


def test_an_image_in_no_archive_is_refused_for_kind_only(package: Path) -> None:
    (package / "images" / "all.tar").unlink()
    image_archive(package / "images" / "some.tar", ["pvchaos.dev/vendor/pvchaos-csi:0.1.0"])
    with pytest.raises(vp.PackageError, match="csi-provisioner:v6.4.0, which is in no archive"):
        vp.load_package(package)
    assert vp.load_package(package, need_images=False).driver_name == DRIVER


def test_a_document_that_is_not_an_object_is_refused(package: Path) -> None:
    (package / "09-bad.yaml").write_text("kind: ConfigMap\n")
    with pytest.raises(vp.PackageError, match=r"09-bad\.yaml: document 1 is not a Kubernetes object"):
        vp.load_package(package)


def test_a_package_without_its_storage_class_is_refused(package: Path) -> None:
    (package / "05-storageclass.yaml").unlink()
    with pytest.raises(vp.PackageError, match=f"no StorageClass with provisioner {DRIVER}"):
        vp.load_package(package)


def test_image_names_are_normalised() -> None:
    assert vp.normalise_image("busybox") == "docker.io/library/busybox:latest"
    assert vp.normalise_image("pvchaos.dev/x/y:1") == "pvchaos.dev/x/y:1"
    assert vp.normalise_image("me/y") == "docker.io/me/y:latest"


@pytest.mark.parametrize("make", ["empty", "notimage"])
def test_the_cli_refuses_in_one_line_before_any_cluster(tmp_path: Path, package: Path, make: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    if make == "empty":
        target = tmp_path / "empty"
        target.mkdir()
    else:
        (package / "images" / "bad.tar").write_bytes(b"\0" * 10)
        target = package
    assert main(["certify", "--driver-dir", str(target), "--report-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pvchaos: "), err
    assert not (tmp_path / "r").exists()


def test_existing_needs_a_kubeconfig(package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certify", "--driver-dir", str(package), "--backend", "existing"]) == 2
    assert "--kubeconfig" in capsys.readouterr().err


# ---- discovery and the profile --------------------------------------------------------------

def node(name: str, control_plane: bool = False) -> dict:
    labels = {"node-role.kubernetes.io/control-plane": ""} if control_plane else {}
    return {"metadata": {"name": name, "labels": labels}}


def csinode(name: str, keys: list[str] | None, count: int | None = 20) -> dict:
    drivers = [] if keys is None else [{"name": DRIVER, "nodeID": name, "topologyKeys": keys,
                                        **({"allocatable": {"count": count}} if count is not None else {})}]
    return {"metadata": {"name": name}, "spec": {"drivers": drivers}}


CSIDRIVER = {"metadata": {"name": DRIVER}, "spec": {"attachRequired": True, "storageCapacity": False,
                                                    "fsGroupPolicy": "File"}}
SC = {"metadata": {"name": "vendor-zonal"}, "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer"}
NODES = [node("cp", control_plane=True), node("zone-a-1"), node("zone-b-1")]


def profile(**caps: bool) -> DriverProfile:
    return parse_profile({"StorageClass": {"FromExistingClassName": "vendor-zonal"},
                          "DriverInfo": {"Name": DRIVER, "TopologyKeys": [ZONE],
                                         "Capabilities": {"persistence": True, **caps}}})


def test_discovery_reads_the_cluster() -> None:
    d = pkg.discover(DRIVER, CSIDRIVER, [csinode("zone-a-1", [ZONE, HOST], 20), csinode("zone-b-1", [HOST, ZONE], 16)],
                     NODES, SC)
    assert d.attach_required is True and d.storage_capacity is False and d.fs_group_policy == "File"
    assert d.topology_keys == (HOST, ZONE)
    assert d.max_volumes == 16
    assert [n.node for n in d.nodes] == ["zone-a-1", "zone-b-1"]  # the control plane does not count
    assert pkg.missing_registrations(d) == []
    assert d.table()["volumeLimits"] == "16" and d.table()["volumeBindingMode"] == "WaitForFirstConsumer"


def test_a_worker_without_the_driver_is_missing() -> None:
    d = pkg.discover(DRIVER, CSIDRIVER, [csinode("zone-a-1", [ZONE])], NODES, SC)
    assert pkg.missing_registrations(d) == ["zone-b-1"]


def test_the_profile_agrees_with_a_good_driver() -> None:
    d = pkg.discover(DRIVER, CSIDRIVER, [csinode("zone-a-1", [ZONE, HOST]), csinode("zone-b-1", [ZONE, HOST])],
                     NODES, SC)
    assert pkg.compare(profile(topology=True, volumeLimits=True), d) == []


def test_missing_topology_is_a_disagreement_naming_the_key() -> None:
    d = pkg.discover(DRIVER, CSIDRIVER, [csinode("zone-a-1", []), csinode("zone-b-1", [])], NODES, SC)
    lines = [x.line() for x in pkg.compare(profile(topology=True), d)]
    assert any("no topology keys" in x for x in lines)
    assert any(ZONE in x and "zone-a-1, zone-b-1" in x for x in lines), lines


def test_capacity_and_expansion_disagreements() -> None:
    d = pkg.discover(DRIVER, CSIDRIVER, [csinode("zone-a-1", [ZONE]), csinode("zone-b-1", [ZONE])], NODES, SC)
    caps = {x.capability for x in pkg.compare(profile(topology=True, capacity=True, controllerExpansion=True), d)}
    assert caps == {"capacity", "controllerExpansion"}


def test_no_profile_no_disagreement_and_a_generated_profile_parses() -> None:
    d = pkg.discover(DRIVER, CSIDRIVER, [csinode("zone-a-1", [ZONE]), csinode("zone-b-1", [ZONE])], NODES, SC)
    assert pkg.compare(None, d) == []
    generated = parse_profile(pkg.generated_profile(d, "vendor-zonal"))
    assert generated.has("topology") and generated.topology_keys == (ZONE,)
    assert generated.storage_class_source == "FromExistingClassName"


# ---- rows and the report ------------------------------------------------------------------

def result(name: str, suite: str, status: str, message: str = "", stop: int = 1, missing: str | None = None) -> dict:
    labels = [{"name": "suite", "value": f"suites.test_{suite}"}]
    if missing:
        labels.append({"name": "pvchaos.missing-capability", "value": missing})
    return {"uuid": f"u-{name}-{stop}", "name": name, "fullName": f"suites.test_{suite}#{name}", "historyId": name,
            "status": status, "stop": stop, "statusDetails": {"message": message}, "labels": labels}


def test_one_row_per_suite() -> None:
    rows = {r.suite: r for r in pkg.suite_rows([
        result("a", "binding_modes", "passed"),
        result("b", "binding_modes", "failed", "first\nsecond", stop=1),
        result("b", "binding_modes", "passed", stop=2),  # the retry counts
        result("c", "reclaim", "failed", "PV not deleted"),
        result("d", "capacity", "skipped", "Skipped: driver x: no capacity (profile)", missing="capacity"),
        result("e", "csi_topology", "skipped", "Skipped: backend existing: no attach", missing="attach"),
        result("f", "csi_topology", "skipped", "Skipped: backend existing: no attach", missing="attach"),
        result("g", "csi_topology", "skipped", "Skipped: backend existing: cannot start a cluster with x=1"),
        result("h", "csi_topology", "skipped", "Skipped: backend existing: no node-failure; backend existing: no attach",
               missing="attach"),
        result("i", "node_failure", "skipped", "Skipped: a reason without the word", missing="node-failure"),
    ], ["binding_modes", "reclaim", "capacity", "topology", "csi_topology", "node_failure"])}
    assert rows["binding_modes"].outcome == "passed" and rows["binding_modes"].passed == 2
    assert rows["reclaim"].outcome == "failed" and rows["reclaim"].reason == "c: PV not deleted"
    assert rows["reclaim"].link == "allure-results/u-c-1-result.json"
    assert rows["capacity"].outcome == "skipped" and rows["capacity"].reason == "driver x: no capacity (profile)"
    assert rows["topology"].outcome == "failed" and "did not run" in rows["topology"].reason
    assert rows["csi_topology"].outcome == "skipped" and rows["csi_topology"].skipped == 4
    assert rows["csi_topology"].reason == ("backend existing: no attach; backend existing: cannot start a cluster with "
                                           "x=1; backend existing: no node-failure")
    assert rows["node_failure"].reason == "no node-failure: a reason without the word"


def certification(**kw: object) -> pkg.Certification:
    base: dict = dict(driver=DRIVER, driver_version="0.1.0", version_source="CSIDriver label", k8s_version="v1.36.3",
                      backend="kind", discovered={"topology": ZONE}, declared={"topology": ZONE}, disagreements=[],
                      rows=[pkg.SuiteRow("binding_modes", "passed", 3, provisioned=4, tier="core")],
                      command="bin/pvchaos certify --driver-dir x", tiers=("core",),
                      capabilities=[pkg.CapabilityRow("dynamic-provisioning", "a class", {"core": "passed (3)"},
                                                      "exercised")])
    base.update(kw)
    return pkg.Certification(**base)


def test_report_of_a_good_driver(tmp_path: Path) -> None:
    c = certification()
    assert c.exit_code() == 0
    md, js = pkg.write_report(tmp_path, c)
    text = md.read_text()
    assert "**CERTIFIED**" in text and "0.1.0" in text and "v1.36.3" in text and "bin/pvchaos certify --driver-dir x" in text
    assert "| binding_modes | core | passed | 3 | 0 | 0 | 4 / 0 / 0 |" in text
    assert "| dynamic-provisioning | a class | passed (3) | exercised |" in text
    assert json.loads(js.read_text())["verdict"] == "CERTIFIED"


def cresult(suite: str, name: str, status: str, exercised: tuple[str, ...] = (), volumes: str = "") -> dict:
    labels = [{"name": "suite", "value": f"test_{suite}"}, *({"name": "pvchaos.exercised", "value": w} for w in exercised)]
    if volumes:
        labels.append({"name": "pvchaos.volumes", "value": volumes})
    return {"uuid": name, "historyId": name, "name": name, "status": status, "labels": labels, "stop": 1}


def tier(suite: str) -> str:
    return {"binding_modes": "core", "attach_detach": "disruption"}.get(suite, "other")


def test_a_capability_no_passing_test_showed_is_not_certified_and_says_why() -> None:
    """No pass without evidence: attach is the driver's, but the only test that attached failed
    or never ran; a pass that made no volume of the driver shows nothing."""
    results = [cresult("binding_modes", "a", "passed", ("dynamic-provisioning", "topology"), "provisioned 2, attached 0, "
                      "published 0"),
               cresult("binding_modes", "b", "passed")]  # static volumes only: no evidence of the driver
    discovery = pkg.Discovery(DRIVER, attach_required=True, nodes=(pkg.NodeRegistration("n", True, (ZONE,), 8),))
    caps = pkg.driver_capabilities(discovery, None)
    assert set(caps) == {"dynamic-provisioning", "publish", "access-mode ReadWriteOnce", "topology", "attach",
                         "volume-limits"}
    rows = pkg.suite_rows(results, ["binding_modes", "attach_detach"], tier)
    assert rows[0].provisioned == 2 and rows[1].outcome == "failed" and "did not run" in rows[1].reason
    by = {r.capability: r for r in pkg.capability_rows(caps, results, ("core", "disruption"), tier, rows)}
    assert by["topology"].outcome == "exercised" and by["topology"].tiers == {"core": "passed (1)", "disruption": "-"}
    assert by["attach"].outcome == "not exercised" and "attach_detach" in by["attach"].why
    c = certification(capabilities=list(by.values()), rows=rows[:1])
    assert c.verdict == pkg.NOT_CERTIFIED and c.exit_code() == 1
    assert "capabilities not exercised: publish, access-mode ReadWriteOnce, attach, volume-limits" in pkg.render_markdown(c)
    failing = pkg.capability_rows(caps, [*results, cresult("attach_detach", "c", "failed", ("attach",))],
                                  ("core", "disruption"), tier, rows)
    assert certification(capabilities=failing).verdict == pkg.FAILED


def test_a_disagreement_or_a_leftover_fails_the_report() -> None:
    d = pkg.Disagreement(f"TopologyKeys {ZONE}", ZONE, "no key in the CSINode of zone-a-1")
    c = certification(disagreements=[d])
    assert c.exit_code() == 1 and ZONE in pkg.render_markdown(c) and "| **no** |" in pkg.render_markdown(c)
    leaked = certification(findings=["left behind by the run: PersistentVolume pv-1 (Released)"])
    assert leaked.exit_code() == 1 and "pv-1" in json.dumps(pkg.to_json(leaked))


def test_a_failed_row_links_to_allure() -> None:
    row = pkg.SuiteRow("reclaim", "failed", 0, 1, 0, "c: boom", "allure-results/u1-result.json")
    assert "[c: boom](allure-results/u1-result.json)" in pkg.render_markdown(certification(rows=[row]))


def test_a_package_with_build_py_builds_its_missing_images_once(package: Path) -> None:
    from pvchaos import certify

    archive = package / "images" / "all.tar"
    saved = archive.read_bytes()
    archive.unlink()
    (package / "saved.bin").write_bytes(saved)
    (package / "build.py").write_text("from pathlib import Path\nhere = Path(__file__).parent\n"
                                      "(here / 'images' / 'all.tar').write_bytes((here / 'saved.bin').read_bytes())\n")
    assert certify._load(package, need_images=True).driver_name == DRIVER
    (package / "build.py").write_text("raise SystemExit('no go toolchain')\n")
    archive.unlink()
    with pytest.raises(Exception, match=r"build\.py: exit 1: no go toolchain"):
        certify._load(package, need_images=True)


def test_static_pvs_are_mountable_on_an_existing_cluster_of_real_kubelets() -> None:
    from pvchaos.clusters.existing import real_kubelets

    real = {"metadata": {"name": "zone-a-1", "annotations": {"node.alpha.kubernetes.io/ttl": "0"}}}
    kwok = {"metadata": {"name": "zone-a-2", "annotations": {"kwok.x-k8s.io/node": "fake"}}}
    assert real_kubelets([real, {"metadata": {"name": "cp"}}])
    assert not real_kubelets([real, kwok]) and not real_kubelets([])


def test_declared_snapshots_and_clones_must_be_exercised_where_the_controller_is_not_asked() -> None:
    """Discovery asks the node plugin's socket; a controller-only capability the profile
    declares (snapshotDataSource, pvcDataSource) is still one the run must exercise."""
    from pvchaos.drivers.profile import parse_profile

    profile = parse_profile({"StorageClass": {"FromName": True}, "SnapshotClass": {"FromName": True},
                             "DriverInfo": {"Name": DRIVER, "Capabilities": {"snapshotDataSource": True,
                                                                             "pvcDataSource": True}}}, "p.yaml", None)
    caps = pkg.driver_capabilities(pkg.Discovery(DRIVER), profile)
    assert caps["snapshots"] == "profile capability snapshotDataSource" and caps["clones"].startswith("profile")
    discovered = pkg.driver_capabilities(pkg.Discovery(DRIVER, controller_capabilities=("CREATE_DELETE_SNAPSHOT",)),
                                         profile)
    assert discovered["snapshots"] == "ControllerGetCapabilities CREATE_DELETE_SNAPSHOT", "discovery comes first"
    results = [cresult("snapshots", "r", "passed", ("dynamic-provisioning", "snapshots"), "provisioned 2, attached 0, "
                       "published 0")]
    rows = pkg.suite_rows(results, ["snapshots"], lambda _: "core")
    by = {r.capability: r for r in pkg.capability_rows(caps, results, ("core",), lambda _: "core", rows)}
    assert by["snapshots"].outcome == "exercised" and by["clones"].outcome == "not exercised"


def test_a_block_volume_exercised_is_the_evidence_of_block_and_block_false_is_not_supported() -> None:
    """A profile that declares block makes `volume-mode Block` a capability the run must
    show: a passing test with one of the driver's Block volumes does. A profile that says
    block false asks nothing of it, and the block_volumes suite skips saying why."""
    from pvchaos.drivers.profile import parse_profile, skip_reason

    def profile(block: bool):  # type: ignore[no-untyped-def]
        return parse_profile({"StorageClass": {"FromName": True},
                              "DriverInfo": {"Name": DRIVER, "Capabilities": {"persistence": True, "block": block}}},
                             "p.yaml", None)

    caps = pkg.driver_capabilities(pkg.Discovery(DRIVER), profile(True))
    assert caps["volume-mode Block"] == "profile capability block"
    results = [cresult("block_volumes", "b", "passed", ("dynamic-provisioning", "volume-mode Block"),
                       "provisioned 1, attached 1, published 1")]
    rows = pkg.suite_rows(results, ["block_volumes"], lambda _: "core")
    by = {r.capability: r for r in pkg.capability_rows(caps, results, ("core",), lambda _: "core", rows)}
    assert by["volume-mode Block"].outcome == "exercised"
    unshown = {r.capability: r for r in pkg.capability_rows(caps, [], ("core",), lambda _: "core", rows)}
    assert "block_volumes" in unshown["volume-mode Block"].why
    assert "volume-mode Block" not in pkg.driver_capabilities(pkg.Discovery(DRIVER), profile(False))
    assert skip_reason(profile(False), "block") == (f"driver {DRIVER}: no block (profile capability block=false: "
                                                    "not supported)")
