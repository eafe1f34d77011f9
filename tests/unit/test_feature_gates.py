"""The gate table: read from each version's kube_features.go, and kept equal to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvchaos.clusters.local.config import GATE_FIRST_MINOR
from pvchaos.conformance import feature_gates
from pvchaos.tools import feature_gates as tool

SOURCE = '''
const (
	// comment
	OldGate featuregate.Feature = "OldGate"
	Renamed featuregate.Feature = "RenamedInString"
)

var defaultVersionedKubernetesFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
	OldGate: {
		{Version: version.MustParse("1.30"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.33"), Default: true, LockToDefault: true, PreRelease: featuregate.GA}, // remove in 1.36
		{Version: version.MustParse("1.31"), Default: true, PreRelease: featuregate.Beta},
	},

	Renamed: {
		{Version: version.MustParse("1.35"), Default: false, PreRelease: featuregate.Alpha},
	},

	genericfeatures.Other: {
		{Version: version.MustParse("1.20"), Default: true, PreRelease: featuregate.Beta},
	},
}

var defaultKubernetesFeatureGateDependencies = map[featuregate.Feature][]featuregate.Feature{
	OldGate: {},
	NotAGate: {},
}
'''


def test_specs_are_read_from_the_versioned_map_only_and_sorted() -> None:
    specs = tool.versioned_specs(SOURCE)
    assert specs["OldGate"] == [(30, "alpha", False, False), (31, "beta", True, False), (33, "GA", True, True)]
    assert specs["RenamedInString"] == [(35, "alpha", False, False)]  # the gate's string name, not the Go name
    assert "genericfeatures.Other" in specs and "NotAGate" not in specs


def test_state_at_a_minor_is_the_last_spec_at_or_below_it() -> None:
    specs = tool.versioned_specs(SOURCE)["OldGate"]
    assert tool.state_at(specs, 29) is None
    assert tool.state_at(specs, 32) == ("beta", True, False)
    assert tool.state_at(specs, 37) == ("GA", True, True)
    got = tool.table({"v1.34.1": SOURCE}, gates=["OldGate", "RenamedInString", "Missing"])
    assert got == {"v1.34.1": {"OldGate": ("GA", True, True), "RenamedInString": None, "Missing": None}}


def test_a_source_without_the_map_is_refused() -> None:
    with pytest.raises(tool.GateSourceError, match="defaultVersionedKubernetesFeatureGates"):
        tool.versioned_specs("package features\n")


def test_newest_patch_per_minor_takes_a_prerelease_only_where_no_release_is_served() -> None:
    served = ["v1.34.0", "v1.34.10", "v1.34.9", "v1.35.4", "v1.35.5-rc.0", "v1.33.9", "v1.36.1", "v1.37.2",
              "v1.38.0-alpha.2", "v1.38.0-beta.0"]
    assert tool.newest_patches(served) == {34: "v1.34.10", 35: "v1.35.4", 36: "v1.36.1", 37: "v1.37.2",
                                           38: "v1.38.0-beta.0"}
    assert tool.newest_patches([*served, "v1.38.0"])[38] == "v1.38.0"
    with pytest.raises(tool.GateSourceError, match="1.36"):
        tool.newest_patches(["v1.34.1", "v1.35.1", "v1.37.1", "v1.38.0-beta.0"])


HELP = """      --feature-gates colonSeparatedMultimapStringString
                kube:AllAlpha=true|false (ALPHA - default=false)
                kube:MutablePVNodeAffinity=true|false (ALPHA - default=false)
                kube:NodeControllerLeaseCircuitBreaker=true|false (BETA - default=true)
                OldStyle=true|false (BETA - default=false)
"""


def test_gate_stage_and_default_are_read_from_the_binary_help() -> None:
    from pvchaos.tools import gates
    states = gates.parse_gate_states(HELP)
    assert states["MutablePVNodeAffinity"] == ("alpha", False)
    assert states["NodeControllerLeaseCircuitBreaker"] == ("beta", True)
    assert states["OldStyle"] == ("beta", False)  # builds without the "kube:" prefix
    assert set(states) == gates.parse_gate_list(HELP)


def test_the_binary_and_the_source_agree_where_a_version_is_built() -> None:
    """The table (from source) against each built version's own kube-apiserver --help."""
    from pvchaos.clusters.common.gates import built_gate_states
    checked = 0
    for version, gates_ in feature_gates.STATES.items():
        states = built_gate_states(version)
        if states is None:
            continue
        for gate, state in gates_.items():
            if state and state[0] in ("alpha", "beta"):
                assert states.get(gate) == (state[0], state[1]), f"{version} {gate}: source {state}, binary {states.get(gate)}"
        checked += 1
    if not checked:
        pytest.skip("no version of the table is built here")


def test_the_table_is_what_the_tool_makes_of_the_cached_sources() -> None:
    versions = list(feature_gates.STATES)
    if any(tool.cached_module_dir(v) is None for v in versions):
        pytest.skip(f"k8s.io/kubernetes {', '.join(versions)} not all in the Go module cache")
    text = tool.render(tool.table(tool.read_sources(versions, cached_only=True)))
    assert text == tool.TABLE_FILE.read_text(encoding="utf-8"), "re-run: python -m pvchaos.tools.feature_gates"


def test_the_table_covers_every_gate_named_in_the_code_and_agrees_with_first_minors() -> None:
    assert set(feature_gates.DEPENDS) == set(tool.GATES)
    for gate, first in GATE_FIRST_MINOR.items():
        present = [int(v.split(".")[1]) for v, gates in feature_gates.STATES.items() if gates[gate] is not None]
        assert present and min(present) == first, f"{gate}: clusters say 1.{first}, the sources 1.{min(present)}"


def test_gate_states_read_as_words() -> None:
    assert feature_gates.state_text(None) == "absent"
    assert feature_gates.state_text(("alpha", False, False)) == "alpha, off"
    assert feature_gates.state_text(("GA", True, True)) == "GA, on (locked)"
    env = feature_gates.environment()
    assert env["gate MutablePVNodeAffinity"].startswith("v1.34.4 absent; v1.35.4 alpha, off")
    assert "| `MutablePVNodeAffinity` | absent | alpha, off |" in feature_gates.markdown_table()


def test_findings_show_the_table_as_the_code_has_it() -> None:
    findings = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text(encoding="utf-8")
    assert feature_gates.markdown_table() in findings, "paste conformance.feature_gates.markdown_table() into it"
