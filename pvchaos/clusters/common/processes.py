"""Start and stop the harness's host processes (local control planes; the host-side CSI stack of
local and kind clusters), never touching anyone else's.

Each process runs in its own session (so a terminal's Ctrl-C reaches only the harness,
which then tears down in order) and can be tied to its owner's life with
PR_SET_PDEATHSIG, so even a SIGKILLed test run leaves no control plane behind. The
death signal fires when the *thread* that spawned the process exits, so clusters are
started from the main thread (pytest runs fixtures there).
A pid is only signalled after /proc confirms its command line still names the
cluster's directory, so a recycled pid is never hit.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ProcessRecord:
    """What we need to find and stop a process later, from any other process."""

    component: str
    pid: int
    argv: tuple[str, ...]
    log: str

    def to_json(self) -> dict[str, object]:
        return {"component": self.component, "pid": self.pid, "argv": list(self.argv), "log": self.log}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessRecord:  # parsed JSON
        return cls(str(data["component"]), int(data["pid"]), tuple(data["argv"]), str(data["log"]))


def _die_with_parent() -> Callable[[], None]:
    libc = ctypes.CDLL(None, use_errno=True)

    def prctl() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # data is disposable: die fast

    return prctl


def spawn(component: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
          tie_to_parent: bool = True) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
    """Start one component with its output in `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out = log.open("ab")
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent() if tie_to_parent else None,  # noqa: PLW1509  one prctl() call, no locks
        )
    finally:
        out.close()
    return proc, ProcessRecord(component, proc.pid, tuple(argv), str(log))


def process_start_time(pid: int) -> int | None:
    """Clock ticks since boot at which `pid` started: with the pid, a unique identity."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _cmdline(pid: int) -> bytes | None:
    """The command line of `pid`, waiting out the instant inside execve when it reads empty.

    Popen returns once the close-on-exec pipe closes, which the kernel does before it
    sets up the new program's arguments: a read at that moment gives b"" for a process
    that is about to run exactly what we asked for.
    """
    for _ in range(50):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        if cmdline:
            return cmdline
        time.sleep(0.002)
    return cmdline


def is_ours(record: ProcessRecord, marker: str) -> bool:
    """True while the pid is alive and its command line still contains `marker`."""
    cmdline = _cmdline(record.pid)
    if cmdline is None:
        return False
    try:
        stat = Path(f"/proc/{record.pid}/stat").read_text(errors="replace")
    except OSError:
        return False
    if ") Z " in stat:  # a zombie: already dead, only waiting to be reaped
        return False
    return marker.encode() in cmdline


def stop(record: ProcessRecord, marker: str, grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; returns once the process is gone."""
    if not is_ours(record, marker):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(record.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap(record.pid)
            if not is_ours(record, marker):
                return
            time.sleep(0.05)
    raise RuntimeError(f"{record.component} (pid {record.pid}) survived SIGKILL")


def kill_all(records: list[ProcessRecord], marker: str, timeout: float = 5.0) -> None:
    """SIGKILL several processes at the same instant (a power cut), then wait for all."""
    live = [r for r in records if is_ours(r, marker)]
    for r in live:
        try:
            os.kill(r.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while live and time.monotonic() < deadline:
        for r in live:
            _reap(r.pid)
        live = [r for r in live if is_ours(r, marker)]
        time.sleep(0.02)
    if live:
        raise RuntimeError(f"{[r.component for r in live]} survived SIGKILL")


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def log_tail(path: str | Path, lines: int = 3) -> str:
    """The last meaningful lines of a log, folded into one line for an error message."""
    try:
        text = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    picked = [ln.strip() for ln in text if ln.strip()][-lines:]
    return " | ".join(picked)[-600:]
