"""selftest and CI draw the same Hypothesis examples every run: `.ci/run` sets CI (which
tests/conftest.py reads) and selftest itself asks for the `ci` profile (issue #39)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from pvchaos import cli

ROOT = Path(__file__).resolve().parents[2]


def _argv(monkeypatch: pytest.MonkeyPatch, *args: str) -> list[str]:
    seen: list[list[str]] = []
    monkeypatch.setattr(cli.subprocess, "call", lambda argv, **kw: seen.append(argv) or 0)
    assert cli.main(["selftest", "--tier", "unit", *args]) == 0
    return seen[0]


def test_selftest_loads_the_fixed_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert "--hypothesis-profile=ci" in _argv(monkeypatch)


def test_a_developer_seed_or_profile_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "--hypothesis-profile=ci" not in _argv(monkeypatch, "--", "--hypothesis-seed=7")
    argv = _argv(monkeypatch, "--", "--hypothesis-profile", "explore")
    assert "--hypothesis-profile=ci" not in argv and argv[-2:] == ["--hypothesis-profile", "explore"]


def test_ci_script_sets_ci() -> None:
    out = subprocess.run(["bash", "-c", r'source <(sed "s/^exec .*/echo CI=\$CI/" .ci/run)'], cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "CI=true"


def test_the_profile_option_reaches_the_registered_profile() -> None:
    """`--hypothesis-profile=ci`, with CI unset, loads the profile tests/conftest.py
    registers: the probe below runs in a child pytest and sees derandomize on."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    base = [sys.executable, "-m", "pytest", f"{__file__}::test_probe", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    with_profile = subprocess.run([*base, "--hypothesis-profile=ci"], check=False, cwd=ROOT,
                                  env={**env, PROBE: "on"},
                                  capture_output=True, text=True)
    without = subprocess.run(base, check=False, cwd=ROOT, env={**env, PROBE: "off"}, capture_output=True, text=True)
    assert with_profile.returncode == 0, with_profile.stdout
    assert without.returncode == 0, without.stdout


PROBE = "PVCHAOS_HYPOTHESIS_PROBE"


@pytest.mark.skipif(PROBE not in os.environ, reason="run by the test above, in a child pytest")
def test_probe() -> None:
    assert settings.default.derandomize is (os.environ[PROBE] == "on")
