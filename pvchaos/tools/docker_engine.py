"""A Docker engine for the kind backend: the user's when one answers, else our own.

Why our own: machines like CI runners without Docker Desktop, or these build machines,
can install Debian's `docker.io` but have no service manager to start it. The harness
then starts `dockerd` itself, with its data root, exec root, socket and log under the
cache, so it never shares state with (or stops) an engine a user runs. An engine the
harness started is recorded in `<cache>/docker/engine.json` and stopped by
`stop_engine` when no kind cluster of ours is left on it.

The runtime wrapper (`tools/docker_runtime.py`) is installed only on hosts whose
capability bounding set lacks CAP_SYS_RESOURCE: there `docker run --privileged`, which
kind always uses, fails with "unable to apply caps: operation not permitted".
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pvchaos.tools.build import cache_root

CAP_SYS_RESOURCE = 24
RUNTIME_NAME = "pvchaos-runc"
DEFAULT_SOCKET = "/var/run/docker.sock"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class EngineError(RuntimeError):
    """No engine could be had; the message is one line naming what is missing."""


@dataclass(frozen=True)
class Engine:
    """A Docker engine to talk to, and whether pvchaos started it (and so stops it)."""

    host: str
    owned: bool
    pid: int | None = None
    wrapped_runtime: bool = False

    def env(self) -> dict[str, str]:
        """The environment for `docker` and `kind` commands aimed at this engine."""
        return {**os.environ, "DOCKER_HOST": self.host}


def engine_dir() -> Path:
    return cache_root() / "docker"


def _state_file() -> Path:
    return engine_dir() / "engine.json"


def _log(msg: str) -> None:
    print(f"[pvchaos docker] {msg}", file=sys.stderr, flush=True)


def docker(engine: Engine, args: Sequence[str], timeout: float = 900,
           stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """The one place `docker` runs against an engine; the caller judges the status."""
    if stdin is not None:
        proc = subprocess.run(["docker", *args], input=stdin, capture_output=True, timeout=timeout,
                              env=engine.env(), check=False)
        return subprocess.CompletedProcess(proc.args, proc.returncode,
                                           proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"))
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, env=engine.env(), check=False)


def last_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The last non-empty line a command printed: what a one-line error quotes."""
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


def answers(host: str, timeout: float = 10) -> bool:
    """Does an engine answer `docker info` at `host`?"""
    if shutil.which("docker") is None:
        return False
    try:
        proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              text=True, timeout=timeout, env={**os.environ, "DOCKER_HOST": host}, check=False)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0 and bool(proc.stdout.strip())


def lacks_cap_sys_resource(status: str | None = None) -> bool:
    """True when CAP_SYS_RESOURCE is missing from this process's bounding set."""
    text = status if status is not None else Path("/proc/self/status").read_text()
    for line in text.splitlines():
        if line.startswith("CapBnd:"):
            return not (int(line.split()[1], 16) >> CAP_SYS_RESOURCE) & 1
    return False


def daemon_config(wrapper: Path | None, runc: str | None) -> dict[str, object]:
    """dockerd's daemon.json: the runtime wrapper as default runtime when one is needed."""
    if wrapper is None:
        return {}
    return {"runtimes": {RUNTIME_NAME: {"path": str(wrapper), "runtimeArgs": [f"--pvchaos-runc={runc}"]}},
            "default-runtime": RUNTIME_NAME}


def user_engine() -> Engine | None:
    """The engine the user already runs ($DOCKER_HOST, else the default socket)."""
    host = os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"
    if host == f"unix://{engine_dir() / 'docker.sock'}":
        return None
    return Engine(host=host, owned=False) if answers(host) else None


def _recorded_engine() -> Engine | None:
    """Our dockerd from an earlier call, if it still runs and answers."""
    try:
        data = json.loads(_state_file().read_text())
    except (OSError, ValueError):
        return None
    pid = int(data.get("pid", 0))
    if pid and _alive_dockerd(pid) and answers(data["host"]):
        return Engine(host=data["host"], owned=True, pid=pid, wrapped_runtime=bool(data.get("wrapped")))
    return None


def _reap(pid: int) -> None:
    """Collect `pid`'s exit status if it is our child, so a stopped dockerd leaves no zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _alive_dockerd(pid: int) -> bool:
    """True while `pid` is a running dockerd; a zombie counts as stopped (and is reaped if ours)."""
    _reap(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    name, state = stat.split("(", 1)[1].rsplit(")", 1)
    if state.split()[0] == "Z":
        _reap(pid)  # it may have exited after the first look
        return False
    return name == "dockerd"


def _install_docker_io() -> None:
    """Debian's docker.io, as root; anything else is a one-line refusal."""
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise EngineError("kind backend: no Docker engine answers and `dockerd` is not installed; "
                          "start Docker, or install Debian's docker.io as root (apt-get install docker.io)")
    _log("no Docker engine answers and dockerd is missing: installing Debian's docker.io")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "docker.io"]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            raise EngineError(f"kind backend: `{' '.join(argv)}` failed: {last_line(proc)}")


