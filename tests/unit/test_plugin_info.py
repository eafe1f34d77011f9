"""GetPluginInfo for `pvchaos certify`: which sockets of a kind node are asked, what
`pvchaos-csi info` printed, which answer is the driver's, and what certify makes of it
(a name other than the CSIDriver's is a finding; no answer falls back to the label and
says why)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvchaos import certify
from pvchaos import certify_package as pkg
from pvchaos.clusters import vendor_package as vp
from pvchaos.clusters.backend import ClusterError
from pvchaos.clusters.plugin_info import FIND_SOCKETS, PluginInfo, candidate_sockets, choose_plugin, parse_info_line

DRIVER = "vendor.csi.pvchaos.dev"
OWN = f"/var/lib/kubelet/plugins/{DRIVER}/csi.sock"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vendor-driver"


def line(name: str = DRIVER, endpoint: str = f"unix://{OWN}", **extra: object) -> str:
    return json.dumps({"endpoint": endpoint, "name": name, "vendor_version": "0.1.0",
                       "capabilities": ["VOLUME_ACCESSIBILITY_CONSTRAINTS"], **extra})


def test_sockets_skip_the_registry_and_put_the_drivers_directory_first() -> None:
    found = "\n".join([
        "/var/lib/kubelet/plugins_registry/vendor.csi.pvchaos.dev-reg.sock",
        "/var/lib/kubelet/plugins/aaa.example.com/csi.sock",
        OWN,
        "/var/lib/kubelet/plugins/kubernetes.io/csi/x/plugins_registry/reg.sock",
        "/var/lib/kubelet/plugins/not-a-socket.txt",
        "relative/csi.sock",
        OWN,
        "",
    ])
    assert candidate_sockets(found, DRIVER) == [OWN, "/var/lib/kubelet/plugins/aaa.example.com/csi.sock"]
    assert candidate_sockets("", DRIVER) == []


def test_the_info_line_parses() -> None:
    info = parse_info_line("some warning\n" + line(node={"node_id": "zone-a-1", "max_volumes_per_node": 20}) + "\n")
    assert info == PluginInfo(f"unix://{OWN}", DRIVER, "0.1.0", ("VOLUME_ACCESSIBILITY_CONSTRAINTS",), "zone-a-1")


@pytest.mark.parametrize("text", ["", "not json", json.dumps({"name": ""}), json.dumps(["x"])])
def test_what_is_no_answer_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_info_line(text)
    assert "\n" not in str(exc.value)


def test_the_answer_naming_the_driver_wins() -> None:
    other = parse_info_line(line("aaa.example.com", "unix:///var/lib/kubelet/plugins/aaa.example.com/csi.sock"))
    own = parse_info_line(line())
    choice = choose_plugin(DRIVER, "zone-a-1", [other, own])
    assert choice.info == own and choice.finding is None
    assert choice.source == f"GetPluginInfo on node zone-a-1 ({OWN})"


def test_another_name_in_the_drivers_directory_is_a_finding() -> None:
    wrong = parse_info_line(line("vendor.csi.example.org"))
    choice = choose_plugin(DRIVER, "zone-a-1", [wrong])
    assert choice.info == wrong and choice.finding is not None
    assert "vendor.csi.example.org" in choice.finding and DRIVER in choice.finding and "zone-a-1" in choice.finding


def test_the_only_answer_elsewhere_is_a_mismatch_too_but_two_strangers_are_none() -> None:
    a = parse_info_line(line("a.example.com", "unix:///var/lib/kubelet/plugins/a/csi.sock"))
    b = parse_info_line(line("b.example.com", "unix:///var/lib/kubelet/plugins/b/csi.sock"))
    assert choose_plugin(DRIVER, "n", [a]).finding is not None
    none = choose_plugin(DRIVER, "n", [a, b])
    assert none.info is None and none.finding is None and "a.example.com" in none.source and "b.example.com" in none.source


def test_no_answer_says_what_failed() -> None:
    choice = choose_plugin(DRIVER, "zone-b-1", [], [f"{OWN}: GetPluginInfo: Unavailable"])
    assert choice.info is None and "zone-b-1" in choice.source and "Unavailable" in choice.source
    assert "no socket" in choose_plugin(DRIVER, "zone-b-1", []).source


def test_the_report_shows_version_source_and_plugin_name() -> None:
    c = pkg.Certification(driver=DRIVER, driver_version="0.1.0", version_source=f"GetPluginInfo on node zone-a-1 ({OWN})",
                          k8s_version="v1.36.3", backend="kind", discovered={}, declared={}, disagreements=[], rows=[],
                          plugin_name=DRIVER)
    text = pkg.render_markdown(c)
    assert f"| Version | 0.1.0 (GetPluginInfo on node zone-a-1 ({OWN})) |" in text
    assert f"| GetPluginInfo name | {DRIVER} |" in text
    assert pkg.to_json(c)["plugin_name"] == DRIVER



class _Backend:
    """Stands in for certify's target (NewKindClusters.plugin_info)."""

    def __init__(self, choice: object) -> None:
        self.choice, self.asked = choice, []

    def plugin_info(self, node: str, driver: str) -> object:
        self.asked.append((node, driver))
        if isinstance(self.choice, Exception):
            raise self.choice
        return self.choice


