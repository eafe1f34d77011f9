"""`bin/pvchaos run` under its own faults: a signal to the runner's pid alone, as
`timeout`, CI runners and process supervisors send it (issue 15).

Each test runs the real command on a small selection with PVCHAOS_STATE_DIR in its own
tmp dir, so "no cluster left" means none of this run's, and the sweep sees no one
else's. "No process left" is a scan of /proc for any live process in pytest's process
group (pytest and its xdist workers, whose own command lines name nothing of the run)
or whose command line names the state dir (every cluster component has it in its
flags) or the report dir. The stop is timed to the moment those are gone; the report
is written after that, and under heavy load its generation alone can take half a minute.
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

from pvchaos.tools.build import REPO_ROOT, ensure_binaries
from pvchaos.tools.versions import DEFAULT_K8S_VERSION

pytestmark = pytest.mark.slow  # each is a real run of 20-60 s
SELECTION = ["--suites", "node_failure", "--workers", "1"]  # disruptive: fresh clusters, tests of 10-40 s
STOP_WITHIN = 30.0  # signal -> no process of the run left
REPORT_WITHIN = 120.0  # signal -> the runner exited, report written


@dataclass
class Run:
    proc: subprocess.Popen[str]
    state: Path
    reports: Path
    pgid: int = 0  # pytest's process group, once found

    def output(self) -> str:
        out, _ = self.proc.communicate(timeout=5)
        return out


def processes() -> Iterator[tuple[str, bytes, list[str]]]:
    """(pid, command line, /proc/<pid>/stat fields after the name) of every process now."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text(errors="replace")
        except OSError:
            continue
        yield entry.name, cmdline, stat.rsplit(")", 1)[1].split()


def live_processes_naming(*markers: Path, pgid: int = 0) -> list[str]:
    """Live processes whose command line names a marker, or in process group `pgid`."""
    needles = [str(m).encode() for m in markers]
    return [pid + ": " + cmdline.replace(b"\0", b" ")[:160].decode(errors="replace")
            for pid, cmdline, fields in processes()
            if fields[0] != "Z" and (any(n in cmdline for n in needles) or (pgid and int(fields[2]) == pgid))]


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
    run.pgid = pytest_group(run)
    time.sleep(3)  # into the test body, not only the start


def pytest_group(run: Run) -> int:
    """The process group of the run's pytest (`-m pytest ... --alluredir=<report dir>/...`;
    the tmp path itself contains "pytest", so the runner's command line must not match)."""
    wanted = f"--alluredir={run.reports}".encode()
    for _, cmdline, fields in processes():
        if b"\0-m\0pytest\0" in cmdline and wanted in cmdline:
            return int(fields[2])
    raise AssertionError("no pytest process of the run found")


def run_processes(run: Run) -> list[str]:
    """pytest, its workers and the cluster processes (not the report's Allure CLI)."""
    return live_processes_naming(run.state, pgid=run.pgid)


def wait_until_stopped(run: Run, sent: float) -> float:
    """Seconds from the signal until no process of the run is left (fails after STOP_WITHIN)."""
    while run_processes(run):
        assert time.monotonic() - sent < STOP_WITHIN, f"still running {STOP_WITHIN}s after the signal: " \
                                                     f"{run_processes(run)}"
        time.sleep(0.1)
    return time.monotonic() - sent


def assert_stopped_cleanly(run: Run, code: int, out: str | None = None) -> str:
    """After the runner exited: its code, nothing left, the report marked, one quiet last line."""
    name = signal.Signals(code - 128).name
    out = run.output() if out is None else out
    if run.proc is not None:
        assert run.proc.returncode == code, out[-3000:]
    assert live_processes_naming(run.state, run.reports, pgid=run.pgid) == []
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
    wait_until_stopped(run, sent)
    run.proc.wait(timeout=REPORT_WITHIN)
    assert_stopped_cleanly(run, 143)


def test_timeout_s_term_stops_the_run(start: Callable[..., Run]) -> None:
    started = time.monotonic()
    run = start("timeout", "--preserve-status", "-s", "TERM", "40")
    wait_for_a_cluster(run)
    time.sleep(max(0.0, started + 40 - time.monotonic()))
    wait_until_stopped(run, started + 40)
    run.proc.wait(timeout=REPORT_WITHIN)
    assert_stopped_cleanly(run, 143)


def test_kill_kill_leaves_nothing_running_and_the_next_run_says_what_it_swept(start: Callable[..., Run]) -> None:
    run = start()
    wait_for_a_cluster(run)
    os.kill(run.proc.pid, signal.SIGKILL)
    sent = time.monotonic()
    run.proc.wait(timeout=5)
    wait_until_stopped(run, sent)
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
    pressed = stopped = None
    run = Run(proc=None, state=state, reports=reports)  # type: ignore[arg-type]
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
                run.pgid = pytest_group(run)
                time.sleep(3)
                os.write(fd, b"\x03")
                pressed = time.monotonic()
            if pressed is not None and stopped is None and not run_processes(run):
                stopped = time.monotonic() - pressed
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert pressed is not None, b"".join(chunks).decode(errors="replace")[-2000:]
    out = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    assert os.waitstatus_to_exitcode(status) == 130, out[-2000:]
    assert stopped is not None and stopped < STOP_WITHIN, f"stopped {stopped}s after Ctrl-C"
    assert_stopped_cleanly(run, 130, out=out)