def _install_wrapper(directory: Path) -> Path:
    """Copy the runtime wrapper next to the engine, with this interpreter in its shebang."""
    source = Path(__file__).with_name("docker_runtime.py").read_text()
    target = directory / "pvchaos-runc"
    target.write_text(f"#!{sys.executable}\n" + source)
    target.chmod(0o755)
    return target


def start_engine() -> Engine:
    """Start our own dockerd under the cache and wait for its socket."""
    if shutil.which("dockerd") is None:
        _install_docker_io()
    if shutil.which("docker") is None:
        raise EngineError("kind backend: no `docker` client on PATH (apt-get install docker.io)")
    base = engine_dir()
    base.mkdir(parents=True, exist_ok=True)
    sock = base / "docker.sock"
    wrapper = runc = None
    if lacks_cap_sys_resource():
        runc = shutil.which("runc")
        if runc is None:
            raise EngineError("kind backend: no `runc` on PATH for the runtime wrapper (apt-get install runc)")
        wrapper = _install_wrapper(base)
        _log("this host's capability bounding set lacks CAP_SYS_RESOURCE: privileged containers run "
             f"through the runtime wrapper {wrapper}")
    (base / "daemon.json").write_text(json.dumps(daemon_config(wrapper, runc), indent=2))
    log = base / "dockerd.log"
    argv = ["dockerd", "--config-file", str(base / "daemon.json"), "--data-root", str(base / "data"),
            "--exec-root", str(base / "exec"), "--pidfile", str(base / "dockerd.pid"), "-H", f"unix://{sock}",
            "--bridge=none"]  # no docker0: kind clusters get networks of their own, removed at down
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    engine = Engine(host=f"unix://{sock}", owned=True, pid=proc.pid, wrapped_runtime=wrapper is not None)
    _state_file().write_text(json.dumps({"pid": proc.pid, "host": engine.host, "wrapped": engine.wrapped_runtime}))
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _forget()
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(empty log)"]
            raise EngineError(f"kind backend: dockerd exited with status {proc.returncode}: {tail[0]} (log: {log})")
        if sock.exists() and answers(engine.host, timeout=5):
            _log(f"started dockerd (pid {proc.pid}, socket {sock}, log {log})")
            return engine
        time.sleep(0.5)
    _terminate(proc.pid)
    _forget()
    raise EngineError(f"kind backend: dockerd did not answer within {START_TIMEOUT:.0f}s (log: {log})")


def ensure_engine() -> Engine:
    """The user's engine if one answers, else ours (started now if it is not running)."""
    return user_engine() or _recorded_engine() or start_engine()


def _terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline and _alive_dockerd(pid):
        time.sleep(0.2)
    if _alive_dockerd(pid):
        os.kill(pid, signal.SIGKILL)
    _wait_reaped(pid)


def _wait_reaped(pid: int, timeout: float = 15.0) -> None:
    """Collect our child's exit status once it can be collected. A Go daemon's main thread
    shows as a zombie ("Z") while its other threads are still exiting, and waitpid cannot
    reap it until they have: one WNOHANG call at that moment leaves a zombie for good."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # not our child (or already collected): its parent or init reaps it
        if done == pid:
            return
        time.sleep(0.05)


def _forget() -> None:
    _state_file().unlink(missing_ok=True)


def stop_engine(engine: Engine) -> bool:
    """Stop dockerd if pvchaos started it and nothing of ours runs on it; True if stopped."""
    if not engine.owned or engine.pid is None:
        return False
    left = docker(engine, ["ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster"], timeout=30)
    if left.returncode == 0 and left.stdout.strip():
        _log(f"dockerd (pid {engine.pid}) left running: kind containers remain on it")
        return False
    _terminate(engine.pid)
    _forget()
    _log(f"stopped dockerd (pid {engine.pid})")
    return True


def owned_engine() -> Engine | None:
    """Our dockerd if it runs (for `cluster down` and sweeps); never the user's."""
    return _recorded_engine()


CGROUP_ROOT = Path("/sys/fs/cgroup")


def thaw_containers(container_ids: Sequence[str], root: Path = CGROUP_ROOT) -> list[str]:
    """Thaw every frozen cgroup under these containers; returns the cgroups thawed.

    Why: runc freezes a container's cgroup while it changes it, and a runc killed in that
    moment (a kind node deleted while its kubelet was still creating a pod's sandbox) leaves
    the cgroup frozen: its processes sit in D state, and `docker rm -f` of the node then
    fails with "did not receive an exit event" (seen: certify's bad-manifest case left a
    worker running). cgroup v1 (`freezer.state` FROZEN) and v2 (`cgroup.freeze` 1), with
    the cgroupfs and the systemd cgroup drivers."""
    thawed: list[str] = []
    for cid in container_ids:
        bases = [root / "freezer" / "docker" / cid, root / "freezer" / "system.slice" / f"docker-{cid}.scope",
                 root / "docker" / cid, root / "system.slice" / f"docker-{cid}.scope"]
        for base in (b for b in bases if b.is_dir()):
            for name, frozen, thaw in (("freezer.state", "FROZEN", "THAWED"), ("cgroup.freeze", "1", "0")):
                for path in base.rglob(name):
                    try:
                        if path.read_text().strip() == frozen:
                            path.write_text(thaw)
                            thawed.append(str(path.parent))
                    except OSError:
                        continue
    return thawed