def _version(backend: object) -> tuple[str, str, str, list[str]]:
    """certify's version reading with the CSIDriver labelled 9.9 (no kubectl needed)."""
    package = vp.load_package(EXAMPLE, need_images=False)
    d = pkg.Discovery(DRIVER, nodes=(pkg.NodeRegistration("zone-a-1", False), pkg.NodeRegistration("zone-b-1", True)))
    objects = {"csidriver": {"metadata": {"labels": {"app.kubernetes.io/version": "9.9"}}}}
    return certify._version(objects, package, None, d, backend)  # type: ignore[arg-type]


def test_certify_reads_the_version_from_the_first_registered_worker() -> None:
    backend = _Backend(choose_plugin(DRIVER, "zone-b-1", [parse_info_line(line())]))
    assert _version(backend) == ("0.1.0", f"GetPluginInfo on node zone-b-1 ({OWN})", DRIVER, [])
    assert backend.asked == [("zone-b-1", DRIVER)]


def test_certify_falls_back_to_the_label_saying_why() -> None:
    version, source, name, findings = _version(object.__new__(certify.InstalledCluster))  # its plugin_info refuses
    assert (version, name, findings) == ("9.9", "", []) and "--backend existing has no access to the nodes" in source
    version, source, name, _ = _version(_Backend(choose_plugin(DRIVER, "zone-b-1", [], ["x.sock: refused"])))
    assert version == "9.9" and name == "" and "CSIDriver label" in source and "x.sock: refused" in source
    version, source, _, _ = _version(_Backend(ClusterError("node zone-b-1: cannot copy")))
    assert version == "9.9" and "cannot copy" in source


def test_certify_reports_another_name_as_a_finding() -> None:
    version, _, name, findings = _version(_Backend(choose_plugin(DRIVER, "zone-b-1", [parse_info_line(line("x.io"))])))
    assert version == "0.1.0" and name == "x.io" and len(findings) == 1 and "x.io" in findings[0]


def test_the_driver_answers_its_services_and_certification_follows_them() -> None:
    """Node and controller capabilities come from the driver (a controller's socket in its
    pod's emptyDir answers too); a capability it advertises must then be exercised."""
    node = parse_info_line(line(node={"node_id": "zone-a-1"}, node_capabilities=["STAGE_UNSTAGE_VOLUME"]))
    ctrl_sock = "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/socket-dir/csi.sock"
    ctrl = parse_info_line(line(endpoint=f"unix://{ctrl_sock}",
                                controller_capabilities=["CREATE_DELETE_SNAPSHOT", "CREATE_DELETE_VOLUME",
                                                         "EXPAND_VOLUME"]))
    choice = choose_plugin(DRIVER, "zone-a-1", [ctrl, node])
    assert choice.info == node, "the node plugin's socket is the one whose version is reported"
    assert choice.controller_capabilities(DRIVER) == ("CREATE_DELETE_SNAPSHOT", "CREATE_DELETE_VOLUME", "EXPAND_VOLUME")
    assert "/var/lib/kubelet/pods" in FIND_SOCKETS
    d = pkg.Discovery(DRIVER, controller_capabilities=choice.controller_capabilities(DRIVER),
                      node_capabilities=node.node_capabilities, services_source="pvchaos-csi info on node zone-a-1")
    caps = pkg.driver_capabilities(d, None)
    assert caps["snapshots"].endswith("CREATE_DELETE_SNAPSHOT") and caps["expansion"].endswith("EXPAND_VOLUME")
    assert d.table()["NodeGetCapabilities"] == "STAGE_UNSTAGE_VOLUME"
    assert pkg.Discovery(DRIVER, services_source="--backend existing has no access to the nodes").table()[
        "ControllerGetCapabilities"] == "not asked (--backend existing has no access to the nodes)"


def test_a_socket_too_long_to_dial_is_asked_through_a_short_link_that_goes_again() -> None:
    """A controller's emptyDir socket is past the 107 bytes connect() takes: before, its
    ControllerGetCapabilities was never read ("connect: invalid argument")."""
    from pvchaos.clusters.vendor_install import SOCKET_PATH_MAX, info_command

    short = "/var/lib/kubelet/plugins/vendor.csi.pvchaos.dev/csi.sock"
    assert info_command(short, 0).endswith(f"--endpoint unix://{short} --timeout 10s")
    long = ("/var/lib/kubelet/pods/52a6957b-f8bb-43d7-ba52-2b1a2c26a537/volumes/kubernetes.io~empty-dir/"
            "socket-dir/csi.sock")
    assert len(long) > SOCKET_PATH_MAX
    line = info_command(long, 3)
    assert line.startswith(f"ln -sf '{long}' /run/pvchaos-info-3.sock && ")
    assert "--endpoint unix:///run/pvchaos-info-3.sock" in line and line.endswith("rm -f /run/pvchaos-info-3.sock; exit $rc")
