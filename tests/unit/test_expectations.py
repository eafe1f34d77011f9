"""The expectation tables and their diff (pure)."""

from pvchaos.conformance import expectations


def test_mutation_expectation_is_bound_and_unchanged_from_135() -> None:
    exp = expectations.after_pv_affinity_mutation(35)
    assert exp["pv phase"] == "Bound" and exp["claimRef"] == "unchanged"
    assert expectations.after_pv_affinity_mutation(37) == exp


def test_diff_names_each_field_with_both_values() -> None:
    lines = expectations.diff({"pv phase": "Available", "claimRef": "unchanged"},
                              {"pv phase": "Bound", "claimRef": "unchanged"})
    assert lines == ["pv phase: expected 'Available', observed 'Bound'"]
    assert expectations.diff({"a": 1}, {"a": 1}) == []
