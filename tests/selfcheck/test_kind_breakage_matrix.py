"""Every kind-only suite test fails under its breakage, on kind (issue 39 item 1).

The tests that need real kubelets (attach after node loss, the real-data moves, fsGroup,
mounts through the node plugin, the kubelet half of KEP-5381) cannot be broken on local
clusters; their entries in `breakage_table.TABLE` say `backend="kind"`. For each such
breakage, its tests run in one pytest subprocess with `--backend kind`, the breakage's
plugin and variable (broken_cluster.py makes the breakage on kind clusters), canaries off;
each must fail with a product failure (kube.errors.PRODUCT_ERRORS), never pass, skip or
break on infrastructure. A case only a vendor's driver reaches (an entry with a
`package`, e.g. a driver whose CSIDriver says attachRequired false) runs with that
example package installed (`--driver-package`; its images built first, as certify does).

One run at a time: each starts kind clusters (one, plus one per other cluster request,
e.g. the gate-off cluster), about 1-2 minutes each on 2 cores, and the failures are waits
running out (60-180 s). About 45 minutes in all, so tier `kind-matrix` runs only when
asked (`pvchaos selftest --tier kind-matrix`) and nightly. docs/self-verification.md has
the last result.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import allure
import pytest

from pvchaos.clusters.kind import KindProvider
from tests.selfcheck import matrix_record
from tests.selfcheck.breakage_table import PLUGIN_OF, by_breakage, split_run
from tests.selfcheck.test_detection_power import Outcome, _outcomes, _stop

pytestmark = [allure.epic("Self-verification"), allure.feature("Kind breakage matrix"), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 1800.0
# Two zones of two nodes: the lost-node tests need a second node in the volume's zone.
SHAPE = ["--zones", "2", "--nodes-per-zone", "2"]


def command(tests: list[str], plugin: str, junit: Path, package: str | None = None) -> list[str]:
    """One breakage's run: its tests on kind, one process (one kind cluster at a time), with
    the vendor package the entry names installed in place of pvchaos-csi."""
    return [sys.executable, "-m", "pytest", *tests, "-p", plugin, "-p", "no:cacheprovider", "-q", "-n", "0",
            f"--junitxml={junit}", "--no-canaries", "--backend", "kind", *SHAPE,
            *(["--driver-package", package] if package else [])]


def _sweep_kind(state: Path) -> None:
    """Down any kind cluster a stopped run left in its private state directory."""
    old = os.environ.get("PVCHAOS_STATE_DIR")
    os.environ["PVCHAOS_STATE_DIR"] = str(state)
    try:
        KindProvider().cluster_down(None)
    finally:
        if old is None:
            os.environ.pop("PVCHAOS_STATE_DIR", None)
        else:
            os.environ["PVCHAOS_STATE_DIR"] = old


@pytest.fixture(scope="module")
def kind_matrix(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[dict[str, Outcome], str, float]]]:
    """breakage -> (outcomes by node id, output tail, seconds), one run after the other."""
    done: dict[str, tuple[dict[str, Outcome], str, float]] = {}
    runs = matrix_record.selected_runs((i.name for i in request.session.items),
                                       test_every_kind_test_fails_under_its_breakage.__name__, by_breakage("kind"))
    if any(split_run(run)[1] for run in runs):  # a package's images, as certify builds them
        subprocess.run([sys.executable, str(REPO / "examples" / "vendor-driver" / "build.py")], cwd=REPO, check=True)
    for run, tests in sorted(runs.items()):
        breakage, package = split_run(run)
        plugin, env_var = PLUGIN_OF[breakage]
        # A short directory: the CSI sockets of its clusters live under it, and a unix
        # socket's path may not exceed 107 bytes (a package's name in it did).
        d = tmp_path_factory.mktemp(f"kind-{breakage}"[:24])
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
        env.update({env_var: breakage, "PVCHAOS_STATE_DIR": str(d / "state")})
        log = d / "output.txt"
        t0 = time.monotonic()
        with log.open("wb") as out:
            proc = subprocess.Popen(command(tests, plugin, d / "junit.xml", package), cwd=REPO, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                proc.wait(RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _stop(proc)
            finally:
                if proc.poll() is None:
                    _stop(proc)
        _sweep_kind(d / "state")
        done[run] = (_outcomes(d / "junit.xml"), log.read_text(errors="replace")[-4000:], time.monotonic() - t0)
    matrix_record.write({b: (o, secs) for b, (o, _, secs) in done.items()}, by_breakage("kind"), "kind",
                        tmp_path_factory.getbasetemp())
    yield done


@pytest.mark.parametrize("breakage", sorted(by_breakage("kind")))
def test_every_kind_test_fails_under_its_breakage(
        breakage: str, kind_matrix: dict[str, tuple[dict[str, Outcome], str, float]]) -> None:
    outcomes, tail, seconds = kind_matrix[breakage]
    allure.attach(tail, "pytest output (tail)", allure.attachment_type.TEXT)
    print(f"[pvchaos] kind breakage {breakage}: {len(outcomes)} tests in {seconds:.0f}s")
    wrong = matrix_record.not_failing(by_breakage("kind")[breakage], outcomes, breakage)
    assert not wrong, f"under {breakage} on kind:\n" + "\n".join(wrong) + f"\n--- output tail ---\n{tail}"
