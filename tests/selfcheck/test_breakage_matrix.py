"""Every suite test fails under the breakage of exactly what it checks (issue 15).

For each breakage in `breakage_table.TABLE`, the tests that name it run in one pytest
subprocess on clusters broken that way (canaries off, so each test meets the breakage
itself, not a canary's verdict); every one of them must fail with a product failure
(kube.errors.PRODUCT_ERRORS), never pass, skip or break on infrastructure. Runs go two
at a time with private state directories; a hung run is stopped and reported.

Tier `matrix` (`pvchaos selftest --tier matrix`): it takes about 15 minutes on 2 cores,
so the default selftest leaves it out. docs/self-verification.md has the last result.
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

from tests.selfcheck import matrix_record
from tests.selfcheck.breakage_table import PLUGIN_OF, by_breakage
from tests.selfcheck.test_detection_power import Outcome, _outcomes, _stop, _sweep

pytestmark = [allure.epic("Self-verification"), allure.feature("Breakage matrix"), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 900.0
AT_ONCE = 2  # broken runs side by side; each uses up to 3 workers


def _command(tests: list[str], plugin: str, junit: Path) -> list[str]:
    workers = ["-n", str(min(3, len(tests)))] if len(tests) > 1 else []
    return [sys.executable, "-m", "pytest", *tests, "-p", plugin, "-p", "no:cacheprovider", "-q",
            f"--junitxml={junit}", "--no-canaries", *workers]


@pytest.fixture(scope="module")
def matrix(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[dict[str, Outcome], str, float]]]:
    """breakage -> (outcomes by node id, output tail, seconds), two runs at a time."""
    runs = matrix_record.selected_runs((i.name for i in request.session.items),
                                       test_every_test_fails_under_its_breakage.__name__, by_breakage())
    pending = sorted(runs.items(), key=lambda kv: -len(kv[1]))  # longest first
    running: list[tuple[str, subprocess.Popen[bytes], Path, Path, Path, float]] = []
    done: dict[str, tuple[dict[str, Outcome], str, float]] = {}
    try:
        while pending or running:
            while pending and len(running) < AT_ONCE:
                breakage, tests = pending.pop(0)
                plugin, env_var = PLUGIN_OF[breakage]
                d = tmp_path_factory.mktemp(breakage)
                env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
                env.update({env_var: breakage, "PVCHAOS_STATE_DIR": str(d / "state")})
                log = d / "output.txt"
                with log.open("wb") as out:
                    proc = subprocess.Popen(_command(tests, plugin, d / "junit.xml"), cwd=REPO, env=env, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
                running.append((breakage, proc, d / "junit.xml", log, d / "state", time.monotonic()))
            time.sleep(1)
            for item in list(running):
                breakage, proc, junit, log, state, t0 = item
                if proc.poll() is None and time.monotonic() - t0 < RUN_TIMEOUT_S:
                    continue
                if proc.poll() is None:
                    _stop(proc)
                _sweep(state)
                done[breakage] = (_outcomes(junit), log.read_text(errors="replace")[-4000:], time.monotonic() - t0)
                running.remove(item)
        matrix_record.write({b: (o, secs) for b, (o, _, secs) in done.items()}, by_breakage(), "local",
                            tmp_path_factory.getbasetemp())
        yield done
    finally:
        for _, proc, _, _, state, _ in running:
            _stop(proc)
            _sweep(state)


@pytest.mark.parametrize("breakage", sorted(by_breakage()))
def test_every_test_fails_under_its_breakage(breakage: str, matrix: dict[str, tuple[dict[str, Outcome], str, float]]) -> None:
    outcomes, tail, seconds = matrix[breakage]
    allure.attach(tail, "pytest output (tail)", allure.attachment_type.TEXT)
    print(f"[pvchaos] breakage {breakage}: {len(outcomes)} tests in {seconds:.0f}s")
    wrong = matrix_record.not_failing(by_breakage()[breakage], outcomes, breakage)
    assert not wrong, f"under {breakage}:\n" + "\n".join(wrong) + f"\n--- output tail ---\n{tail}"
