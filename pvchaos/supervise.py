"""`pvchaos run` owns its pytest child, so a signal to the runner's pid alone stops the run.

pytest runs in a process group of its own (its xdist workers join it). SIGINT and
SIGTERM to the runner are forwarded to that group; the runner then waits for the
teardown, bounded (`TEARDOWN_SECONDS`, then SIGKILL to the group), so the report of
what ran can still be written. A second signal, once `REPEAT_AFTER_SECONDS` have passed,
kills the group at once (copies that arrive together are one interrupt: `timeout`
signals both its child and its own process group, so the runner gets two). If the runner
itself dies by SIGKILL, PR_SET_PDEATHSIG takes pytest with it (and the plugin ties each
worker to pytest the same way; the cluster processes are tied to their worker), and the
next run's orphan sweep removes what is left on disk. The runner is a child subreaper,
so workers orphaned by pytest's exit are reparented to it, waited for and reaped.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
TEARDOWN_SECONDS = 60.0  # a cluster down takes seconds; a hung teardown must not hold a CI job
STRAGGLER_SECONDS = 15.0  # after pytest exits, for workers still tearing down
FORWARDED = (signal.SIGINT, signal.SIGTERM)
REPEAT_AFTER_SECONDS = 2.0  # a signal sooner after the first is a copy of it, not "hurry up"


def is_repeat(first_at: float | None, now: float) -> bool:
    """Whether a signal at `now` means "stop harder" after one at `first_at` (pure)."""
    return first_at is not None and now - first_at >= REPEAT_AFTER_SECONDS


def exit_code_for(signum: int) -> int:
    """The shell's convention for a process stopped by a signal: 128 + its number."""
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value})")


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """This process gets `sig` when the thread that started it exits (PR_SET_PDEATHSIG).
    Run in a child before it does anything else; if the parent is already gone (the
    signal would never come), exit now."""
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, int(sig))
    if os.getppid() != parent:
        os._exit(1)


def become_subreaper() -> None:
    """Orphaned descendants are reparented to this process, so it can wait for them."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def _child_setup() -> None:  # runs in the forked child, before exec
    die_with_parent(signal.SIGKILL)


@dataclass
class Outcome:
    """How the pytest child ended."""

    returncode: int
    seconds: float
    signals: list[int] = field(default_factory=list)  # what the runner received, in order
    killed: bool = False  # the group was SIGKILLed (teardown bound exceeded, or a second signal)
    stop_seconds: float | None = None  # from the first signal until the whole group was gone

    @property
    def interrupted_by(self) -> int | None:
        return self.signals[0] if self.signals else None


def group_alive(pgid: int) -> bool:
    """True while any process (zombies included) is in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap_group(pgid: int) -> None:
    """Collect the exit status of our children (subreaped workers) in the group."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def reap_zombie_children() -> int:
    """Collect children that already exited (cluster processes reparented to us by the
    subreaper after their worker died); returns how many."""
    me = str(os.getpid())
    reaped = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and fields[1] == me:
            try:
                os.waitpid(int(stat.parent.name), os.WNOHANG)
                reaped += 1
            except ChildProcessError:
                pass
    return reaped


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _wait_group_gone(pgid: int, seconds: float, outcome: Outcome) -> None:
    """Workers may outlive pytest by a moment; SIGKILL them after `seconds`, and give
    up (it would be someone else's zombie) 5 s after that."""
    kill_at = time.monotonic() + seconds
    give_up = kill_at + 5.0
    while group_alive(pgid):
        _reap_group(pgid)
        now = time.monotonic()
        if now > give_up:
            return
        if now > kill_at:
            outcome.killed = True
            _killpg(pgid, signal.SIGKILL)
            kill_at = float("inf")
        time.sleep(0.05)


def run_owned(argv: Sequence[str], cwd: Path, teardown_seconds: float = TEARDOWN_SECONDS,
              straggler_seconds: float = STRAGGLER_SECONDS) -> Outcome:
    """Run `argv` as the owned child; returns once it and its whole group are gone."""
    become_subreaper()
    outcome = Outcome(returncode=0, seconds=0.0)
    child: list[subprocess.Popen[bytes]] = []

    signalled: list[float] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        hard = is_repeat(signalled[0] if signalled else None, now)
        if signalled and not hard:
            return  # a copy of the first
        outcome.signals.append(signum)
        signalled.append(now)
        if child:
            outcome.killed = outcome.killed or hard
            _killpg(child[0].pid, signal.SIGKILL if hard else signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    started = time.monotonic()
    try:
        child.append(subprocess.Popen(list(argv), cwd=cwd, process_group=0, preexec_fn=_child_setup))  # noqa: PLW1509  prctl and getppid only, no locks
        proc = child[0]
        if outcome.signals:  # arrived between the handler and the child
            _killpg(proc.pid, outcome.signals[0])
        deadline = None
        while proc.poll() is None:
            if outcome.signals and deadline is None:
                deadline = time.monotonic() + teardown_seconds
            if deadline is not None and time.monotonic() > deadline:
                outcome.killed = True
                _killpg(proc.pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.05)
        outcome.returncode = proc.returncode
        _wait_group_gone(proc.pid, straggler_seconds, outcome)
        if signalled:
            outcome.stop_seconds = time.monotonic() - signalled[0]
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        outcome.seconds = time.monotonic() - started
    return outcome


def children_of(pid: int) -> list[int]:
    """The pids whose parent is `pid` (read from /proc), zombies left out."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid) and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return sorted(found)
