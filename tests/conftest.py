"""The harness's own tests, tiered by what they need, so `pvchaos selftest --tier unit`
runs in seconds and CI can run the expensive tiers apart:

- `unit`: pure Python and in-process pytest sessions (pytester); no binaries, no cluster;
- `binaries`: built or fetched tools, no cluster (the Allure CLI and Chromium for reports,
  kind's config checker and stand-in kind/docker executables, the provisioner's `go test`);
- `cluster`: real local clusters (lifecycle, backends against a running API server, the
  external-project test);
- `selfcheck`: the suites themselves, on healthy and deliberately broken clusters;
- `kind`: a Docker engine (started here when none answers) and real kind clusters;
- `matrix`: every suite test under the breakage that must make it fail
  (selfcheck/breakage_table.py), and the volume-limit invariant against a scheduler
  without NodeVolumeLimits; about 15 minutes, so `selftest` runs it only when asked
  (`--tier matrix`), not with the other tiers;
- `kind-matrix`: every kind-only suite test (real kubelets) under its breakage, on kind
  clusters broken the same way (selfcheck/test_kind_breakage_matrix.py); about 45
  minutes, on request (`--tier kind-matrix`) and nightly;
- `long`: regression loops that take minutes and belong to the nightly workflow, not to
  every CI run (the 50-claim reschedule loop, about 4.5 minutes; `--tier long`);
- `versions`: the other served minors built, their source checked against the message
  table, and the suites run on all four (`--tier versions`, on request: about 45 minutes
  cold, 20 warm).

`pytester` runs small pytest sessions in-process, with the pvchaos plugin loaded by its
entry point, as a user's suite would have it.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# First match wins: a path prefix under tests/ -> tier.
TIERS: tuple[tuple[str, str], ...] = (
    ("unit/", "unit"),
    ("report/", "binaries"),
    ("provisioner/", "binaries"),
    ("csi/", "binaries"),
    ("backends/test_kind", "binaries"),
    ("backends/", "cluster"),
    ("cluster/", "cluster"),
    ("selfcheck/test_breakage_matrix", "matrix"),
    ("selfcheck/test_kind_breakage_matrix", "kind-matrix"),
    ("selfcheck/test_invariant_detection", "matrix"),
    ("selfcheck/test_reschedule_loop", "long"),
    ("selfcheck/", "selfcheck"),
    ("kind/", "kind"),
    ("versions/", "versions"),
)
TIER_NAMES = tuple(dict.fromkeys(t for _, t in TIERS))


def pytest_configure(config: pytest.Config) -> None:
    for name in TIER_NAMES:  # tier_cluster, not cluster: that is the plugin's cluster(**options) marker
        config.addinivalue_line("markers", f"tier_{name}: selftest tier {name} (tests/conftest.py)")


def tier_of(relative: str) -> str:
    return next((tier for prefix, tier in TIERS if relative.startswith(prefix)), "cluster")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = config.rootpath / "tests"
    for item in items:
        try:
            relative = item.path.relative_to(here).as_posix()
        except ValueError:
            continue  # a pytester session's own files
        item.add_marker(f"tier_{tier_of(relative)}")


# Hypothesis: CI draws the same examples every run (`ci`, loaded when CI is set, as .ci/run
# does, and by `pvchaos selftest`, which passes --hypothesis-profile=ci); a
# developer explores with `--hypothesis-seed N`, or `--hypothesis-profile explore` for more.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

# No per-example deadline anywhere: these are pure functions, and a 2-core machine running
# clusters beside the tests (CI's, a developer's) misses Hypothesis's 200 ms by load alone
# (seen: test_claims at load 30); a slow example is not what these tests look for.
_hypothesis_settings.register_profile("ci", derandomize=True, deadline=None)
_hypothesis_settings.register_profile("dev", deadline=None)
_hypothesis_settings.register_profile("explore", max_examples=3000, deadline=None)
_hypothesis_settings.load_profile("ci" if __import__("os").environ.get("CI") else "dev")
