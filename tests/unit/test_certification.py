"""The certification page: pure rendering, and reading real allure-pytest results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvchaos.certification import (
    MISSING_LABEL,
    SOURCE_LABEL,
    BehaviourResult,
    redact,
    render_certification,
    results_from_allure,
    write_allure_summary,
)
from pvchaos.drivers.profile import parse_profile

PROFILE = parse_profile({
    "ShortName": "ex", "StorageClass": {"FromExistingClassName": "gold"},
    "DriverInfo": {"Name": "csi.example.com", "TopologyKeys": ["topology.kubernetes.io/zone"],
                   "SupportedSizeRange": {"Min": "1Gi", "Max": "1Ti"},
                   "Capabilities": {"topology": False, "persistence": True, "block": True}},
}, "driver.yaml")

RESULTS = [
    BehaviourResult("3.10", "local PVs return to their node", "passed"),
    BehaviourResult("1.2", "gate off rejects a mutation", "failed", "expected 422 | got 200\nsecond line"),
    BehaviourResult("3.2", "allowedTopologies limits provisioning", "skipped",
                    "driver csi.example.com: no topology (profile capability topology=false)", "topology"),
    BehaviourResult("2.1", "RWX claim binds", "skipped", "backend kind: no rwx", "rwx"),
]


def test_page_lists_driver_capabilities_and_every_behaviour() -> None:
    page = render_certification(PROFILE, RESULTS)
    assert page.startswith("# CSI certification: csi.example.com\n")
    assert "**FAILED**: 1 passed, 1 failed, 2 skipped (4 behaviours)" in page
    assert "| Short name | ex |" in page and "| StorageClass | FromExistingClassName gold |" in page
    assert "| Size range | 1Gi to 1Ti |" in page
    assert "| topology | no |" in page and "| block | yes |" in page and "| RWX | unset (no) |" in page
    assert "Harness capabilities this driver provides: block, static-pv." in page
    rows = [line for line in page.split("## Behaviours")[1].splitlines() if line.startswith("| ")][1:]
    assert [r.split("|")[1].strip() for r in rows] == ["1.2", "2.1", "3.2", "3.10"], "natural order of ids"
    assert "| 1.2 | gate off rejects a mutation | **failed** | expected 422 \\| got 200 |" in page
    assert "| 3.2 | allowedTopologies limits provisioning | skipped: no topology | driver csi.example.com: " \
           "no topology (profile capability topology=false) |" in page
    assert "| 2.1 | RWX claim binds | skipped: no rwx | backend kind: no rwx |" in page
    assert "| 3.10 | local PVs return to their node | passed |  |" in page


def test_an_all_green_run_says_passed() -> None:
    page = render_certification(PROFILE, [BehaviourResult("1.1", "t", "passed")])
    assert "**PASSED**: 1 passed, 0 failed, 0 skipped (1 behaviours)" in page


def test_credentials_never_reach_the_page() -> None:
    leak = BehaviourResult("9", "t", "failed", "auth failed: token: abc.def.ghi with Bearer eyJhbGci")
    page = render_certification(PROFILE, [leak])
    assert "abc.def.ghi" not in page and "eyJhbGci" not in page and "token: <redacted>" in page
    assert redact("client-key-data: LS0tLS1") == "client-key-data: <redacted>"


def test_outcomes_are_checked() -> None:
    with pytest.raises(ValueError, match="outcome 'broken'"):
        BehaviourResult("1", "t", "broken")


def write_result(d: Path, name: str, **fields) -> None:
    (d / f"{name}-result.json").write_text(json.dumps({"name": name, "fullName": f"suites.t#{name}", **fields}))


def test_results_from_allure_files(tmp_path: Path) -> None:
    write_result(tmp_path, "a", status="passed", labels=[{"name": "behaviour", "value": "1.1"}])
    write_result(tmp_path, "b", status="broken", statusDetails={"message": "KeyError: x"})
    write_result(tmp_path, "c", status="skipped", statusDetails={"message": "Skipped: backend kind: no rwx"},
                 labels=[{"name": MISSING_LABEL, "value": "rwx"}, {"name": SOURCE_LABEL, "value": "backend kind"}])
    write_result(tmp_path, "d1", status="failed", historyId="h-d", stop=1, statusDetails={"message": "flaky"})
    write_result(tmp_path, "d2", status="passed", historyId="h-d", stop=2)
    write_result(tmp_path, "e", status="unknown")
    got = {r.title: r for r in results_from_allure(tmp_path)}
    assert set(got) == {"a", "b", "c", "d2", "e"}, "a retried test counts once, with its last attempt"
    assert got["a"].behaviour == "1.1" and got["b"].behaviour == "suites.t#b"
    assert (got["b"].outcome, got["b"].reason) == ("failed", "KeyError: x")
    assert (got["c"].outcome, got["c"].reason, got["c"].missing_capability) == ("skipped", "backend kind: no rwx", "rwx")
    assert (got["e"].outcome, got["e"].reason) == ("failed", "allure status 'unknown'")


def test_summary_goes_into_allure_and_is_not_read_back(tmp_path: Path) -> None:
    write_result(tmp_path, "a", status="passed")
    results = results_from_allure(tmp_path)
    path = write_allure_summary(tmp_path, PROFILE, results)
    body = json.loads(path.read_text())
    assert body["name"] == "CSI certification: csi.example.com" and body["status"] == "passed"
    attachment = tmp_path / body["attachments"][0]["source"]
    assert attachment.read_text() == render_certification(PROFILE, results)
    assert results_from_allure(tmp_path) == results


def test_reads_what_allure_pytest_really_writes(pytester: pytest.Pytester) -> None:
    """A tiny session through the real allure-pytest plugin (in-process), then read back.
    The skip is made by the plugin's own `skip_for` in a fixture, as the `cluster` fixture
    does: the capability reaches the page through a label, not by parsing the sentence."""
    pytester.makepyfile(test_demo="""
        import allure, pytest
        from pvchaos.clusters.backend import CapabilityMissing
        from pvchaos.plugin.fixtures import skip_for

        @pytest.fixture
        def no_topology():
            skip_for([CapabilityMissing('topology', 'driver d', 'profile capability topology=false')])

        @allure.label('behaviour', '1.2')
        def test_ok():
            pass

        def test_bad():
            assert 1 == 2, 'expected 422'

        def test_skip(no_topology):
            pass
    """)
    out = pytester.path / "allure-results"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--alluredir={out}")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    got = {r.title: r for r in results_from_allure(out)}
    assert got["test_ok"].outcome == "passed" and got["test_ok"].behaviour == "1.2"
    assert got["test_bad"].outcome == "failed" and "expected 422" in got["test_bad"].reason
    assert got["test_skip"].outcome == "skipped" and got["test_skip"].missing_capability == "topology"
    assert got["test_skip"].reason == "driver d: no topology (profile capability topology=false)"
