"""Our Docker engine is not stopped under another pvchaos process that uses it: each user
holds a shared lock until it exits, and `stop_engine` stops only when it can take the lock
alone (seen here: one run's end stopped dockerd under another session's node image build)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pvchaos.tools import docker_engine

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
fcntl.flock(fd, fcntl.LOCK_SH)
print("held", flush=True)
time.sleep(30)
"""


def test_another_user_keeps_the_engine_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PVCHAOS_CACHE", str(tmp_path))
    docker_engine.engine_dir().mkdir(parents=True)
    assert not docker_engine._others_use_engine()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(docker_engine._use_lock_file())],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        docker_engine._hold_engine()  # this process uses it too; asking lets go of its own hold first
        assert docker_engine._others_use_engine()
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 5
    while docker_engine._others_use_engine() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not docker_engine._others_use_engine()
