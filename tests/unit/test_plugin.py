"""The plugin as a user meets it, in-process through pytester (no cluster is started:
every test here skips or fails before one would be)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def isolated(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No cluster state of the real user is read or written."""
    state = tmp_path / "state"
    monkeypatch.setenv("PVCHAOS_STATE_DIR", str(state))
    return state


def test_markers_come_from_the_plugin(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.disruptive:*", "@pytest.mark.needs(*capabilities):*",
                                 "@pytest.mark.cluster(**options):*"])


def test_unknown_capability_fails_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_typo="""
        import pytest

        @pytest.mark.needs("zone")
        def test_x(ws):
            pass
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_typo.py::test_x: needs('zone'): unknown capability 'zone'; known: zones*"])


def test_unknown_cluster_option_fails_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_opt="""
        import pytest

        @pytest.mark.cluster(node_per_zone=4)
        def test_x(ws):
            pass
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "test_opt.py::test_x: cluster marker: unknown option(s) ['node_per_zone']" in result.stderr.str()


def test_skip_is_decided_before_a_cluster_starts(pytester: pytest.Pytester, isolated: Path) -> None:
    """A disruptive test needing zones, on a one-zone cluster: it skips with the reason,
    and no cluster was started for it (the state directory stays empty)."""
    pytester.makepyfile(test_zones="""
        import pytest

        @pytest.mark.disruptive
        @pytest.mark.needs("zones")
        def test_outage(ws):
            raise AssertionError("must not run")
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs", "--zones=zone-a")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*backend local: no zones*"])
    assert not isolated.exists() or not any(isolated.iterdir())


def test_driver_profile_skip_names_the_profile_field(pytester: pytest.Pytester, isolated: Path) -> None:
    pytester.makefile(".yaml", driver="""
        StorageClass: {FromName: true}
        DriverInfo:
          Name: csi.example.com
          TopologyKeys: [topology.kubernetes.io/zone]
          Capabilities: {persistence: true, topology: false}
    """)
    pytester.makepyfile(test_dyn="""
        import pytest

        @pytest.mark.needs("dynamic-zonal")
        def test_provision(ws):
            raise AssertionError("must not run")
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs", f"--profile={pytester.path / 'driver.yaml'}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*driver csi.example.com: no dynamic-zonal (profile capability topology=false: not supported)*"])
    assert not isolated.exists() or not any(isolated.iterdir())


def test_suite_parameters_keep_history_stable(pytester: pytest.Pytester) -> None:
    """allure-pytest hashes each parametrize value's repr into the historyId: a value whose
    repr changes between runs (a lambda, an object at an address) breaks the report's
    history. Found on real results: the gate-off matrix once passed dataclasses holding
    lambdas."""
    suites = Path(__file__).resolve().parents[2] / "suites"
    items, _ = pytester.inline_genitems(str(suites), "-p", "no:cacheprovider")
    assert len(items) >= 50
    unstable = [(item.nodeid, name) for item in items for name, value in
                getattr(getattr(item, "callspec", None), "params", {}).items() if " at 0x" in repr(value)]
    assert not unstable, unstable
