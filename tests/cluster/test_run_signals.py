"""`bin/pvchaos run` under its own faults: a signal to the runner's pid alone, as
`timeout`, CI runners and process supervisors send it (issue 15).

Each test runs the real command on a small selection with PVCHAOS_STATE_DIR in its own
tmp dir, so "no cluster left" means none of this run's, and the sweep sees no one
else's. "No process left" is a scan of /proc for any live command line naming the
state dir (every cluster component has it in its flags) or the report dir (pytest and
its workers have it in theirs).
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tools.build import REPO_ROOT, ensure_binaries
from tools.versions import DEFAULT_K8S_VERSION

pytestmark = pytest.mark.slow  # each is a real run of 20-60 s
SELECTION = ["--suites", "node_failure", "--workers", "1"]  # disruptive: fresh clusters, tests of 10-40 s
STOP_WITHIN = 30.0


@dataclass
class Run:
    proc: subprocess.Popen[str]
    state: Path
    reports: Path

    def output(self) -> str:
        out, _ = self.proc.communicate(timeout=5)
        return out


def live_processes_naming(*markers: Path) -> list[str]:
    found = []
    needles = [str(m).encode() for m in markers]
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text(errors="replace")
        except OSError:
            continue
        if ") Z " not in stat and any(n in cmdline for n in needles):
            shown = cmdline.replace(b"\0", b" ")[:160].decode(errors="replace")
            found.append(f"{entry.name}: {shown}")
    return found


def clusters_on_disk(state: Path) -> list[str]:
    return sorted(d.name for d in state.iterdir() if (d / "state.json").exists()) if state.is_dir() else []


@pytest.fixture(scope="module", autouse=True)
def _binaries() -> None:
    ensure_binaries(DEFAULT_K8S_VERSION)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Run]]:
    started: list[Run] = []

    def _start(*prefix: str, extra: tuple[str, ...] = ()) -> Run:
        state, reports = tmp_path / "state", tmp_path / "reports"
        env = {**os.environ, "PVCHAOS_STATE_DIR": str(state)}
        argv = [*prefix, str(REPO_ROOT / "bin" / "pvchaos"), "run", *SELECTION, "--report-dir", str(reports), *extra]
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        run = Run(proc, state, reports)
        started.append(run)
        return run

    yield _start
    for run in started:  # whatever a failed assertion left: never leave a run behind
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
        for line in live_processes_naming(run.state, run.reports):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)


def wait_for_a_cluster(run: Run, within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while not clusters_on_disk(run.state):
        assert run.proc.poll() is None, f"the run ended before any cluster started:\n{run.output()}"
        assert time.monotonic() < deadline, "no cluster started"
        time.sleep(0.2)
    time.sleep(3)  # into the test body, not only the start


def assert_stopped_cleanly(run: Run, code: int, started: float, out: str | None = None) -> str:
    name = signal.Signals(code - 128).name
    out = run.output() if out is None else out
    elapsed = time.monotonic() - started
    if run.proc is not None:
        assert run.proc.returncode == code, out[-3000:]
    assert elapsed < STOP_WITHIN, f"stopped after {elapsed:.1f}s"
    assert live_processes_naming(run.state, run.reports) == []
    assert clusters_on_disk(run.state) == []
    summary = (run.reports / "summary.md").read_text()
    assert f"**Interrupted** by {name}" in summary
    assert f"interrupted=interrupted by {name}" in (run.reports / "allure-results" / "environment.properties").read_text()
    assert (run.reports / "html" / "index.html").is_file() and (run.reports / "junit.xml").is_file()
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"pvchaos: interrupted by {name}: pytest and every cluster it started are stopped"), out[-2000:]
    assert "PluggyTeardownRaisedWarning" not in out and "cannot send" not in out, out[-3000:]
    return out


def test_kill_term_to_the_runner_pid_stops_the_run(start: Callable[..., Run]) -> None:
    run = start()
    wait_for_a_cluster(run)
    sent = time.monotonic()
    os.kill(run.proc.pid, signal.SIGTERM)
    run.proc.wait(timeout=STOP_WITHIN + 30)
    assert_stopped_cleanly(run, 143, sent)


def test_timeout_s_term_stops_the_run(start: Callable[..., Run]) -> None:
    started = time.monotonic()
    run = start("timeout", "--preserve-status", "-s", "TERM", "30")
    run.proc.wait(timeout=30 + STOP_WITHIN + 30)
    assert_stopped_cleanly(run, 143, started + 30)


def test_kill_kill_leaves_nothing_running_and_the_next_run_says_what_it_swept(start: Callable[..., Run]) -> None:
    run = start()
    wait_for_a_cluster(run)
    os.kill(run.proc.pid, signal.SIGKILL)
    run.proc.wait(timeout=5)
    deadline = time.monotonic() + STOP_WITHIN
    while live_processes_naming(run.state, run.reports):
        assert time.monotonic() < deadline, live_processes_naming(run.state, run.reports)
        time.sleep(0.2)
    orphans = clusters_on_disk(run.state)
    assert orphans  # on disk until a sweep: the processes are gone, the data is not
    nxt = start(extra=("-k", "no_test_has_this_name"))
    out = nxt.proc.communicate(timeout=300)[0]
    assert "removed orphaned cluster(s) before the run: " + ", ".join(orphans) in out, out[-2000:]
    assert clusters_on_disk(run.state) == []


def test_ctrl_c_in_a_terminal_stops_quietly(tmp_path: Path) -> None:
    """A real terminal: Ctrl-C reaches the runner (the foreground group) only; the output
    has no PluggyTeardownRaisedWarning / "cannot send" and ends in the one stopped line."""
    state, reports = tmp_path / "state", tmp_path / "reports"
    env = {**os.environ, "PVCHAOS_STATE_DIR": str(state)}
    argv = [str(REPO_ROOT / "bin" / "pvchaos"), "run", *SELECTION, "--report-dir", str(reports)]
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command in a terminal of its own
        os.chdir(REPO_ROOT)
        os.execve(argv[0], argv, env)
    chunks: list[bytes] = []
    pressed = None
    give_up = time.monotonic() + 300
    try:
        while True:
            if time.monotonic() > give_up:  # a hung run is killed, and the assertions below fail
                os.kill(pid, signal.SIGKILL)
                break
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            if pressed is None and clusters_on_disk(state):
                time.sleep(3)
                os.write(fd, b"\x03")
                pressed = time.monotonic()
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert pressed is not None, b"".join(chunks).decode(errors="replace")[-2000:]
    run = Run(proc=None, state=state, reports=reports)  # type: ignore[arg-type]
    out = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    assert os.waitstatus_to_exitcode(status) == 130, out[-2000:]
    assert_stopped_cleanly(run, 130, pressed, out=out)
