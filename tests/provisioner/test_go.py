"""The test provisioner's Go tests (tools/provisioner/*_test.go): the failure knob's
parsing and decision, and the guarded reschedule (never overwrites a newer selected
node). Needs Go and the module proxy, hence the binaries tier."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pvchaos.tools.build import PROVISIONER_SRC


def test_go_tests_of_the_provisioner_pass() -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("no go on PATH")
    done = subprocess.run([go, "test", "-count=1", "./..."], cwd=PROVISIONER_SRC, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, f"go test failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert "ok" in done.stdout
