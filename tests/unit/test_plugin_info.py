"""GetPluginInfo for `pvchaos certify`: which sockets of a kind node are asked, what
`pvchaos-csi info` printed, and which answer is the driver's (a name other than the
CSIDriver's is a finding, no answer falls back with the reason)."""

from __future__ import annotations

import json

import pytest

from pvchaos import certify_package as pkg
from pvchaos.clusters.plugin_info import PluginInfo, candidate_sockets, choose_plugin, parse_info_line

DRIVER = "vendor.csi.pvchaos.dev"
OWN = f"/var/lib/kubelet/plugins/{DRIVER}/csi.sock"


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

